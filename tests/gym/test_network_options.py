"""The networks' activation and initialization (--activation relu, --no-ortho-init): the numpy copy
that acts computes what the torch model computes, PyTorch's default initialization replaces the
orthogonal one in every layer (the memory's too), the fused MLP (tanh) stands aside, and what
cannot honour them refuses in one line; Stable-Baselines3 baselines get the same settings."""

import numpy as np
import pytest
import torch
from torch import nn

import rlkit
from rlkit.errors import ConfigError
from rlkit.gym.agent import Agent
from rlkit.gym.envs import make_env


def _agent(**kw):
    cfg = rlkit.preset("cartpole", **kw)
    env = make_env(cfg.env, cfg.env_options, cfg.env_wrappers)
    torch.manual_seed(0)
    return Agent.build(cfg, env.observation_space, env.action_space)


@pytest.mark.parametrize("memory", ["", "lstm"])
def test_relu_layers_act_in_numpy_as_in_torch(memory):
    agent = _agent(activation="relu", memory=memory, hidden_sizes=(16, 16))
    model = agent.model
    assert any(isinstance(m, nn.ReLU) for m in model.modules()) and not any(isinstance(m, nn.Tanh)
                                                                            for m in model.modules())
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32) * 3
    actor = model.snapshot()
    if memory:
        state = np.random.default_rng(1).normal(size=(5, model.state_size)).astype(np.float32)
        params, values = model.replay(torch.from_numpy(obs)[None], torch.zeros(1, 5, dtype=torch.bool),
                                      torch.from_numpy(state))
        fa, fc, _ = actor.features(obs, state)
        numpy_params, numpy_values = actor.tail.params(fa), actor.tail.value(fc)
    else:
        params, values = model(torch.from_numpy(obs))
        numpy_params, numpy_values = actor.params(obs), actor.value(obs)
    np.testing.assert_allclose(numpy_params, params.detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(numpy_values, values.detach().numpy(), atol=1e-5)


def test_without_orthogonal_init_every_layer_has_pytorchs_default():
    ortho, default = _agent(memory="lstm"), _agent(memory="lstm", ortho_init=False)
    for model in (ortho, default):
        assert {n for n, _ in model.model.named_parameters()} == {n for n, _ in ortho.model.named_parameters()}
    biases = {n: p for n, p in default.model.named_parameters() if "bias" in n}
    assert biases and all(bool(p.abs().sum() > 0) for p in biases.values())  # orthogonal init zeroes them
    assert all(bool(p.abs().sum() == 0) for n, p in ortho.model.named_parameters() if "bias" in n)
    last = default.model.actor[-1].weight  # the policy output: not the 0.01-gain orthogonal layer
    assert float(last.abs().max()) > 0.05 > float(ortho.model.actor[-1].weight.abs().max())


def test_a_relu_run_trains_on_the_plain_mlp_and_unfit_settings_are_one_line(tmp_path):
    from rlkit.errors import UnsupportedSpaceError
    from rlkit.gym.trainer import PPOTrainer

    cfg = rlkit.preset("cartpole", activation="relu", ortho_init=False, total_steps=512, num_envs=2, num_steps=128,
                       eval_episodes=0, progress=False, logdir=str(tmp_path), run_name="relu", kernels="fast")
    trainer = PPOTrainer(cfg)
    assert trainer.kernels.fast and not trainer.kernels.fused_mlp  # the fused MLP computes tanh layers
    trainer.train()
    from rlkit.gym.population import train_population

    with pytest.raises(ConfigError, match="stacked MLPs compute tanh layers") as info:
        train_population(rlkit.preset("cartpole", activation="relu", logdir=str(tmp_path)), [1, 2])
    assert "\n" not in str(info.value)
    with pytest.raises(UnsupportedSpaceError, match="keeps its ReLU"):
        _agent(env="rlkit-test/Pixels-v0", activation="relu")
    with pytest.raises(ConfigError):
        rlkit.preset("cartpole", activation="gelu")


def test_the_sb3_baselines_get_the_activation_the_init_and_the_annealed_clip():
    pytest.importorskip("stable_baselines3")
    from rlkit.ablation.baselines import build_model

    record = rlkit.preset("cartpole", activation="relu", ortho_init=False, anneal_clip=True, num_envs=2,
                          num_steps=64, num_minibatches=2).to_dict()
    model = build_model("sb3:ppo", record)
    assert model.policy.activation_fn is nn.ReLU and model.policy.ortho_init is False
    assert model.clip_range(1.0) == pytest.approx(0.2) and model.clip_range(0.25) == pytest.approx(0.05)
    plain = build_model("sb3:ppo", rlkit.preset("cartpole", num_envs=2, num_steps=64, num_minibatches=2).to_dict())
    assert plain.policy.activation_fn is nn.Tanh and plain.policy.ortho_init is True
    assert plain.clip_range(0.25) == pytest.approx(0.2)
