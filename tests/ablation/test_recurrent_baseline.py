"""sb3-contrib's RecurrentPPO as a sweep baseline (``sb3-contrib:recurrent-ppo``): rlkit's
``--memory lstm`` network at equal settings, evaluated with its state carried through each episode."""

import numpy as np
import pytest

import rlkit
from rlkit.ablation.spec import expand
from rlkit.errors import ConfigError

pytest.importorskip("sb3_contrib")

CFG = rlkit.TrainConfig(env="CartPole-v1", env_wrappers="no-velocity", num_envs=4, num_steps=64, num_minibatches=2,
                        update_epochs=2, total_steps=512, eval_episodes=3, memory="lstm", memory_size=16,
                        hidden_sizes=(32,), progress=False)


def test_the_baseline_is_rlkits_lstm_network_at_equal_settings():
    from rlkit.ablation.baselines import build_model

    model = build_model("sb3-contrib:recurrent-ppo", CFG.to_dict())
    policy = model.policy
    assert policy.lstm_actor.hidden_size == 16 and policy.lstm_actor.num_layers == 1
    assert policy.lstm_critic is not None and policy.lstm_critic.hidden_size == 16  # the critic's own LSTM
    assert [m.out_features for m in policy.mlp_extractor.policy_net if hasattr(m, "out_features")] == [32]
    assert (model.n_steps, model.batch_size, model.n_epochs) == (64, 128, 2)
    assert model.observation_space.shape == (2,)  # the run's wrapper stack on the baseline's envs too


def test_its_evaluation_starts_each_episode_from_a_zero_state(tmp_path):
    """RecurrentPPO is asked with ``episode_start`` true (and no state) at each episode's first step
    only, and with the state its previous call returned at every other step."""
    from rlkit.ablation.baselines import _greedy, build_model
    from rlkit.gym.evaluation import run_episodes

    model = build_model("sb3-contrib:recurrent-ppo", CFG.to_dict())
    calls, predict = [], model.predict

    def spy(obs, state=None, episode_start=None, deterministic=False):
        action, new_state = predict(obs, state=state, episode_start=episode_start, deterministic=deterministic)
        calls.append((bool(episode_start[0]), state, new_state))
        return action, new_state

    model.predict = spy
    act, start_episode = _greedy(model, "sb3-contrib:recurrent-ppo")
    result = run_episodes(act, "CartPole-v1", 3, seed=7, wrappers="no-velocity", start_episode=start_episode)
    firsts = np.cumsum([0, *result.lengths[:-1]])
    assert [i for i, c in enumerate(calls) if c[0]] == list(firsts) and all(calls[i][1] is None for i in firsts)
    assert all(calls[i][1] is calls[i - 1][2] for i in range(1, len(calls)) if i not in firsts)


def test_it_trains_and_evaluates_in_a_sweep_run(tmp_path):
    from rlkit.ablation.baselines import train_baseline

    result = train_baseline("sb3-contrib:recurrent-ppo", CFG.to_dict(), tmp_path)
    assert result["total_steps"] == 512 and np.isfinite(result["eval_return_mean"])


def test_a_spec_giving_it_a_gru_is_refused():
    data = {"name": "t", "envs": ["CartPole-v1"], "seeds": 1, "memory": "gru", "env_wrappers": "no-velocity",
            "variants": {"gru": {}, "sb3-contrib:recurrent-ppo": {}}}
    with pytest.raises(ConfigError, match="RecurrentPPO runs an LSTM .* memory = .gru."):
        expand(data)
    data["memory"] = "lstm"
    assert {r.kind for r in expand(data).runs} == {"rlkit", "sb3-contrib:recurrent-ppo"}


@pytest.mark.parametrize("variants, where, words", [
    ({"sb3:ppo": {"memory": "lstm"}}, "variants.sb3:ppo", "sb3:ppo runs a feed-forward policy"),
    ({"sb3-contrib:recurrent-ppo": {"bptt_length": 16}}, "variants.sb3-contrib:recurrent-ppo",
     "RecurrentPPO runs an LSTM over whole episode segments; the spec sets bptt_length = 16"),
    ({"sb3:ppo": {"memory_size": 16}}, "variants.sb3:ppo", "has no memory"),
    ({"mlp16": {"memory_size": 16}}, "variants.mlp16", "variant 'mlp16' has no memory"),
    ({"bp": {"bptt_length": 16}}, "variants.bp", "variant 'bp' has no memory"),
])
def test_memory_settings_a_run_would_not_use_are_refused(variants, where, words):
    data = {"name": "t", "envs": ["CartPole-v1"], "seeds": 1, "env_wrappers": "no-velocity",
            "variants": {"lstm": {"memory": "lstm"}, **variants}}
    with pytest.raises(ConfigError, match=words) as info:
        expand(data)
    assert where in str(info.value)


def test_a_grid_of_memory_sizes_beside_a_feed_forward_variant_is_refused_and_shared_settings_are_not():
    data = {"name": "t", "envs": ["CartPole-v1"], "seeds": 1, "variants": {"lstm": {"memory": "lstm"}, "mlp": {}},
            "grid": {"memory_size": [8, 16]}}
    with pytest.raises(ConfigError, match="variant 'mlp' has no memory"):
        expand(data)
    shared = expand({**data, "grid": {}, "memory_size": 16,
                     "variants": {"lstm": {"memory": "lstm"}, "mlp": {}, "sb3-contrib:recurrent-ppo": {}}})
    memory = {r.variant: r.config["memory"] for r in shared.runs}
    assert memory == {"lstm": "lstm", "mlp": "", "sb3-contrib:recurrent-ppo": "lstm"}  # as each runs, for hparams
    assert "memory" in shared.runs[0].hparams
