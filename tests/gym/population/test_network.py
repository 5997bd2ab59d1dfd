"""The population's batched network against each member's own: the stacked forward, the stacked
numpy actor and the stacked loss give each member what its single model gives (plain vs batched,
tested against each other)."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlkit.core.buffer import Batch
from rlkit.core.config import PPOConfig
from rlkit.core.loss import ppo_loss
from rlkit.core.optim import FlatParameters
from rlkit.gym.policies import MLPActorCritic
from rlkit.gym.population.network import StackedActor, StackedLoss, StackedParameters, stacked_linear

SPACES = {
    "categorical": (gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(3)),
    "gaussian": (gym.spaces.Box(-1, 1, (5,)), gym.spaces.Box(-1, 1, (2,))),
    "multi-discrete": (gym.spaces.Box(-1, 1, (3,)), gym.spaces.MultiDiscrete([3, 2])),
}


def _members(kind, k=3, device="cpu"):
    obs_space, action_space = SPACES[kind]
    models = []
    for i in range(k):
        torch.manual_seed(i)
        model = MLPActorCritic(obs_space, action_space).to(device)
        for p in model.head.parameters():  # members' log-stds differ
            p.data.fill_(-0.3 * i)
        models.append(model)
    flats = [FlatParameters(m.ordered_parameters(), split=sum(p.numel() for p in m.actor_parameters())) for m in models]
    return models, StackedParameters(flats, models[0])


def _member_loss(model, mb, k, hp):
    """Member ``k``'s own forward on its rows of ``mb`` and its PPO loss alone: (params, values, loss)."""
    own_params, own_values = model(mb.obs[k])
    own = ppo_loss(model.head, own_params, own_values, mb.map(lambda x: x[k]), clip_coef=hp.clip_coef,
                   clip_vloss=hp.clip_vloss, ent_coef=hp.ent_coef, vf_coef=hp.vf_coef, norm_adv=hp.norm_adv,
                   vloss_form=hp.vloss_form)
    return own_params, own_values, own


def _batch(models, k, b=32):
    g = torch.Generator().manual_seed(7)
    head = models[0].head
    actions = torch.stack([head.sample(torch.randn(b, head.out_dim, generator=g), g) for _ in range(k)]).detach()
    return Batch(torch.randn(k, b, models[0].obs_dim, generator=g), actions.to(head.action_dtype),
                 -torch.rand(k, b, generator=g), torch.randn(k, b, generator=g), torch.randn(k, b, generator=g),
                 torch.randn(k, b, generator=g))


@pytest.mark.parametrize("kind", SPACES)
@pytest.mark.parametrize("hp", [PPOConfig(), PPOConfig(clip_vloss=False, norm_adv=False, ent_coef=0.01),
                                PPOConfig(vloss_form="clipped-mse")])
@pytest.mark.parametrize("fused", [False, True], ids=["plain-loss", "fused-loss"])
def test_the_stacked_forward_and_loss_are_each_members_own(kind, hp, fused):
    models, stacked = _members(kind)
    mb = _batch(models, 3)
    dist_params, values = stacked.forward(mb.obs)
    out = StackedLoss(models[0].head, hp, fused=fused)(stacked.head_tensors(), dist_params, values, mb)
    total = out.loss.sum()
    total.backward()
    for k, model in enumerate(models):
        own_params, own_values, own = _member_loss(model, mb, k, hp)
        assert torch.allclose(dist_params[k], own_params, atol=1e-6) and torch.allclose(values[k], own_values, atol=1e-6)
        for a, b in zip(own, out):
            assert torch.allclose(a, b[k], atol=1e-5), (a, b[k])
        grads = torch.autograd.grad(own.loss, model.ordered_parameters())
        assert torch.allclose(torch.cat([g.reshape(-1) for g in grads]), stacked.theta.grad[k], atol=1e-5)


@pytest.mark.parametrize("kind", SPACES)
def test_the_stacked_actor_acts_as_each_members_numpy_actor(kind):
    models, _ = _members(kind)
    actors = [m.snapshot() for m in models]
    obs = np.random.default_rng(0).standard_normal((3, 6, models[0].obs_dim)).astype(np.float32)
    params = StackedActor(actors).params(obs)
    for k, actor in enumerate(actors):
        assert np.allclose(params[k], actor.params(obs[k]), atol=1e-6)


def test_stacked_linear_gives_each_member_the_same_bits_whatever_the_population():
    torch.manual_seed(0)
    for inp, out in [(1, 64), (64, 1), (4, 64), (64, 64), (64, 2)]:
        x = torch.randn(3, 100, inp, requires_grad=True)
        w = torch.randn(3, out, inp, requires_grad=True)
        b = torch.randn(3, 1, out, requires_grad=True)
        one = [t[:1].detach().clone().requires_grad_() for t in (x, w, b)]
        y3, y1 = stacked_linear(x, w, b), stacked_linear(*one)
        g = torch.randn(3, 100, out)
        grads3 = torch.autograd.grad(y3, (x, w, b), g)
        grads1 = torch.autograd.grad(y1, one, g[:1])
        assert torch.equal(y3[0], y1[0]) and all(torch.equal(p[0], q[0]) for p, q in zip(grads3, grads1))
        assert torch.allclose(y3, torch.baddbmm(b, x, w.transpose(1, 2)), atol=1e-5)


def test_sampling_from_uniforms_draws_what_the_numpy_sampler_draws():
    from rlkit.core.heads import NumpyCategorical

    logits = np.random.default_rng(1).standard_normal((3, 7, 5)).astype(np.float32)
    rngs = [np.random.default_rng(s) for s in range(3)]
    twins = [np.random.default_rng(s) for s in range(3)]
    many = NumpyCategorical().sample_from_uniforms(logits, np.stack([r.random(7, dtype=np.float32) for r in rngs]))
    for k in range(3):
        one = NumpyCategorical().sample(logits[k], twins[k])
        assert np.array_equal(one.actions, many.actions[k]) and np.array_equal(one.log_probs, many.log_probs[k])


def test_gaussians_sampled_together_draw_what_each_members_sampler_draws():
    from rlkit.core.heads import DiagGaussianHead, sample_stacked_gaussians

    heads = [DiagGaussianHead(3, -np.ones(3), np.ones(3), init_log_std=-0.2 * k) for k in range(4)]
    samplers = [h.numpy_sampler() for h in heads]
    means = np.random.default_rng(2).standard_normal((4, 6, 3)).astype(np.float32)
    many = sample_stacked_gaussians(samplers, means, [np.random.default_rng(s) for s in range(4)])
    for k, sampler in enumerate(samplers):
        one = sampler.sample(means[k], np.random.default_rng(k))
        assert np.array_equal(one.actions, many.actions[k]) and np.array_equal(one.log_probs, many.log_probs[k])
    rng = np.random.default_rng(0)
    assert sample_stacked_gaussians(samplers[:1] + [object()], means[:2], [rng, rng]) is None
    assert rng.random() == np.random.default_rng(0).random()  # nothing drawn
