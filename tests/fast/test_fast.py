"""The fused kernels of rlkit.fast against the plain path of rlkit.core (and independent
autograd references): same values and gradients within stated tolerances, bit-identical
optimizer steps."""

import gymnasium as gym
import pytest
import torch
from safetensors.torch import load_file
from torch import nn

import rlkit
from rlkit.core.buffer import Batch
from rlkit.core.heads import CategoricalHead, make_head
from rlkit.core.loss import ppo_loss
from rlkit.core.optim import FlatParameters, make_adam
from rlkit.fast.adam import FlatAdam
from rlkit.fast import select_kernels
from rlkit.fast.categorical import categorical_log_prob_entropy
from rlkit.fast.loss import fused_ppo_loss
from rlkit.io.checkpoint import resolve_checkpoint

EPS = 0.2


def test_flat_adam_fast_step_is_bit_identical_to_torch_fused_adam():
    torch.manual_seed(0)
    ref = nn.Parameter(torch.randn(50))
    flat = FlatParameters([nn.Parameter(ref.detach().clone())])
    ref_opt = torch.optim.Adam([ref], lr=3e-3, eps=1e-5, fused=True)
    opt = FlatAdam(flat, lr=3e-3)
    for i in range(6):
        grad = torch.randn(50)
        ref.grad = grad.clone()
        flat.grad.copy_(grad)
        for o in (ref_opt, opt):
            o.param_groups[0]["lr"] = 3e-3 * (1 - i / 6)  # annealed, as the trainer does
            o.step()
        assert torch.equal(ref.detach(), flat.data)
    for k in ("exp_avg", "exp_avg_sq", "step"):
        assert torch.equal(ref_opt.state[ref][k], opt.state[flat.param][k])
    assert make_adam(flat, 1e-3).param_groups[0]["eps"] == 1e-5
    assert FlatAdam(flat, 1e-3, eps=1e-8).param_groups[0]["eps"] == 1e-8


@pytest.mark.parametrize("n,scale", [(2, 1.0), (7, 3.0), (50, 10.0)])
def test_categorical_node_matches_the_plain_head(n, scale):
    head = CategoricalHead(n)
    g = torch.Generator().manual_seed(n)
    logits = (torch.randn(32, n, generator=g, dtype=torch.float64) * scale)
    actions = torch.randint(0, n, (32,), generator=g)
    w_lp, w_h = torch.randn(32, generator=g, dtype=torch.float64), torch.randn(32, generator=g, dtype=torch.float64)
    grads = []
    for fn in (categorical_log_prob_entropy, head.log_prob_entropy):
        z = logits.clone().requires_grad_()
        lp, h = fn(z, actions)
        ((lp * w_lp).sum() + (h * w_h).sum()).backward()
        grads.append((lp.detach(), h.detach(), z.grad))
    for ours, ref in zip(*grads):
        torch.testing.assert_close(ours, ref, rtol=1e-10, atol=1e-12)


def _reference_loss(head, params, new_values, mb, clip_coef, clip_vloss, ent_coef, vf_coef, norm_adv,
                    vloss_form="max"):
    """The PPO loss written independently with plain autograd ops (both implementations must match it)."""
    ratio = (head.log_prob(params, mb.actions) - mb.log_probs).exp()
    adv = mb.advantages
    if norm_adv:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg = torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip_coef, 1 + clip_coef)).mean()
    if vloss_form == "clipped-mse":  # Stable-Baselines3: F.mse_loss(returns, clipped prediction)
        pred = mb.values + torch.clamp(new_values - mb.values, -clip_coef, clip_coef) if clip_vloss else new_values
        v = torch.nn.functional.mse_loss(mb.returns, pred)
    elif clip_vloss:
        v_clipped = mb.values + (new_values - mb.values).clamp(-clip_coef, clip_coef)
        v = 0.5 * torch.max((new_values - mb.returns) ** 2, (v_clipped - mb.returns) ** 2).mean()
    else:
        v = 0.5 * ((new_values - mb.returns) ** 2).mean()
    return pg - ent_coef * head.entropy(params).mean() + vf_coef * v


@pytest.mark.parametrize("loss_fn", [ppo_loss, fused_ppo_loss], ids=["plain", "fast"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("discrete", [True, False])
@pytest.mark.parametrize("clip_vloss", [True, False])
@pytest.mark.parametrize("norm_adv", [True, False])
@pytest.mark.parametrize("vloss_form", ["max", "clipped-mse"])
def test_ppo_loss_value_and_gradient_match_an_autograd_reference(loss_fn, dtype, discrete, clip_vloss, norm_adv,
                                                                 vloss_form):
    """float32 with values of a realistic scale matters: there ``old + (V - old)`` rounds away from
    ``V`` inside the clip range, and the clipped value branch must keep its gradient."""
    g = torch.Generator().manual_seed(3)
    n = 256
    head = make_head(gym.spaces.Discrete(5) if discrete else gym.spaces.Box(-1, 1, (3,)))
    if not discrete:
        with torch.no_grad():
            head.log_std.copy_(torch.randn(3, generator=g) * 0.3)
    params = (torch.randn(n, head.out_dim, generator=g) * 0.5).to(dtype)
    actions = (torch.randint(0, 5, (n,), generator=g) if discrete else torch.randn(n, 3, generator=g).to(dtype))
    head = head.to(dtype)
    with torch.no_grad():  # behaviour log-probs spread so ratios fall on both sides of the clip range
        old = head.log_prob(params, actions) + torch.randn(n, generator=g).to(dtype) * 0.4
    # Large values, and values near 0 where V - old is inexact (V and old not within a factor of 2).
    values = (torch.randn(n, generator=g) * torch.linspace(30, 0.05, n)).to(dtype)
    mb = Batch(torch.zeros(n, 1), actions, old, torch.randn(n, generator=g).to(dtype),
               values + (torch.randn(n, generator=g) * 3).to(dtype), values)
    new_values = values + (torch.randn(n, generator=g) * 0.15).to(dtype)  # some beyond the value clip range
    # Old values ~0.1 and new ones ~0: inside the clip range, yet ``old + (V - old)`` rounds away from V
    # in float32, so the clipped value branch can win the max by a rounding error; it keeps its slope.
    values[:32] = (0.05 + 0.1 * torch.rand(32, generator=g)).to(dtype)
    new_values[:32] = ((torch.rand(32, generator=g) - 0.5) * 2e-3).to(dtype)
    kw = dict(clip_coef=EPS, clip_vloss=clip_vloss, ent_coef=0.05, vf_coef=0.7, norm_adv=norm_adv,
              vloss_form=vloss_form)
    grads = []
    for fn in (lambda p, v: loss_fn(head, p, v, mb, **kw).loss, lambda p, v: _reference_loss(head, p, v, mb, **kw)):
        p, v = params.clone().requires_grad_(), new_values.clone().requires_grad_()
        head.zero_grad()
        loss = fn(p, v)
        loss.backward()
        extra = [] if discrete else [head.log_std.grad.clone()]
        grads.append([loss.detach(), p.grad, v.grad, *extra])
    ratio = (head.log_prob(params, actions) - old).exp()
    assert ((ratio - 1).abs() > EPS).float().mean() > 0.2  # the clipped cases are exercised
    assert ((new_values - values).abs() > EPS).float().mean() > 0.1
    if dtype == torch.float32:
        assert (values + (new_values - values).clamp(-EPS, EPS) != new_values).any()
    tol = dict(rtol=1e-10, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-6)
    for ours, ref in zip(*grads):
        torch.testing.assert_close(ours, ref, **tol)


@pytest.mark.parametrize("discrete", [True, False])
@pytest.mark.parametrize("dtype,hidden", [(torch.float32, (64, 64)), (torch.float64, (64, 64)),
                                          (torch.float64, (16,)), (torch.float64, (8, 16, 8))])
def test_fused_actor_critic_matches_module_autograd(discrete, dtype, hidden):
    """The single-node forward/backward of rlkit.fast.mlp equals autograd through the modules
    (float32 takes the numpy-tanh path, float64 torch.tanh)."""
    from rlkit.core.loss import ppo_loss
    from rlkit.gym.policies import MLPActorCritic

    torch.manual_seed(0)
    act_space = gym.spaces.Discrete(3) if discrete else gym.spaces.Box(-1, 1, (2,))
    model = MLPActorCritic(gym.spaces.Box(-5, 5, (6,)), act_space, hidden).to(dtype)
    flat = FlatParameters(model.ordered_parameters())
    with torch.no_grad():  # break the symmetric init so every gradient is non-trivial
        flat.data.add_(torch.randn_like(flat.data) * 0.3)
    g = torch.Generator().manual_seed(1)
    n = 32
    obs = torch.randn(n, 6, generator=g).to(dtype)
    actions = torch.randint(0, 3, (n,), generator=g) if discrete else torch.randn(n, 2, generator=g).to(dtype)
    mb = Batch(obs, actions, torch.randn(n, generator=g).to(dtype) - 1, torch.randn(n, generator=g).to(dtype),
               torch.randn(n, generator=g).to(dtype), torch.randn(n, generator=g).to(dtype))
    results = []
    for fused in (False, True):
        model.forward_override = None
        select_kernels("fast" if fused else "plain", small_mlp=True, device=torch.device("cpu")).prepare(model, flat)
        assert (model.forward_override is not None) == fused
        flat.zero_grad()
        params, values = model(obs)
        out = ppo_loss(model.head, params, values, mb, clip_coef=0.2, clip_vloss=True, ent_coef=0.01, vf_coef=0.5,
                       norm_adv=True)
        (out.loss + 0.5 * model(obs[:5])[1].sum()).backward()  # two calls in one graph
        results.append((params.detach(), values.detach(), flat.grad.clone()))
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-12)
    for plain, fused in zip(*results):
        torch.testing.assert_close(fused, plain, **tol)
    assert (results[1][2] != 0).float().mean() > 0.9  # the comparison covers real gradients


@pytest.mark.parametrize("vloss_form,adam_eps", [("max", 1e-5), ("clipped-mse", 1e-8)])
def test_plain_and_fast_kernels_train_to_the_same_weights_within_rounding(logdir, vloss_form, adam_eps):
    """The whole trainer with kernels=plain and kernels=fast: identical math, so after a few
    updates the weights differ only by accumulated float32 rounding (in either value-loss form)."""
    weights = []
    for kernels in ("plain", "fast"):
        cfg = rlkit.preset("cartpole", total_steps=1024, num_envs=4, num_steps=128, update_epochs=2, logdir=logdir,
                           run_name=kernels, kernels=kernels, eval_episodes=0, progress=False,
                           vloss_form=vloss_form, adam_eps=adam_eps)
        result = rlkit.train(cfg)
        tensors = load_file(str(resolve_checkpoint(result.run_dir) / "tensors.safetensors"))
        weights.append({k: v for k, v in tensors.items() if k.startswith("model.")})
    moved = 0.0
    for k in weights[0]:
        torch.testing.assert_close(weights[1][k], weights[0][k], rtol=1e-4, atol=1e-5)
        moved = max(moved, float((weights[0][k] - weights[1][k]).abs().max()))
    assert moved < 1e-4


def test_value_loss_form_and_adam_eps_reach_both_trainers(logdir):
    """The config's vloss_form and adam_eps are what the update uses: the optimizer's eps, and
    different weights after one update with the other value loss."""
    from rlkit.gym.trainer import PPOTrainer
    from rlkit.rlhf.config import RLHFConfig

    assert RLHFConfig(adam_eps=1e-8).adam_eps == 1e-8 and RLHFConfig().vloss_form == "max"
    weights = {}
    for form, eps in (("max", 1e-5), ("clipped-mse", 1e-5), ("max", 1e-8)):
        cfg = rlkit.preset("cartpole", num_envs=2, num_steps=64, logdir=logdir, vloss_form=form, adam_eps=eps,
                           kernels="plain", eval_every=0, seed=1)
        trainer = PPOTrainer(cfg)
        assert trainer.learner.optimizer.param_groups[0]["eps"] == eps
        trainer.update()
        weights[form, eps] = trainer.learner.flat.param.detach().clone()
        trainer.envs.close()
    assert not torch.equal(weights["max", 1e-5], weights["clipped-mse", 1e-5])
    assert not torch.equal(weights["max", 1e-5], weights["max", 1e-8])
