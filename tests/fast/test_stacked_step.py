"""The population's autograd-free minibatch step against the fused path it replaces (the same
bits: both call the fused nodes' functions), and the members' Adams stepped together against
each one's own step."""

import pytest
import torch
from torch import nn

from rlkit.core.config import PPOConfig
from rlkit.core.optim import FlatParameters
from rlkit.fast.adam import AdamsTogether, FlatAdam
from rlkit.gym.population.network import StackedLoss, StackedParameters, direct_step
from tests.gym.population.test_network import _batch, _members

HPS = [PPOConfig(), PPOConfig(clip_vloss=False, norm_adv=False, ent_coef=0.01),
       PPOConfig(vloss_form="clipped-mse", ent_coef=0.02), PPOConfig(vloss_form="clipped-mse", clip_vloss=False)]


def _fused(kind, k=3):
    models, _ = _members(kind, k)
    flats = [FlatParameters(m.ordered_parameters(), split=sum(p.numel() for p in m.actor_parameters()))
             for m in models]
    return models, StackedParameters(flats, models[0], fused=True)


@pytest.mark.parametrize("hp", HPS)
@pytest.mark.parametrize("live", [[True, True, True], [True, False, True]], ids=["all-live", "one-carried"])
def test_the_direct_step_gives_the_fused_paths_losses_and_gradient_bits(hp, live):
    models, stacked = _fused("categorical")
    mb = _batch(models, 3, b=64)
    mb = mb._replace(log_probs=mb.log_probs - 0.7)  # ratios both inside and outside the clip range
    mask = torch.tensor(live)
    loss = StackedLoss(models[0].head, hp, fused=True)
    dist_params, values = stacked.forward(mb.obs)
    ref = loss(stacked.head_tensors(), dist_params, values, mb)
    stacked.zero_grad()
    torch.where(mask, ref.loss, 0.0).sum().backward()
    expected = stacked.theta.grad.clone()
    stacked.theta.grad.fill_(float("nan"))  # the direct step must write every entry
    step = direct_step(stacked, loss)
    assert step is not None
    out = step(mb, mask.float())
    for a, b in zip(ref, out):
        assert torch.equal(a.detach(), b)
    assert torch.equal(expected, stacked.theta.grad)
    assert expected[0].abs().sum() > 0 and bool(expected[1].any()) == live[1]


def test_a_members_direct_step_does_not_depend_on_who_else_is_stepped():
    hp = PPOConfig(ent_coef=0.01)
    grads = []
    for k in (3, 1):
        models, stacked = _fused("categorical", k)
        mb = _batch(_members("categorical", 3)[0], 3, b=32)
        step = direct_step(stacked, StackedLoss(models[0].head, hp, fused=True))
        out = step(mb.map(lambda x: x[:k]), torch.ones(k))
        grads.append((stacked.theta.grad[0].clone(), out.loss[0]))
    assert torch.equal(grads[0][0], grads[1][0]) and torch.equal(grads[0][1], grads[1][1])


@pytest.mark.parametrize("kind,fused", [("gaussian", True), ("multi-discrete", True), ("categorical", False)])
def test_the_direct_step_applies_only_where_it_computes_the_fused_paths_numbers(kind, fused):
    models, stacked = _fused(kind)
    if not fused:
        _, stacked = _members(kind)
    assert direct_step(stacked, StackedLoss(models[0].head, PPOConfig(), fused=fused)) is None


def _adams(n, lrs=None):
    torch.manual_seed(0)
    flats = [FlatParameters([nn.Parameter(torch.randn(40))]) for _ in range(n)]
    return flats, [FlatAdam(f, lr=(lrs or [3e-3] * n)[i]) for i, f in enumerate(flats)]


def test_adams_stepped_together_give_each_the_bits_of_its_own_step():
    flats, adams = _adams(3)
    ref_flats, refs = _adams(3)
    g = torch.Generator().manual_seed(1)
    for i in range(5):
        for f, r in zip(flats, ref_flats):
            grad = torch.randn(40, generator=g)
            f.grad.copy_(grad)
            r.grad.copy_(grad)
        stepped = [0, 2] if i == 2 else [0, 1, 2]  # members' step counts differ (one stopped early)
        together = AdamsTogether.of([adams[k] for k in stepped])
        if i == 0:
            assert together is None  # no state before the first step
            for k in stepped:
                adams[k].step()
        else:
            together.step()
        for k in stepped:
            refs[k].step()
    for f, r, a, b in zip(flats, ref_flats, adams, refs):
        assert torch.equal(f.data, r.data)
        assert torch.equal(a.state[f.param]["step"], b.state[r.param]["step"])
    assert float(adams[1].state[flats[1].param]["step"]) == 4.0


def test_adams_with_differing_settings_are_not_stepped_together():
    _, adams = _adams(2, [3e-3, 1e-3])
    for a in adams:
        a.param.grad = torch.ones(40)
        a.step()
    assert AdamsTogether.of(adams) is None
    assert AdamsTogether.of([adams[0], torch.optim.SGD([nn.Parameter(torch.ones(1))], lr=0.1)]) is None


@pytest.mark.parametrize("parts,size,expected", [([(0, 4, 4, 6)], 6, True), ([(0, 4, 3, 5)], 6, False),
                                                 ([(0, 4, 5, 6)], 6, False), ([(0, 4, 4, 6)], 7, False)])
def test_the_direct_step_needs_layers_that_tile_theta(parts, size, expected):
    from types import SimpleNamespace

    from rlkit.fast.stacked_step import covers

    mlp = SimpleNamespace(spec=([(slice(a, b), slice(c, d), (1, 1)) for a, b, c, d in parts], []))
    assert covers(mlp, size) is expected
