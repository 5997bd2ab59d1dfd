"""Recurrent PPO (``--memory lstm|gru``) in the Gymnasium trainer: the rollout stores the state each
step was acted in and resets it at episode starts, the update replays those sequences, a run
resumes bit-identically and evaluates with its memory, and what it cannot honour is one line."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

import rlkit
from rlkit.core.buffer import FullBatch
from rlkit.gym.trainer import PPOTrainer, resume
from tests.robustness.helpers import error_line, run_cli
from rlkit.io.signals import Interrupted
from tests.test_reproducibility import _stop_after_update, assert_same_bits, assert_trained_from, final_tensors

def _assert_the_replay_gives_the_acting_numbers(trainer, sequences):
    """Each minibatch of ``sequences``, replayed from its stored states, gives the log-probs and
    values the rollout was acted with (within float32 rounding)."""
    for mb in sequences.minibatches(2, torch.Generator().manual_seed(0)):
        with torch.no_grad():
            params, values = trainer.model.replay(mb.obs, mb.starts, mb.state)
            log_probs, _ = trainer.head.log_prob_entropy(params, mb.targets.actions)
        ratio = torch.exp(log_probs - mb.targets.log_probs)
        assert torch.allclose(ratio, torch.ones_like(ratio), atol=1e-5), ratio
        assert torch.allclose(values, mb.targets.values, atol=1e-5)


def _straight_and_stopped_after_update_3(cfg, monkeypatch):
    """``cfg`` trained through as run "straight" (returned) and as run "stopped", stopped after update 3."""
    straight = rlkit.train(cfg.replace(run_name="straight"))
    with monkeypatch.context() as m:
        _stop_after_update(m, 3)
        with pytest.raises(Interrupted):
            rlkit.train(cfg.replace(run_name="stopped"))
    return straight


SMALL = dict(env="CartPole-v1", env_wrappers="no-velocity", num_envs=4, num_steps=64, num_minibatches=2,
             update_epochs=2, eval_episodes=2, progress=False, memory_size=16)


@pytest.mark.parametrize("memory, bptt", [("lstm", 0), ("gru", 16)])
def test_the_update_replays_the_rollout_with_the_states_it_was_acted_in(tmp_path, memory, bptt):
    trainer = PPOTrainer(rlkit.TrainConfig(**SMALL, memory=memory, bptt_length=bptt, total_steps=256,
                                           logdir=str(tmp_path)))
    with torch.no_grad():  # a policy far from uniform, so a wrong state would show in the log-probs
        for p in trainer.model.parameters():
            p.add_(0.3 * torch.randn_like(p))
    trainer.actor = trainer.model.snapshot()
    last = trainer.collect()
    starts = trainer.memory.starts
    assert starts[0].all() and starts[1:].any(), "episodes should end inside the rollout"
    cfg = trainer.cfg
    sequences = trainer.memory.sequences(FullBatch(trainer.buffer.compute_batch(last, cfg.gamma, cfg.gae_lambda)))
    assert sequences.obs.shape[0] == (bptt or 64)
    _assert_the_replay_gives_the_acting_numbers(trainer, sequences)
    trainer.discard()


@pytest.mark.parametrize("memory", ["lstm", "gru"])
def test_the_first_minibatch_of_an_update_has_a_ratio_of_exactly_one(tmp_path, memory):
    """The update's behaviour log-probs are the policy replayed on the first epoch's minibatches
    (the generator read ahead, not advanced), so the first forward with gradients gives them bit
    for bit."""
    trainer = PPOTrainer(rlkit.TrainConfig(**SMALL, memory=memory, bptt_length=16, total_steps=256,
                                           logdir=str(tmp_path)))
    last = trainer.collect()
    acted = torch.from_numpy(trainer.buffer.np["log_probs"].copy())
    generator = trainer.learner.generator
    before = generator.get_state()
    source = trainer.memory.sequences(FullBatch(trainer.buffer.compute_batch(last, 0.99, 0.95)), trainer.model, 2,
                                      generator)
    assert torch.equal(generator.get_state(), before)
    first = next(source.minibatches(2, generator))
    params, _ = trainer.model.replay(first.obs, first.starts, first.state)  # with gradients, as the epochs run it
    log_probs, _ = trainer.head.log_prob_entropy(params, first.targets.actions)
    assert log_probs.requires_grad and torch.equal(torch.exp(log_probs - first.targets.log_probs),
                                                   torch.ones_like(log_probs))
    replayed = source.targets.log_probs.reshape(16, 4, -1).transpose(0, 1).reshape(-1, 4)  # back to [T, N]
    assert torch.allclose(replayed, acted, atol=1e-5) and not torch.equal(replayed, acted)
    trainer.discard()


def test_a_cnn_with_a_memory_replays_its_pixel_rollout_and_resumes_to_the_same_bits(tmp_path, monkeypatch):
    """On images the memory follows the CNN (one state shared by actor and critic); pixels are
    stored as bytes and replayed from the stored states."""
    pixels = dict(env="rlkit-test/Pixels-v0", num_envs=2, num_steps=32, num_minibatches=2, update_epochs=1,
                  eval_episodes=1, progress=False, memory="gru", memory_size=16, logdir=str(tmp_path))
    trainer = PPOTrainer(rlkit.TrainConfig(**pixels, total_steps=64))
    assert trainer.buffer.obs.dtype == torch.uint8 and trainer.model.state_size == 16
    last = trainer.collect()
    sequences = trainer.memory.sequences(FullBatch(trainer.buffer.compute_batch(last, 0.99, 0.95)))
    _assert_the_replay_gives_the_acting_numbers(trainer, sequences)
    trainer.discard()
    cfg = rlkit.TrainConfig(**pixels, total_steps=256, checkpoint_every=128)
    straight = _straight_and_stopped_after_update_3(cfg, monkeypatch)
    resumed = resume(str(tmp_path / "stopped"))
    assert_same_bits(final_tensors(straight.run_dir), final_tensors(resumed.run_dir))
    assert rlkit.Agent.load(resumed.run_dir)[0].recurrent


def test_a_recurrent_run_trains_evaluates_and_loads_with_its_memory(tmp_path):
    result = rlkit.train(rlkit.TrainConfig(**SMALL, memory="lstm", total_steps=1024, logdir=str(tmp_path)))
    agent, cfg = rlkit.Agent.load(result.run_dir)
    assert cfg.memory == "lstm" and agent.recurrent and np.isfinite(result.eval_return_mean)
    again = agent.evaluate("CartPole-v1", 2, seed=cfg.seed + 10_000, wrappers="no-velocity")
    assert again.returns == agent.evaluate("CartPole-v1", 2, seed=cfg.seed + 10_000, wrappers="no-velocity").returns
    obs = np.zeros((3, 2), np.float32)
    agent.start_episode()
    first = agent.act(obs)
    assert agent.state is not None and agent.state.shape == (3, agent.model.state_size)
    agent.start_episode()
    assert np.array_equal(agent.act(obs), first)  # a new episode forgets what came before


@pytest.mark.parametrize("memory", ["lstm", "gru"])
def test_a_recurrent_run_stopped_mid_rollout_resumes_to_the_same_bits(tmp_path, monkeypatch, memory):
    """Stopped after update 3 (checkpoints every 2 updates, episodes and memory states in flight),
    the run resumes from update 2 and ends with the uninterrupted run's bits and evaluation."""
    cfg = rlkit.TrainConfig(**SMALL, memory=memory, total_steps=1536, checkpoint_every=512, logdir=str(tmp_path))
    straight = _straight_and_stopped_after_update_3(cfg, monkeypatch)
    start = final_tensors(tmp_path / "stopped")
    resumed = resume(str(tmp_path / "stopped"))
    assert_trained_from(final_tensors(resumed.run_dir), start)
    assert_same_bits(final_tensors(straight.run_dir), final_tensors(resumed.run_dir))
    assert resumed.eval_return_mean == straight.eval_return_mean and resumed.updates == 6


def test_outer_ppo_runs_with_a_memory(tmp_path):
    result = rlkit.train(rlkit.TrainConfig(**SMALL, memory="gru", outer_lr=1.5, total_steps=512,
                                           logdir=str(tmp_path)))
    assert np.isfinite(result.eval_return_mean) and result.updates == 2


@pytest.mark.parametrize("flags, match", [
    (["--memory", "transformer"], "unknown memory 'transformer'"),
    (["--memory", "lstm", "--bptt-length", "48"], "bptt_length=48 does not divide num_steps=64"),
    (["--memory", "lstm", "--bptt-length", "-1"], "bptt_length must be an integer >= 0"),
    (["--memory", "lstm", "--memory-size", "0"], "memory_size must be an integer >= 1"),
    (["--memory", "lstm", "--num-minibatches", "8"], "exceeds the 4 sequences of a rollout"),
    (["--memory", "lstm", "--hp3o"], "hp3o's batches of other data are not offered"),
    (["--memory", "lstm", "--seeds", "1", "2"], "a population trains feed-forward policies"),
    (["--memory", "lstm", "--kl-fixed"], "a recurrent policy (--memory lstm) does not store"),
    (["--memory", "lstm", "--kl-adaptive"], "a recurrent policy (--memory lstm) does not store"),
    (["--memory-size", "32"], "the policy has no memory (--memory is not set)"),
    (["--bptt-length", "16"], "the policy has no memory (--memory is not set)"),
    (["--memory", "lstm", "--env", "rlkit-test/MaskedFatal-v0", "--env-wrappers", ""], "does not read action masks"),
])
def test_what_a_recurrent_run_cannot_honour_is_one_line_writing_nothing(tmp_path, flags, match):
    args = ["train", "--env", "CartPole-v1", "--env-wrappers", "no-velocity", "--num-envs", "4", "--num-steps", "64",
            "--num-minibatches", "2", "--total-steps", "512", "--logdir", str(tmp_path / "runs"), *flags]
    line = error_line(run_cli(*args))
    assert match in line, line
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_resuming_a_recurrent_run_under_another_memory_is_refused(tmp_path):
    result = rlkit.train(rlkit.TrainConfig(**SMALL, memory="lstm", total_steps=256, logdir=str(tmp_path)))
    for flags in (["--memory", "gru"], ["--memory", ""], ["--memory-size", "32"]):
        line = error_line(run_cli("train", "--resume", result.run_dir, "--total-steps", "512", *flags))
        assert "resume" in line and flags[0][2:].replace("-", "_") in line, line


def test_a_torso_registered_by_name_is_the_one_a_run_trains(tmp_path, monkeypatch):
    """The listing of docs/recurrent.md, registered and trained by name."""
    from rlkit.core import memory

    monkeypatch.setattr(memory, "MEMORIES", dict(memory.MEMORIES))  # the registration ends with the test
    listing = (Path(__file__).parents[2] / "docs" / "recurrent.md").read_text().split("```python\n")[2].split("```")[0]
    exec(compile(listing, "docs/recurrent.md", "exec"), {})
    trainer = PPOTrainer(rlkit.TrainConfig(**SMALL, memory="forgetful-lstm", total_steps=256, logdir=str(tmp_path)))
    bias = trainer.model.actor_memory.rnn.bias_hh_l0
    assert torch.equal(bias[16:32], torch.ones(16)) and trainer.cfg.variant == "ppo-forgetful-lstm16"
    trainer.train()


def test_the_recipe_of_the_recurrent_page_runs_as_printed(tmp_path):
    """docs/recurrent.md's commands (smoke budgets appended) and its episode played with the agent."""
    from tests.docs.recipes import Shell, recipes
    from tests.docs.test_readme import SMOKE

    shell = Shell(tmp_path, SMOKE)
    shell.run(recipes((Path(__file__).parents[2] / "docs" / "recurrent.md").read_text())["recurrent"])
    lstm, gru, played = shell.printed
    lstm, gru = (json.loads(out.strip().splitlines()[-1]) for out in (lstm, gru))
    assert lstm["run_dir"] == "runs/my-lstm-run" and lstm["variant"] == "ppo-lstm64"
    assert gru["variant"] == "ppo-gru128" and float(played.strip()) >= 8
