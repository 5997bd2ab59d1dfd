"""HP3O: trajectory assembly, FIFO buffer, hybrid batches, HP3O+ baselines."""

import numpy as np
import pytest
import torch

import rlkit
from rlkit.core.buffer import RolloutBuffer
from rlkit.variants.hp3o import TrajectoryBuffer
from rlkit.variants.hp3o_episodes import TrajectoryAssembler, Trajectory, build_hybrid_batches, hp3o_plus_baseline


def traj(ret, length=4, update=0, terminated=True, final_value=0.0, obs=None, values=None, rewards=None):
    obs = torch.arange(length, dtype=torch.float32)[:, None].repeat(1, 2) if obs is None else obs
    return Trajectory(obs, torch.zeros(length, dtype=torch.int64), torch.full((length,), -0.5),
                      torch.zeros(length) if values is None else values,
                      torch.ones(length) if rewards is None else rewards, torch.zeros(2), final_value, terminated,
                      not terminated, float(ret), update)


def fill(buf, t, n_envs, dones, terminated=None, tag=0.0):
    """One step of a fake rollout: obs encode (tag, t, env) so trajectories can be checked."""
    obs = np.array([[tag, t, n] for n in range(n_envs)], np.float32)
    buf.add_action(t, obs, np.zeros(n_envs, np.int64), np.full(n_envs, -1.0), np.full(n_envs, 0.5))
    term = np.array(dones if terminated is None else terminated)
    buf.add_outcome(t, np.ones(n_envs), np.full(n_envs, 2.0), term, np.array(dones))


def test_assembly_across_rollout_boundaries_and_resets():
    asm = TrajectoryAssembler(2)
    buf = RolloutBuffer(4, 2, obs_dim=3, action_shape=(), action_dtype=torch.int64)
    # Rollout 1: env 0 ends at t=1 (terminated) and runs on; env 1 runs through.
    for t in range(4):
        fill(buf, t, 2, [t == 1, False], tag=1.0)
    first = asm.add_rollout(buf, update=0)
    assert [len(x) for x in first] == [2] and first[0].terminated and first[0].episode_return == 4.0
    assert first[0].obs[:, 1].tolist() == [0, 1] and first[0].obs[:, 2].tolist() == [0, 0]
    # Rollout 2: env 1 is truncated at t=0, env 0 at t=2 (time-out, with a final value).
    for t in range(4):
        fill(buf, t, 2, [t == 2, t == 0], terminated=[False, False], tag=2.0)
    buf.set_final(2, np.array([0]), np.zeros((1, 3)), np.array([7.0]))
    second = asm.add_rollout(buf, update=1)
    assert [len(x) for x in second] == [5, 5]  # env 1: 4 + 1 steps (ends at t=0), env 0: 2 + 3 steps
    env1, env0 = second
    assert env1.obs[:, 0].tolist() == [1, 1, 1, 1, 2] and env1.obs[:, 2].tolist() == [1] * 5
    assert env0.obs[:, 0].tolist() == [1, 1, 2, 2, 2] and env0.obs[:, 1].tolist() == [2, 3, 0, 1, 2]
    assert env0.truncated and not env0.terminated and env0.final_value == 7.0 and env0.finished_update == 1
    assert env0.log_probs.tolist() == [-1.0] * 5 and env0.episode_return == 10.0


def test_discarded_tails_never_join_a_later_episode():
    asm = TrajectoryAssembler(1)
    buf = RolloutBuffer(3, 1, obs_dim=3, action_shape=(), action_dtype=torch.int64)
    for t in range(3):
        fill(buf, t, 1, [False], tag=1.0)
    assert asm.add_rollout(buf, 0) == []
    asm.discard_pending()  # envs reset (checkpoint)
    for t in range(3):
        fill(buf, t, 1, [t == 1], tag=2.0)
    (only,) = asm.add_rollout(buf, 1)
    assert only.obs[:, 0].tolist() == [2, 2]


def test_fifo_eviction_order():
    buf = TrajectoryBuffer(3)
    buf.add([traj(r) for r in (10, 20, 30)])
    buf.add([traj(40), traj(50)])
    assert [t.episode_return for t in buf.items] == [30, 40, 50]


def test_best_trajectory_always_in_the_hybrid_batch_and_others_distinct():
    buf = TrajectoryBuffer(20)
    buf.add([traj(r) for r in [5, 99, 3, 7, 1, 2, 8, 4]])
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(200):
        picked = buf.sample(5, rng)
        assert picked[0] == 1 and len(set(picked)) == 5
        seen.update(picked[1:])
    assert seen == {0, 2, 3, 4, 5, 6, 7}  # the others are drawn uniformly from the rest
    assert buf.sample(50, rng)[0] == 1 and len(buf.sample(50, rng)) == 8


def test_hybrid_batch_keeps_behaviour_log_probs_and_splits_samples():
    trajs = [traj(10, length=6), traj(5, length=3)]
    hybrid, _ = build_hybrid_batches(trajs, 0.99, 0.95, samples=8, rng=np.random.default_rng(0), sampling="topup")
    batch = hybrid.epoch_batch()
    assert batch.obs.shape[0] == 8
    assert torch.equal(batch.log_probs, torch.full((8,), -0.5))  # the stored behaviour log-probs
    # Even split: 4 rows from each trajectory (the short one sampled with replacement).
    assert hybrid.segments == [(0, 6), (6, 9)]


def test_truncated_trajectory_bootstraps_terminated_does_not():
    rewards = torch.zeros(2)
    trunc = traj(0, length=2, terminated=False, final_value=10.0, rewards=rewards)
    term = traj(0, length=2, terminated=True, final_value=10.0, rewards=rewards)
    hybrid, _ = build_hybrid_batches([trunc, term], 0.5, 1.0, samples=4, rng=np.random.default_rng(0))
    adv = hybrid.pooled.advantages
    torch.testing.assert_close(adv[:2], torch.tensor([2.5, 5.0]))
    torch.testing.assert_close(adv[2:], torch.zeros(2))


def test_recomputed_values_come_from_the_current_critic():
    t = traj(1, length=3)
    hybrid, _ = build_hybrid_batches([t], 1.0, 1.0, samples=3, rng=np.random.default_rng(0),
                                     value_fn=lambda obs: torch.full((obs.shape[0],), 3.0))
    assert torch.equal(hybrid.pooled.values, torch.full((3,), 3.0))


def test_hp3o_plus_replaces_baseline_only_under_its_rule():
    obs = torch.tensor([[0.0, 0.0], [1.0, 0.0], [5.0, 5.0], [0.0, 0.1]])
    values = torch.tensor([0.0, 3.0, 0.0, 2.0])
    best_obs = torch.tensor([[0.0, 0.05], [1.0, 0.0]])
    best_values = torch.tensor([1.0, 2.5])
    out = hp3o_plus_baseline(obs, values, best_obs, best_values, threshold=0.2)
    # near & larger -> replaced; near & smaller -> kept; far -> kept; near & smaller -> kept
    assert out.tolist() == [1.0, 3.0, 0.0, 2.0]


def test_hp3o_plus_changes_advantages_of_non_best_only():
    best = traj(10, length=2, obs=torch.zeros(2, 2), values=torch.full((2,), 5.0))
    other = traj(1, length=2, obs=torch.zeros(2, 2), values=torch.zeros(2))
    plain, _ = build_hybrid_batches([best, other], 0.9, 0.9, 4, np.random.default_rng(0))
    plus, frac = build_hybrid_batches([best, other], 0.9, 0.9, 4, np.random.default_rng(0), plus_threshold=0.1)
    assert frac == 1.0
    torch.testing.assert_close(plus.pooled.advantages[:2], plain.pooled.advantages[:2])
    torch.testing.assert_close(plus.pooled.advantages[2:], plain.pooled.returns[2:] - 5.0)
    torch.testing.assert_close(plus.pooled.returns, plain.pooled.returns)


def test_any_hp3o_option_turns_hp3o_on():
    assert rlkit.TrainConfig(hp3o_plus=True).variant == "hp3o+"
    assert rlkit.TrainConfig(hp3o_buffer_size=10).variant == "hp3o"
    assert rlkit.TrainConfig().variant == "ppo"


@pytest.mark.parametrize("kw,match", [
    (dict(hp3o=True, hp3o_trajectories=30, hp3o_buffer_size=20), "larger than the buffer"),
    (dict(hp3o=True, hp3o_samples=1000, num_minibatches=3), "hp3o_samples"),
    (dict(hp3o=True, hp3o_threshold=-0.1), "hp3o_threshold"),
    (dict(hp3o=True, hp3o_buffer_size=0), "hp3o_buffer_size"),
    (dict(hp3o=True, hp3o_advantages="first-use", hp3o_recompute_values=True), "hp3o_recompute_values"),
    (dict(hp3o=True, hp3o_schedule="per-step"), "hp3o_schedule"),
    (dict(hp3o=True, hp3o_threshold=0.1), "applies to HP3O\\+ only"),
])
def test_invalid_hp3o_settings_are_one_line_errors(kw, match):
    with pytest.raises(rlkit.ConfigError, match=match) as e:
        rlkit.TrainConfig(**kw)
    assert "\n" not in str(e.value)


def test_hp3o_trains_and_logs_diagnostics(logdir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    cfg = rlkit.preset("cartpole", "hp3o-plus", total_steps=4 * 512, logdir=logdir, eval_episodes=1, progress=False,
                       update_epochs=2)
    result = rlkit.train(cfg)
    assert result.variant == "hp3o+"
    acc = EventAccumulator(result.run_dir)
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    for tag in ("hp3o/buffer_fill", "hp3o/best_return", "hp3o/sampled_age", "hp3o/replay_ratio_mean",
                "hp3o/replay_clipfrac", "hp3o/baseline_replaced_frac", "losses/approx_kl", "losses/clipfrac"):
        assert tag in tags, tag
    assert max(e.value for e in acc.Scalars("hp3o/buffer_fill")) == 20


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["hp3o", "outer-nesterov"])
def test_variants_learn_cartpole(logdir, variant):
    cfg = rlkit.preset("cartpole", variant, total_steps=100_000, logdir=logdir, eval_episodes=20, progress=False)
    result = rlkit.train(cfg)
    assert result.eval_return_mean >= 475, result.eval_return_mean


def test_paper_sampling_takes_each_trajectory_without_replacement_up_to_its_share():
    """The authors' code: min(samples / k, L) transitions per trajectory, none repeated in an epoch
    (rlkit used to top up to exactly `samples` with replacement: the old behaviour is 'topup')."""
    from rlkit.core.buffer import Batch
    from rlkit.variants.hp3o_episodes import HybridBatches

    n = 13  # trajectories of 3 and 10 steps, pooled
    pooled = Batch(torch.arange(n, dtype=torch.float32)[:, None], torch.zeros(n, dtype=torch.int64), torch.zeros(n),
                   torch.zeros(n), torch.zeros(n), torch.zeros(n))
    rng = np.random.default_rng(0)
    paper = HybridBatches(pooled, [(0, 3), (3, 13)], samples=12, rng=rng, sampling="paper")
    for _ in range(20):
        picked = paper.epoch_batch().obs[:, 0].long().tolist()
        assert len(picked) == 3 + 6 and len(set(picked)) == len(picked)  # all 3 short ones, 6 of the 10
        assert sorted(picked[:3]) == [0, 1, 2] and all(3 <= i < 13 for i in picked[3:])
    topup = HybridBatches(pooled, [(0, 3), (3, 13)], samples=12, rng=rng, sampling="topup")
    picked = topup.epoch_batch().obs[:, 0].long().tolist()
    assert len(picked) == 12 and len(set(picked[:6])) <= 3  # the short trajectory is drawn with repeats


def test_timeouts_can_be_terminal_as_in_the_authors_code():
    from rlkit.variants.hp3o_episodes import EpisodeAdapter

    class Critic(torch.nn.Module):
        head = rlkit.CategoricalHead(2)

        def forward(self, obs):
            return torch.zeros(obs.shape[0], 2), torch.zeros(obs.shape[0])

    t = traj(0, length=2, terminated=False, final_value=10.0, rewards=torch.zeros(2))
    advantages = {}
    for terminal in (False, True):
        options = rlkit.VariantGroups(hp3o=True, hp3o_timeouts_terminal=terminal, hp3o_buffer_size=2,
                                       hp3o_trajectories=1, hp3o_samples=2)
        adapter = EpisodeAdapter(1, options, 0.5, 1.0, 0.2, np.random.default_rng(0), Critic(), torch.device("cpu"))
        advantages[terminal] = adapter.batches([t], 0)[0].pooled.advantages
    torch.testing.assert_close(advantages[False], torch.tensor([2.5, 5.0]))  # bootstraps gamma * V(final)
    torch.testing.assert_close(advantages[True], torch.zeros(2))


def test_paper_presets_carry_the_authors_settings():
    cfg = rlkit.preset("cartpole", "hp3o-plus-paper")
    assert (cfg.gae_lambda, cfg.ent_coef, cfg.max_grad_norm, cfg.learning_rate, cfg.hidden_sizes) == \
        (0.92, 4e-4, 0.8, 5e-4, (128, 128))
    assert cfg.hp3o_plus and cfg.hp3o_timeouts_terminal and cfg.hp3o_sampling == "paper" and cfg.hp3o_samples // cfg.num_minibatches == 128
    assert cfg.hp3o_contiguous_minibatches and cfg.hp3o_redraw_each_epoch and cfg.hp3o_schedule == "episode"
    assert (cfg.norm_obs, cfg.norm_reward, cfg.anneal_lr, cfg.hp3o_threshold, cfg.hp3o_plus_form) == \
        (False, False, False, 0.0, "td")
    assert (cfg.clip_vloss, cfg.vloss_form, cfg.adam_eps) == (True, "clipped-mse", 1e-8)  # SB3's value loss, torch's eps


def test_threshold_zero_replaces_exact_matches_only():
    obs = torch.tensor([[0.0, 1.0], [0.0, 1.001], [2.0, 2.0]])
    best_obs = torch.tensor([[0.0, 1.0], [2.0, 2.0]])
    out = hp3o_plus_baseline(obs, torch.zeros(3), best_obs, torch.tensor([4.0, -1.0]), threshold=0.0)
    torch.testing.assert_close(out, torch.tensor([4.0, 0.0, 0.0]))  # the exact match with a larger value only


def test_rlhf_refuses_the_gymnasium_only_schedule():
    from rlkit.rlhf.config import RLHFConfig

    with pytest.raises(rlkit.ConfigError, match="Gymnasium"):
        RLHFConfig(hp3o=True, hp3o_trajectories=4, hp3o_schedule="episode")


def test_hp3o_plus_two_estimators_by_hand():
    """Non-best trajectory: 3 steps, reward 1 each, own values V = 1, 2, 3, terminated; the best
    trajectory has the same states valued V' = 5 (within the threshold, larger), so every state's
    value is replaced. gamma 1, lambda 1."""
    rewards, obs = torch.ones(3), torch.tensor([[0.0], [1.0], [2.0]])
    best = traj(10, length=3, values=torch.full((3,), 5.0), obs=obs)
    other = traj(3, length=3, values=torch.tensor([1.0, 2.0, 3.0]), obs=obs, rewards=rewards, terminated=True)
    out = {}
    for form in ("baseline", "td"):
        hybrid, frac = build_hybrid_batches([best, other], 1.0, 1.0, samples=6, rng=np.random.default_rng(0),
                                            plus_threshold=0.5, plus_form=form)
        out[form] = (hybrid.pooled.advantages[3:], hybrid.pooled.returns[3:])
        assert frac == 1.0
    # baseline: returns from own values (3, 2, 1), advantages = returns - 5, value targets unchanged
    torch.testing.assert_close(out["baseline"][0], torch.tensor([-2.0, -3.0, -4.0]))
    torch.testing.assert_close(out["baseline"][1], torch.tensor([3.0, 2.0, 1.0]))
    # td (the authors' code): delta'_t = r_t + V(s_t+1) - V'(s_t) = 1 + 2 - 5, 1 + 3 - 5, 1 + 0 - 5
    # = -2, -1, -4; A' sums them from t on: -7, -5, -4; value targets A' + V = -6, -3, -1
    torch.testing.assert_close(out["td"][0], torch.tensor([-7.0, -5.0, -4.0]))
    torch.testing.assert_close(out["td"][1], torch.tensor([-6.0, -3.0, -1.0]))


def test_redrawing_each_epoch_keeps_the_best_and_varies_the_others():
    from rlkit.core.buffer import Batch
    from rlkit.variants.hp3o_episodes import HybridBatches

    n = 5 * 4  # five trajectories of 4 steps, the best first
    pooled = Batch(torch.arange(n, dtype=torch.float32)[:, None], torch.zeros(n, dtype=torch.int64), torch.zeros(n),
                   torch.zeros(n), torch.zeros(n), torch.zeros(n))
    segments = [(4 * i, 4 * i + 4) for i in range(5)]
    hybrid = HybridBatches(pooled, segments, samples=8, rng=np.random.default_rng(0), redraw_k=2)
    drawn = set()
    for _ in range(30):
        rows = hybrid.epoch_batch().obs[:, 0].long()
        trajectories = sorted(set((rows // 4).tolist()))
        assert len(trajectories) == 2 and trajectories[0] == 0 and len(rows) == 8  # best + one other, 4 steps each
        drawn.add(trajectories[1])
    assert drawn == {1, 2, 3, 4}  # the other trajectory changes from epoch to epoch


def test_redraw_hands_every_stored_trajectory_to_the_adapter():
    from rlkit.variants.hp3o import HP3O

    class Adapter:
        record_type = Trajectory

        def __init__(self):
            self.stored = [traj(r) for r in (1.0, 5.0, 3.0)]

        def split(self, rollout, update):
            out, self.stored = self.stored, []
            return out

        def batches(self, chosen, update):
            return chosen, {}

        def reset(self):
            pass

    chosen, stats = HP3O(Adapter(), 10, 2, np.random.default_rng(0), redraw_each_epoch=True).batches(None, 0)
    assert [t.episode_return for t in chosen][0] == 5.0 and len(chosen) == 3 and stats["hp3o/sampled_trajectories"] == 3


class _Episodes:
    """A fake adapter whose rollouts finish a given number of episodes each."""

    record_type = Trajectory

    def __init__(self, per_rollout):
        self.per_rollout, self.made = list(per_rollout), 0

    def split(self, rollout, update):
        n = self.per_rollout.pop(0)
        self.made += n
        return [traj(float(self.made - i), update=update) for i in range(n)]

    def batches(self, chosen, update):
        return [t.episode_return for t in chosen], {"x": 1.0}

    def reset(self):
        pass


def test_episode_schedule_updates_once_per_finished_episode_once_k_are_stored():
    from rlkit.variants.base import Passes
    from rlkit.variants.hp3o import HP3O

    hp3o = HP3O(_Episodes([3, 4, 0, 30]), capacity=20, k=5, rng=np.random.default_rng(0), schedule="episode")
    source, stats = hp3o.batches(None, 0)  # 3 stored < k: nothing to learn from yet
    assert source is None and stats["hp3o/updates"] == 0
    source, stats = hp3o.batches(None, 1)  # the buffer grows 4, 5, 6, 7: updates at 5, 6 and 7
    assert isinstance(source, Passes) and len(source.sources) == 3 and stats["hp3o/updates"] == 3
    assert all(len(s) == 5 and s[0] == 7.0 for s in source.sources)  # each its own draw, the best first
    assert len({tuple(s) for s in source.sources}) > 1
    assert hp3o.batches(None, 2)[0] is None  # no episode finished: no update
    source, _ = hp3o.batches(None, 3)  # 30 more (the buffer stays full at 20): 30 updates
    assert len(source.sources) == 30
    rollout = HP3O(_Episodes([3, 4]), capacity=20, k=5, rng=np.random.default_rng(0))
    assert rollout.batches(None, 0)[0] == [3.0, 2.0, 1.0] and len(rollout.batches(None, 1)[0]) == 5


def test_episode_schedule_in_the_trainer_runs_one_update_per_pass(tmp_path, monkeypatch):
    from rlkit.gym.trainer import PPOTrainer

    cfg = rlkit.preset("cartpole", "hp3o-paper", total_steps=2048, num_envs=2, num_steps=256, hp3o_samples=640,
                       logdir=str(tmp_path), eval_every=0, seed=3)
    trainer = PPOTrainer(cfg)
    calls = []
    original = trainer.optimize
    monkeypatch.setattr(trainer, "optimize", lambda source: calls.append(1) or original(source))
    total = 0
    for _ in range(cfg.num_updates):
        stats = trainer.update()
        total += stats["hp3o/updates"]
        assert len(calls) == total
    assert total > cfg.num_updates  # CartPole's early episodes are short: many updates per rollout
    trainer.envs.close()


def test_one_env_one_step_rollouts_give_the_authors_between_episode_timing(tmp_path):
    """With ``--num-envs 1 --num-steps 1`` and the per-episode schedule, the update runs right
    after the step that ends an episode (once k trajectories are stored), and the next step is
    acted by the updated policy, as in the authors' loop (play an episode, learn, play the next)."""
    from rlkit.gym.trainer import PPOTrainer

    cfg = rlkit.preset("cartpole", "hp3o-paper", total_steps=600, num_envs=1, num_steps=1, hp3o_samples=640,
                       logdir=str(tmp_path), eval_every=0, seed=5)
    trainer = PPOTrainer(cfg)
    episodes = updates = 0
    for _ in range(cfg.num_updates):
        before = trainer.learner.flat.param.detach().clone()
        stats = trainer.update()
        ended = bool(trainer.buffer.np["dones"][0, 0])
        episodes += ended
        expected = int(ended and episodes >= cfg.hp3o_trajectories)
        assert stats["hp3o/updates"] == expected
        assert torch.equal(trainer.learner.flat.param, before) != bool(expected)  # weights move only on an update
        acting = torch.as_tensor(trainer.actor.actor[0][0].T)  # the policy that acts on the next step
        assert torch.equal(acting, trainer.model.actor[0].weight.detach().cpu())
        updates += expected
    assert episodes >= cfg.hp3o_trajectories + 3 and updates == episodes - cfg.hp3o_trajectories + 1
    trainer.envs.close()


def test_the_authors_schedule_resumes_exactly(logdir):
    """hp3o-plus-paper (per-episode updates, per-epoch redraws, TD form) killed after a checkpoint
    and resumed ends with the same weights and trajectory buffer as the uninterrupted run."""
    from safetensors.torch import load_file

    from rlkit.io.checkpoint import resolve_checkpoint
    from tests.variants.test_outer import rewind_to

    cfg = rlkit.preset("cartpole", "hp3o-plus-paper", total_steps=6 * 256, num_envs=2, num_steps=128,
                       hp3o_samples=640, hp3o_threshold=0.05, logdir=logdir, run_name="paper",
                       checkpoint_every=2 * 256, eval_episodes=1, progress=False)
    first = rlkit.train(cfg)

    def weights(run):
        return load_file(str(resolve_checkpoint(run.run_dir) / "tensors.safetensors"))

    full = weights(first)
    rewind_to(first.run_dir, "update-0000002")
    resumed = weights(rlkit.train(rlkit.TrainConfig(resume=first.run_dir)))
    assert set(full) == set(resumed) and any(k.startswith("hp3o.") for k in full)
    assert all(torch.equal(full[k], resumed[k]) for k in full)


@pytest.mark.parametrize("when", ["each-update", "first-use"])
def test_first_use_keeps_a_trajectorys_advantages_when_the_best_changes(when):
    """HP3O+ (threshold covers everything): the other trajectory's advantages depend on the best
    trajectory's values. A new best arrives; first-use (the authors' cache) keeps the old ones."""
    from rlkit.variants.hp3o_episodes import EpisodeAdapter

    class Policy(torch.nn.Module):
        head = rlkit.CategoricalHead(2)

        def forward(self, obs):
            return torch.zeros(obs.shape[0], 2), torch.zeros(obs.shape[0])

    obs = torch.zeros(3, 2)
    other = traj(1.0, length=3, obs=obs)  # own values 0, rewards 1, terminated
    best_a = traj(5.0, length=3, obs=obs, values=torch.full((3,), 2.0))
    best_b = traj(9.0, length=3, obs=obs, values=torch.full((3,), 7.0))
    options = rlkit.VariantGroups(hp3o=True, hp3o_plus=True, hp3o_threshold=1.0, hp3o_advantages=when,
                                   hp3o_buffer_size=4, hp3o_trajectories=2, hp3o_samples=6)
    adapter = EpisodeAdapter(1, options, 1.0, 1.0, 0.2, np.random.default_rng(0), Policy(), torch.device("cpu"))
    first = adapter.batches([best_a, other], 0)[0].pooled.advantages[3:]
    second = adapter.batches([best_b, other], 1)[0].pooled.advantages[3:]
    torch.testing.assert_close(first, torch.tensor([3.0, 2.0, 1.0]) - 2.0)  # R - V'(best a)
    expected = first if when == "first-use" else torch.tensor([3.0, 2.0, 1.0]) - 7.0
    torch.testing.assert_close(second, expected)
    assert (other.advantages is not None) == (when == "first-use")


def test_first_use_advantages_travel_in_checkpoints():
    buf = TrajectoryBuffer(3)
    kept = traj(2.0)
    kept.advantages, kept.returns = torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([5.0, 6.0, 7.0, 8.0])
    buf.add([traj(1.0), kept])
    again = TrajectoryBuffer(3)
    again.load_state(buf.state(), Trajectory)
    assert again.items[0].advantages is None and torch.equal(again.items[1].returns, kept.returns)


def test_td_form_with_nothing_replaced_is_hp3o_bit_for_bit():
    """Threshold 0 on states that never repeat exactly: HP3O+ must train exactly as HP3O. Twenty
    trajectories, so the pooled GAE takes the float32 path and a per-trajectory recomputation (float64)
    would differ in the last bits, after which runs drift apart."""
    g = torch.Generator().manual_seed(0)
    lengths = [int(n) for n in torch.randint(5, 40, (20,), generator=g)]
    trajs = [traj(float(100 - i), length=n, obs=torch.randn(n, 2, generator=g), values=torch.randn(n, generator=g),
                  rewards=torch.randn(n, generator=g)) for i, n in enumerate(lengths)]
    plain, _ = build_hybrid_batches(trajs, 0.99, 0.92, samples=400, rng=np.random.default_rng(0))
    plus, frac = build_hybrid_batches(trajs, 0.99, 0.92, samples=400, rng=np.random.default_rng(0),
                                      plus_threshold=0.0, plus_form="td")
    assert frac == 0.0
    assert all(a is b is None or torch.equal(a, b) for a, b in zip(plain.pooled, plus.pooled))


def test_paper_sampling_of_one_step_episodes_trains_on_minibatches_of_one(logdir):
    """k one-step trajectories give k transitions for 10 minibatches: minibatches of one transition,
    whose whitened advantage is 0 (the update's loss was NaN and the run stopped)."""
    import gymnasium as gym

    if "rlkit-test/OneStep-v0" not in gym.registry:
        gym.register("rlkit-test/OneStep-v0", entry_point="tests.toy_envs:IdentityDiscrete", kwargs={"length": 1})
    cfg = rlkit.preset("cartpole", "hp3o", hp3o_sampling="paper", env="rlkit-test/OneStep-v0", total_steps=256,
                       num_envs=2, num_steps=64, eval_episodes=1, logdir=logdir, progress=False)
    result = rlkit.train(cfg)
    assert result.total_steps == 256 and np.isfinite(result.eval_return_mean)
