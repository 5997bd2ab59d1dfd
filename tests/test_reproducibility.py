"""Reproducibility: the same inputs give the same bits, and old checkpoints continue exactly.

The properties checked, each by comparing runs made by this test on the machine running it:

- The same seed gives the same bits: two CartPole runs each of ``ppo``, ``outer-nesterov`` and
  ``hp3o-plus`` in one process (every checkpointed tensor ``torch.equal``), two tiny RLHF runs in
  one process, and two ``rlkit train`` processes (their final checkpoints, bit for bit).
- A Gym checkpoint written by an earlier version of rlkit (``data/legacy/gym``: Outer-PPO + HP3O+,
  checkpointed at update 2 of 4) loads, and resuming it straight to the end equals resuming it in
  two legs (stopped after update 3 with its checkpoint, then resumed again): same tensors, same
  evaluation.
- An RLHF checkpoint written by an earlier version (``data/legacy/rlhf``: HP3O) loads to exactly the
  tensors it stores, and two copies of it resumed to the same end give the same bits.

Nothing here depends on the CPU kind: float results differ between CPU kinds (vector kernels round
differently), so no test compares against digests or weights recorded on another machine.
"""

import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import rlkit
from rlkit.gym.trainer import PPOTrainer, resume
from rlkit.io.checkpoint import resolve_checkpoint
from rlkit.io.signals import Interrupted
from tests import tiny_lm

ROOT = Path(__file__).parents[1]
LEGACY = Path(__file__).parent / "data" / "legacy"
PROMPTS = ["the movie was", "i liked it", "a plot"]


def final_tensors(run_dir) -> dict[str, torch.Tensor]:
    """Every tensor of a run's newest checkpoint (weights, Adam, random streams, variant state)."""
    return load_file(str(resolve_checkpoint(run_dir) / "tensors.safetensors"))


def assert_same_bits(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert set(a) == set(b)
    differ = sorted(k for k in a if not torch.equal(a[k], b[k]))
    assert not differ, f"tensors differ: {differ}"


def assert_trained_from(final: dict[str, torch.Tensor], start: dict[str, torch.Tensor]) -> None:
    """The run changed the weights (so equal results are not two untouched copies)."""
    assert any(not torch.equal(final[k], start[k]) for k in start if k.startswith("model."))


@pytest.mark.parametrize("variant", ["ppo", "outer-nesterov", "hp3o-plus"])
def test_same_seed_twice_in_one_process_gives_the_same_bits(logdir, variant):
    runs = [rlkit.train(rlkit.preset("cartpole", variant, total_steps=4096, eval_episodes=0, progress=False,
                                     logdir=logdir, run_name=f"{variant}-{i}")) for i in range(2)]
    first, second = (final_tensors(r.run_dir) for r in runs)
    assert_same_bits(first, second)
    assert int(first["optim.step"]) > 0  # Adam stepped: the weights are trained ones


def _tiny_rlhf(logdir, run_name):
    from rlkit.rlhf.config import RLHFConfig
    from rlkit.rlhf.trainer import RLHFTrainer

    cfg = RLHFConfig(num_envs=8, max_new_tokens=4, iterations=3, learning_rate=3e-3, logdir=logdir, num_minibatches=2,
                     save_model=False, torch_threads=1, kl_coef=0.1, run_name=run_name, kernels="fast")
    return RLHFTrainer(cfg, reward=tiny_lm.good_rate, policy=tiny_lm.causal_lm(), tokenizer=tiny_lm.tokenizer(),
                       prompts=PROMPTS)


def test_tiny_rlhf_same_seed_twice_gives_the_same_bits(logdir):
    first, second = _tiny_rlhf(logdir, "a"), _tiny_rlhf(logdir, "b")
    start = first.learner.flat.data.clone()
    results = [t.train() for t in (first, second)]
    assert not torch.equal(first.learner.flat.data, start)
    assert torch.equal(first.learner.flat.data, second.learner.flat.data)  # every trained weight and the value head
    adam = [t.learner.optimizer.state[t.learner.flat.param] for t in (first, second)]
    for k in ("exp_avg", "exp_avg_sq"):
        assert torch.equal(adam[0][k], adam[1][k])
    assert [h["charts/score"] for h in results[0].history] == [h["charts/score"] for h in results[1].history]


def test_same_seed_in_two_processes_gives_the_same_bits(tmp_path):
    """Two ``rlkit train`` processes side by side (separate interpreters: other hash seeds, other
    allocations); Outer-PPO and HP3O+ together so every part of the Gym trainer takes part."""
    args = ["train", "--preset", "cartpole", "outer-nesterov", "hp3o-plus", "--total-steps", "2048",
            "--eval-episodes", "2", "--logdir", str(tmp_path)]
    procs = [subprocess.Popen([sys.executable, "-m", "rlkit.cli", *args, "--run-name", name], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for name in ("p1", "p2")]
    outs = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr[-2000:]
        outs.append(json.loads(next(line for line in stdout.splitlines() if line.startswith("{"))))
    first, second = final_tensors(tmp_path / "p1"), final_tensors(tmp_path / "p2")
    assert_same_bits(first, second)
    assert int(first["optim.step"]) > 0
    assert outs[0]["eval_return_mean"] == outs[1]["eval_return_mean"]


def _stop_after_update(monkeypatch, n: int) -> None:
    """Make the next run (or population) stop after update ``n`` as on one Ctrl-C: the loop
    checkpoints that update, then raises :class:`Interrupted`. The signal is raised once, where
    both loops ask whether an evaluation is due after an update."""
    real = PPOTrainer.evaluation_due
    raised = []

    def evaluation_due(self):
        due = real(self)
        if self.progress.updates_done == n and not raised:
            # The run loop's handler turns SIGINT into a request to stop; Python's default one
            # would interrupt the whole test session instead.
            assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler, "the run loop handles SIGINT"
            raised.append(True)
            signal.raise_signal(signal.SIGINT)
        return due

    monkeypatch.setattr(PPOTrainer, "evaluation_due", evaluation_due)


def test_a_legacy_gym_checkpoint_resumes_in_two_legs_to_the_same_bits_as_in_one(tmp_path, monkeypatch):
    """Copy A resumes from update 2 straight to update 4; copy B stops after update 3 and is
    resumed again. Both checkpoint every update: a checkpoint starts new episodes, so resuming from
    a checkpoint equals continuing in memory past it. (B is stopped by an interrupt rather than by
    a smaller ``total_steps``: with ``anneal_lr`` the learning rate is annealed over the run's
    ``total_steps``, so a run resumed to a smaller total takes update 3 at another rate.)"""
    a, b = tmp_path / "a", tmp_path / "b"
    for copy in (a, b):
        shutil.copytree(LEGACY / "gym", copy)
    agent, cfg = rlkit.Agent.load(a)
    assert cfg.variant == "outer-lr1-m0.5-nesterov+hp3o+" and cfg.hidden_sizes == (8,) and cfg.anneal_lr
    every_update = cfg.num_envs * cfg.num_steps
    start = final_tensors(a)

    straight = resume(str(a), checkpoint_every=every_update)  # Outer and HP3O state restored
    assert straight.updates == 4
    with monkeypatch.context() as m:
        _stop_after_update(m, 3)
        with pytest.raises(Interrupted):
            resume(str(b), checkpoint_every=every_update)
    assert resolve_checkpoint(b).name == "update-0000003"
    assert_same_bits(final_tensors(a / "checkpoints" / "update-0000003"), final_tensors(b))
    in_two = resume(str(b), checkpoint_every=every_update)

    final = final_tensors(a)
    assert_trained_from(final, start)
    assert_same_bits(final, final_tensors(b))
    assert in_two.updates == 4 and in_two.eval_return_mean == straight.eval_return_mean
    assert in_two.eval_return_std == straight.eval_return_std


@pytest.mark.parametrize("stop_at, scheduled", [(3, "update-0000002"), (1, None)])
def test_a_run_stopped_between_scheduled_checkpoints_resumes_to_the_same_bits(logdir, monkeypatch, stop_at, scheduled):
    """A signal after update ``stop_at`` (checkpoints every 2 updates) writes a checkpoint with the
    envs mid-episode; the resume recomputes from the newest scheduled checkpoint (or from the start,
    before the first) and ends with the uninterrupted run's bits and evaluation."""
    def cfg(name):
        return rlkit.preset("cartpole", "hp3o-plus", total_steps=6 * 512, num_envs=4, num_steps=128,
                            checkpoint_every=1024, eval_episodes=2, progress=False, logdir=logdir, run_name=name)

    straight = rlkit.train(cfg("straight"))
    with monkeypatch.context() as m:
        _stop_after_update(m, stop_at)
        with pytest.raises(Interrupted) as stopped:
            rlkit.train(cfg("stopped"))
    interrupt = stopped.value.checkpoint
    assert interrupt.name == f"update-{stop_at:07d}"
    assert json.loads((interrupt / "state.json").read_text())["resumes_exactly"] is False
    names = sorted(p.name for p in (Path(logdir) / "stopped" / "checkpoints").glob("update-*"))
    assert names == sorted(filter(None, [scheduled, interrupt.name]))  # the interrupt pruned nothing
    resumed = resume(str(Path(logdir) / "stopped" / "checkpoints" / interrupt.name) if scheduled else
                     str(Path(logdir) / "stopped"))  # the interrupt's folder named: its run's scheduled one stands in
    assert_same_bits(final_tensors(straight.run_dir), final_tensors(resumed.run_dir))
    assert resumed.eval_return_mean == straight.eval_return_mean and resumed.updates == straight.updates == 6


def test_an_extension_stopped_between_checkpoints_resumes_to_the_extended_total(logdir, monkeypatch, caplog):
    """A finished run extended with a larger ``total_steps`` and stopped between two scheduled
    checkpoints resumes (plain ``--resume``) from the scheduled one to the extended total, not to
    the total that older checkpoint recorded."""
    cfg = rlkit.preset("cartpole", "ppo", total_steps=2 * 512, num_envs=4, num_steps=128, checkpoint_every=1024,
                       eval_episodes=1, progress=False, logdir=logdir, run_name="run")
    run = str(rlkit.train(cfg).run_dir)
    with monkeypatch.context() as m:
        _stop_after_update(m, 3)
        with pytest.raises(Interrupted):
            resume(run, total_steps=6 * 512)
    assert resolve_checkpoint(run).name == "update-0000003"
    damaged = Path(logdir) / "damaged"
    shutil.copytree(run, damaged)
    state_file = damaged / "checkpoints" / "update-0000003" / "state.json"
    state = json.loads(state_file.read_text())
    state["config"]["total_steps"] = 6 * 512.0
    state_file.write_text(json.dumps(state))
    with caplog.at_level("WARNING", logger="rlkit"):
        assert resume(str(damaged)).updates == 2  # the scheduled checkpoint's own total: nothing left to run
    assert "holds total_steps=3072.0 (expected type int)" in caplog.text
    resumed = resume(run)
    assert resumed.updates == 6 and resumed.total_steps == 6 * 512


def _resume_rlhf(run, **changes):
    from rlkit.rlhf.config import RLHFConfig
    from rlkit.rlhf.trainer import RLHFTrainer

    return RLHFTrainer(RLHFConfig(resume=str(run)), reward=tiny_lm.good_rate, policy=tiny_lm.causal_lm(),
                       tokenizer=tiny_lm.tokenizer(), prompts=PROMPTS, changes=changes)


def test_a_legacy_rlhf_checkpoint_loads_to_the_tensors_it_stores(tmp_path):
    run = tmp_path / "rlhf"
    shutil.copytree(LEGACY / "rlhf", run)
    trainer = _resume_rlhf(run)
    stored = final_tensors(run)
    assert trainer.iteration == 2 and trainer.cfg.hp3o and trainer.cfg.outer_lr == 1.5
    assert torch.equal(trainer.learner.flat.data.cpu(), stored["flat"])
    assert len(trainer.learner.source.buffer) == 4  # HP3O's stored responses
    assert torch.equal(trainer.learner.hooks[0].momentum_buffer.cpu(), stored["outer.momentum_buffer"])


def test_a_legacy_rlhf_checkpoint_resumed_twice_gives_the_same_bits(tmp_path):
    """Two copies of the checkpoint (iteration 2) extended to iteration 4 each."""
    copies = [tmp_path / "a", tmp_path / "b"]
    for copy in copies:
        shutil.copytree(LEGACY / "rlhf", copy)
    start = final_tensors(copies[0])
    results = [_resume_rlhf(copy, iterations=4).train() for copy in copies]
    first, second = (final_tensors(copy) for copy in copies)
    assert resolve_checkpoint(copies[0]).name == "iteration-000004"
    assert not torch.equal(first["flat"], start["flat"])
    assert_same_bits(first, second)
    assert [h["charts/score"] for h in results[0].history] == [h["charts/score"] for h in results[1].history]
