"""The annealed clip range (--anneal-clip, rlkit.variants.anneal_clip): the clipped surrogate at
--clip-coef times the learning rate's annealing fraction, set before every update, logged, resumed
to the uninterrupted run's bits, and refused in one line where it would not anneal."""

import json

import pytest
import torch

import rlkit
from rlkit.core.config import PPOConfig
from rlkit.core.objective import CLIPPED_SURROGATE, ObjectiveInputs
from rlkit.errors import ConfigError
from rlkit.gym.trainer import resume
from rlkit.io.checkpoint import resolve_checkpoint
from rlkit.io.signals import Interrupted
from rlkit.variants.anneal_clip import AnnealedClip
from tests.test_reproducibility import _stop_after_update, assert_same_bits, final_tensors
from tests.variants.test_objectives import _cfg


def _inputs(seed: int = 0) -> ObjectiveInputs:
    g = torch.Generator().manual_seed(seed)
    old = torch.randn(64, generator=g)
    new = (old + 0.5 * torch.randn(64, generator=g)).requires_grad_()  # ratios well outside [0.8, 1.2]
    return ObjectiveInputs(new, old, torch.randn(64, generator=g), torch.randn(64, generator=g).requires_grad_(),
                           torch.randn(64, generator=g), torch.randn(64, generator=g),
                           torch.rand(64, generator=g).requires_grad_())


def test_the_objective_is_the_clipped_surrogate_at_the_annealed_range():
    objective, hp, inputs = AnnealedClip(), PPOConfig(clip_coef=0.2, clip_vloss=True), _inputs()
    full = objective(inputs, hp)
    torch.testing.assert_close(full.loss, CLIPPED_SURROGATE(inputs, hp).loss, rtol=0, atol=0)
    objective.schedule(0.25)
    quarter = objective(inputs, hp)
    expected = CLIPPED_SURROGATE(inputs, PPOConfig(clip_coef=0.05, clip_vloss=True))
    torch.testing.assert_close(quarter.loss, expected.loss, rtol=0, atol=0)
    assert not torch.equal(quarter.loss, full.loss)
    assert objective.end({}) == {"anneal_clip/clip_coef": pytest.approx(0.05)}


def test_a_run_logs_the_falling_range_and_resumes_to_the_uninterrupted_bits(tmp_path, monkeypatch):
    def cfg(name):
        return _cfg(tmp_path, name, total_steps=4 * 256, checkpoint_every=512, anneal_clip=True, anneal_lr=True)

    straight = rlkit.train(cfg("straight"))
    assert straight.variant == "annealclip"
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(straight.run_dir), size_guidance={"scalars": 0})
    events.Reload()
    used = [e.value for e in events.Scalars("anneal_clip/clip_coef")]
    assert used == pytest.approx([0.2, 0.15, 0.1, 0.05])
    with monkeypatch.context() as m:
        _stop_after_update(m, 3)
        with pytest.raises(Interrupted):
            rlkit.train(cfg("stopped"))
    assert json.loads((resolve_checkpoint(tmp_path / "stopped") / "state.json").read_text())["objective"] == \
        "anneal_clip"
    assert_same_bits(final_tensors(straight.run_dir), final_tensors(resume(str(tmp_path / "stopped")).run_dir))


def test_without_an_annealed_learning_rate_or_beside_another_objective_it_is_refused_in_one_line(tmp_path, capsys):
    for kw, words in [({"anneal_lr": False}, "add --anneal-lr"), ({"unclipped": True}, "both replace the policy")]:
        with pytest.raises(ConfigError, match=words) as info:
            rlkit.preset("cartpole", anneal_clip=True, **kw)
        assert "\n" not in str(info.value)
    from rlkit.cli import main

    assert main(["train", "--anneal-clip", "--no-anneal-lr", "--logdir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rlkit: error: ") and err.count("\n") == 1 and not (tmp_path / "runs").exists()


def _clip_coefs(run_dir):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    return [e.value for e in events.Scalars("anneal_clip/clip_coef")]


def test_a_population_anneals_each_member_and_a_failed_members_range_does_not_hold_the_others():
    live, failed = AnnealedClip(), AnnealedClip()
    live.schedule(0.5)  # the failed member is scheduled no more: its fraction stays where it stopped
    stacked = failed.stack([failed, live])
    hp, inputs = PPOConfig(clip_coef=0.2), _inputs(1)
    rows = ObjectiveInputs(*(t.expand(2, -1) for t in inputs[:7]))  # two members' rows
    terms = stacked(rows, hp, dim=1)
    expected = CLIPPED_SURROGATE(rows, PPOConfig(clip_coef=0.1), dim=1)
    torch.testing.assert_close(terms.loss, expected.loss, rtol=0, atol=0)
    assert live.end({})["anneal_clip/clip_coef"] == pytest.approx(0.1) and terms.stats["annealed_clipfrac"].shape == (2,)


def test_each_member_of_a_population_logs_its_falling_range(tmp_path):
    from rlkit.gym.population import train_population

    outcomes = train_population(_cfg(tmp_path, "pop", total_steps=4 * 256, anneal_clip=True, anneal_lr=True), [1, 2])
    for outcome in outcomes:
        assert _clip_coefs(outcome.run_dir) == pytest.approx([0.2, 0.15, 0.1, 0.05])
