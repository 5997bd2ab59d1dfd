"""Outer-PPO: the outer step, its special cases, and its place in the trainer."""

import pytest
import torch
from safetensors.torch import load_file
from torch import nn

import rlkit
from rlkit.io.checkpoint import resolve_checkpoint
from rlkit.core.optim import FlatParameters
from rlkit.variants.outer import OuterStep


def toy(values):
    p = nn.Parameter(torch.tensor(values))
    return FlatParameters([p]), p


def inner(flat, theta_star):
    flat.data.copy_(torch.tensor(theta_star))


def test_sigma_one_without_momentum_returns_theta_star_bit_for_bit():
    flat, _ = toy([0.1, -3.7, 1e-8, 12345.678])
    outer = OuterStep(flat, lr=1.0)
    star = [0.30000001, -3.70001, -2e-9, 0.001]
    outer.begin()
    inner(flat, star)
    outer.end({})
    assert torch.equal(flat.data, torch.tensor(star))


def test_sigma_zero_leaves_weights_unchanged():
    start = [0.1, -3.7, 1e-8, 12345.678]
    flat, _ = toy(start)
    outer = OuterStep(flat, lr=0.0)
    outer.begin()
    inner(flat, [5.0, 5.0, 5.0, 5.0])
    outer.end({})
    assert torch.equal(flat.data, torch.tensor(start))


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum_and_nesterov_match_hand_computation(nesterov):
    sigma, mu = 0.5, 0.9
    flat, _ = toy([1.0])
    outer = OuterStep(flat, lr=sigma, momentum=mu, nesterov=nesterov)
    theta, buf = 1.0, 0.0
    for star_offset in (-0.2, -0.1, 0.3):
        outer.begin()
        inner(flat, [theta + star_offset])
        outer.end({})
        g = -star_offset                     # g = theta_k - theta*
        buf = mu * buf + g if buf else g     # torch SGD: the first step initializes the buffer to g
        d = g + mu * buf if nesterov else buf
        theta = theta - sigma * d
        assert float(flat.data[0]) == pytest.approx(theta, rel=1e-6)


def test_biased_init_starts_inner_loop_along_previous_momentum():
    flat, _ = toy([1.0, 2.0])
    outer = OuterStep(flat, lr=1.0, momentum=0.5, bias=0.4)
    outer.begin()
    assert torch.equal(flat.data, torch.tensor([1.0, 2.0]))  # no momentum yet: no bias
    inner(flat, [0.8, 2.5])          # g = [0.2, -0.5]
    outer.end({})                      # buffer = g; theta = theta - g = [0.8, 2.5]
    theta_k = flat.data.clone()
    outer.begin()
    expected = theta_k - 0.4 * torch.tensor([0.2, -0.5])
    torch.testing.assert_close(flat.data, expected)
    torch.testing.assert_close(outer.theta_k, theta_k)  # the outer gradient is taken from theta_k


def test_biased_init_of_the_update_form_moves_along_the_previous_outer_update():
    """sigma 2, Nesterov mu 0.5: the update u = -sigma (g + mu b) differs from -b by more than sigma."""
    flat, _ = toy([1.0, 2.0])
    outer = OuterStep(flat, lr=2.0, momentum=0.5, nesterov=True, bias=0.4, bias_form="update")
    outer.begin()
    inner(flat, [0.8, 2.5])          # g = [0.2, -0.5]; b = g; u = -2 (g + 0.5 g) = [-0.6, 1.5]
    outer.end({})
    theta_k = flat.data.clone()
    torch.testing.assert_close(theta_k, torch.tensor([0.4, 3.5]))
    outer.begin()
    torch.testing.assert_close(flat.data, theta_k + 0.4 * torch.tensor([-0.6, 1.5]))
    torch.testing.assert_close(outer.theta_k, theta_k)
    saved = outer.state()
    assert "prev_update" in saved.tensors
    again = OuterStep(toy([0.0, 0.0])[0], lr=2.0, momentum=0.5, nesterov=True, bias=0.4, bias_form="update")
    again.load_state(saved)
    torch.testing.assert_close(again.prev_update, torch.tensor([-0.6, 1.5]))


@pytest.mark.parametrize("grad_from,steps", [
    # theta: g = theta_k - theta* includes the bias, b_k = (mu + alpha) b_k-1 - 1 = b_k-1 - 1: never decays
    ("theta", [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]),
    # start: g = start - theta* = -1 (the inner loop's movement), b_k = mu b_k-1 - 1 -> -1 / (1 - mu)
    ("start", [1.0, 1.5, 1.75, 1.875, 1.9375, 1.96875, 1.984375, 1.9921875]),
])
def test_biased_init_feedback_by_where_the_outer_gradient_is_measured(grad_from, steps):
    """A scalar model: every inner loop moves +1 from wherever it starts; sigma 1, mu 0.5, alpha 0.5."""
    flat, _ = toy([0.0])
    outer = OuterStep(flat, lr=1.0, momentum=0.5, bias=0.5, grad_from=grad_from)
    seen = []
    for _ in steps:
        theta_k = float(flat.data[0])
        outer.begin()
        inner(flat, [float(flat.data[0]) + 1.0])
        outer.end({})
        seen.append(float(flat.data[0]) - theta_k)
    assert seen == pytest.approx(steps, rel=1e-6)


def test_gradient_from_theta_is_refused_without_a_bias_and_named_with_one():
    with pytest.raises(rlkit.ConfigError, match="outer_grad_from=theta applies to biased initialization"):
        rlkit.preset("cartpole", "outer-nesterov", outer_grad_from="theta")
    assert rlkit.preset("cartpole", "outer-biased", outer_grad_from="theta").variant.endswith("-from-theta")
    assert rlkit.preset("cartpole", "outer-biased").outer_grad_from == "start"


def test_runs_and_sweeps_from_before_the_default_changed_keep_the_gradient_from_theta():
    from rlkit.ablation.results import config_difference
    from rlkit.variants.migrate import migrate_config

    old = {k: v for k, v in rlkit.preset("cartpole", "outer-biased").to_dict().items() if k != "outer_grad_from"}
    assert migrate_config(old, "gym")["outer_grad_from"] == "theta"  # a resumed run goes on as it ran
    plain = {**rlkit.preset("cartpole").to_dict(), "outer_grad_from": "theta"}  # recorded with the then-default
    assert "outer_grad_from" not in migrate_config(plain, "gym")  # it means nothing without a bias
    new = rlkit.preset("cartpole", "outer-biased").to_dict()
    assert "outer_grad_from 'theta' -> 'start'" in config_difference(["rlkit", old], ["rlkit", new])  # never mixed
    assert config_difference(["rlkit", old], ["rlkit", {**new, "outer_grad_from": "theta"}]) is None  # pinned: resumes
    assert config_difference(["rlkit", plain], ["rlkit", rlkit.preset("cartpole").to_dict()]) is None


def test_update_form_bias_works_without_momentum():
    flat, _ = toy([1.0])
    outer = OuterStep(flat, lr=1.5, bias=0.5, bias_form="update")
    outer.begin()
    inner(flat, [0.0])               # g = 1, u = -1.5, theta = -0.5
    outer.end({})
    outer.begin()
    torch.testing.assert_close(flat.data, torch.tensor([-0.5 + 0.5 * -1.5]))
    assert rlkit.TrainConfig(outer_bias=0.5, outer_bias_form="update").variant == "outer-lr1-bias0.5-upd"


def test_annealing_scales_sigma_and_mu_with_the_inner_rate():
    flat, _ = toy([1.0])
    outer = OuterStep(flat, lr=1.5, momentum=0.9, anneal="both")
    outer.schedule(0.25)
    group = outer.optimizer.param_groups[0]
    assert (group["lr"], group["momentum"]) == (1.5 * 0.25, 0.9 * 0.25)
    outer.begin()
    inner(flat, [0.0])               # g = 1: theta = 1 - 0.375 * 1
    outer.end({})
    torch.testing.assert_close(flat.data, torch.tensor([1.0 - 0.375]))
    constant = OuterStep(toy([1.0])[0], lr=1.5, momentum=0.9)
    constant.schedule(0.25)
    assert constant.optimizer.param_groups[0]["lr"] == 1.5


def test_annealed_outer_step_fades_to_zero_in_training(logdir):
    """With --anneal-lr the run loop hands the fraction to the hook: the last update's sigma is
    sigma / num_updates, logged as the update norm shrinking relative to the outer gradient."""
    run = rlkit.train(small(logdir, run_name="anneal", outer_lr=1.5, outer_anneal="lr"))
    assert run.variant == "outer-lr1.5-anneal-lr"
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run.run_dir)).Reload()
    grads = [e.value for e in events.Scalars("outer/grad_norm")]
    updates = [e.value for e in events.Scalars("outer/update_norm")]
    n = len(grads)
    for k, (g, u) in enumerate(zip(grads, updates)):
        assert u == pytest.approx(1.5 * (1 - k / n) * g, rel=1e-4)


def test_actor_only_leaves_critic_to_the_inner_loop():
    a, c = nn.Parameter(torch.tensor([1.0])), nn.Parameter(torch.tensor([1.0]))
    flat = FlatParameters([a, c], split=1)
    outer = OuterStep(flat, lr=0.5, actor_only=True)
    outer.begin()
    inner(flat, [3.0, 3.0])
    outer.end({})
    assert float(a.detach()) == pytest.approx(2.0) and float(c.detach()) == 3.0


def test_any_torch_optimizer_can_be_the_outer_one():
    flat, _ = toy([1.0])
    outer = OuterStep(flat, lr=0.1, optimizer="Adam")
    outer.begin()
    inner(flat, [0.0])
    outer.end({})
    assert float(flat.data[0]) == pytest.approx(0.9, rel=1e-4)  # Adam's first step is lr * sign(g)


def _weights(result):
    return load_file(str(resolve_checkpoint(result.run_dir) / "tensors.safetensors"))


def small(logdir, **kw):
    base = dict(env="CartPole-v1", total_steps=6 * 512, update_epochs=2, logdir=logdir, eval_episodes=1,
                progress=False)
    return rlkit.TrainConfig(**{**base, **kw})


def test_outer_sigma_one_equals_plain_ppo_in_training(logdir):
    plain = _weights(rlkit.train(small(logdir, run_name="plain")))
    outer_run = rlkit.train(small(logdir, run_name="outer", outer=True, outer_lr=1.0))
    assert outer_run.variant == "outer-lr1"
    outer = _weights(outer_run)
    assert all(torch.equal(plain[k], outer[k]) for k in plain if k.startswith("model."))
    changed = _weights(rlkit.train(small(logdir, run_name="outer15", outer_lr=1.5)))
    assert any(not torch.equal(plain[k], changed[k]) for k in plain if k.startswith("model."))


def rewind_to(run_dir, checkpoint):
    """Make a finished run look killed right after ``checkpoint`` (later checkpoints removed)."""
    import json
    import shutil
    from pathlib import Path

    ckpts = Path(run_dir) / "checkpoints"
    for p in ckpts.glob("update-*"):
        if p.name > checkpoint:
            shutil.rmtree(p)
    (ckpts / "latest.json").write_text(json.dumps({"checkpoint": checkpoint}))


def test_outer_and_hp3o_compose_and_resume_exactly(logdir):
    cfg = small(logdir, run_name="combo", outer_lr=1.2, outer_momentum=0.5, outer_nesterov=True, hp3o=True,
                hp3o_samples=256, hp3o_plus=True, checkpoint_every=2 * 512)
    assert cfg.variant == "outer-lr1.2-m0.5-nesterov+hp3o+"
    first = rlkit.train(cfg)
    full = _weights(first)
    assert "outer.momentum_buffer" in full and any(k.startswith("hp3o.") for k in full)
    rewind_to(first.run_dir, "update-0000004")
    resumed = _weights(rlkit.train(rlkit.TrainConfig(resume=first.run_dir)))
    assert set(full) == set(resumed)
    assert all(torch.equal(full[k], resumed[k]) for k in full)


@pytest.mark.parametrize("kw,match", [
    (dict(outer_lr=0.0), "outer_lr"), (dict(outer_lr=-1.0), "outer_lr"),
    (dict(outer_momentum=1.0), "outer_momentum"), (dict(outer_nesterov=True), "outer_momentum > 0"),
    (dict(outer_bias=0.5), "outer momentum"), (dict(outer_params="critic"), "outer_params"),
    (dict(outer_anneal="momentum", outer_lr=1.5), "outer momentum"), (dict(outer_anneal="cosine"), "outer_anneal"),
    (dict(outer_bias=0.5, outer_bias_form="step"), "outer_bias_form"),
    (dict(outer_optimizer="NoSuchOpt"), "torch.optim"), (dict(outer_optimizer="Adam", outer_momentum=0.5), "SGD"),
    (dict(outer_lr=1e39), "float32"), (dict(outer_lr=10**39), "float32"),
    (dict(outer_optimizer="Adam", outer_lr=1e39), "outer_lr"),
])
def test_invalid_outer_settings_are_one_line_errors(kw, match):
    with pytest.raises(rlkit.ConfigError, match=match) as e:
        rlkit.TrainConfig(**kw)
    assert "\n" not in str(e.value)


def test_an_integer_outer_lr_steps_as_a_float():
    """An int sigma beyond int64 but within float32 (2**64) is valid and reaches the optimizer as a float."""
    assert rlkit.TrainConfig(outer=True, outer_lr=2**64).outer_lr == 2**64
    flat, _ = toy([0.0, 1.0])
    outer = OuterStep(flat, lr=2**64)
    outer.begin()
    inner(flat, [2.0**-70, 1.0])
    outer.end({})
    assert torch.equal(flat.data, torch.tensor([2.0**-6, 1.0]))
