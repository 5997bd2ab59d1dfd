import pytest
import torch

from rlkit import Batch, CategoricalHead, clipped_surrogate, ppo_loss
from rlkit.loss import ratio_stats

EPS = 0.2


@pytest.mark.parametrize("adv,ratio,value,grad", [
    # A > 0: gains are capped above 1 + eps (flat, zero gradient), not below 1 - eps.
    (2.0, 1.5, -2.0 * 1.2, 0.0),
    (2.0, 0.5, -2.0 * 0.5, -2.0),
    # A < 0: losses are capped below 1 - eps (flat), not above 1 + eps.
    (-2.0, 0.5, 2.0 * 0.8, 0.0),
    (-2.0, 1.5, 2.0 * 1.5, 2.0),
    # Inside the trust region the objective is the plain ratio objective.
    (2.0, 1.1, -2.0 * 1.1, -2.0),
    (-2.0, 0.9, 2.0 * 0.9, 2.0),
])
def test_clipped_objective_value_and_gradient(adv, ratio, value, grad):
    r = torch.tensor([ratio], requires_grad=True)
    loss = clipped_surrogate(r, torch.tensor([adv]), EPS)
    loss.backward()
    assert float(loss.detach()) == pytest.approx(value)
    assert float(r.grad) == pytest.approx(grad)


def _batch(n=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return Batch(torch.randn(n, 3, generator=g), torch.randint(0, 4, (n,), generator=g), torch.zeros(n),
                 torch.randn(n, generator=g), torch.randn(n, generator=g), torch.randn(n, generator=g))


def test_ppo_loss_components():
    head = CategoricalHead(4)
    mb = _batch()
    logits = torch.zeros(8, 4, requires_grad=True)
    mb = mb._replace(log_probs=head.log_prob(logits, mb.actions).detach())  # ratio == 1
    new_values = mb.values + torch.linspace(-1, 1, 8)
    out = ppo_loss(head, logits, new_values, mb, clip_coef=EPS, clip_vloss=False, ent_coef=0.1, vf_coef=0.5,
                   norm_adv=False)
    stats = ratio_stats(out.log_ratio, EPS)
    assert float(stats.approx_kl) == 0.0 and float(stats.clipfrac) == 0.0
    assert float(out.pg_loss) == pytest.approx(float(-mb.advantages.mean()))
    assert float(out.v_loss) == pytest.approx(float(0.5 * (new_values - mb.returns).square().mean()))
    assert float(out.entropy) == pytest.approx(float(torch.log(torch.tensor(4.0))))
    assert float(out.loss.detach()) == pytest.approx(float(out.pg_loss - 0.1 * out.entropy + 0.5 * out.v_loss))


def test_value_clipping_takes_the_pessimistic_branch():
    head = CategoricalHead(4)
    mb = _batch()._replace(values=torch.zeros(8), returns=torch.full((8,), 1.0))
    new_values = torch.full((8,), 0.9)  # moved 0.9 from the old value; clipped to 0.2
    logits = torch.zeros(8, 4)
    kw = dict(clip_coef=EPS, ent_coef=0.0, vf_coef=1.0, norm_adv=False)
    clipped = ppo_loss(head, logits, new_values, mb, clip_vloss=True, **kw)
    plain = ppo_loss(head, logits, new_values, mb, clip_vloss=False, **kw)
    assert float(plain.v_loss) == pytest.approx(0.5 * 0.1 ** 2)
    assert float(clipped.v_loss) == pytest.approx(0.5 * 0.8 ** 2)


def test_advantage_normalization_is_per_minibatch():
    head = CategoricalHead(4)
    mb = _batch()
    logits = torch.zeros(8, 4)
    mb = mb._replace(log_probs=head.log_prob(logits, mb.actions))
    out = ppo_loss(head, logits, mb.values, mb, clip_coef=EPS, clip_vloss=False, ent_coef=0.0, vf_coef=0.0,
                   norm_adv=True)
    assert float(out.pg_loss) == pytest.approx(0.0, abs=1e-6)  # ratio 1: -mean(normalized A) = 0


def test_ratio_stats_k3_kl_and_clipfrac():
    log_ratio = torch.log(torch.tensor([1.0, 1.5, 0.5, 1.1]))
    stats = ratio_stats(log_ratio, EPS)
    r = log_ratio.exp()
    assert float(stats.approx_kl) == pytest.approx(float(((r - 1) - log_ratio).mean()))
    assert float(stats.approx_kl) > 0
    assert float(stats.clipfrac) == pytest.approx(0.5)


def _reference_loss(head, params, new_values, mb, clip_coef, clip_vloss, ent_coef, vf_coef, norm_adv):
    """The PPO loss written with plain autograd ops (what rlkit's hand-written backward must match)."""
    ratio = (head.log_prob(params, mb.actions) - mb.log_probs).exp()
    adv = mb.advantages
    if norm_adv:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    pg = torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip_coef, 1 + clip_coef)).mean()
    if clip_vloss:
        v_clipped = mb.values + (new_values - mb.values).clamp(-clip_coef, clip_coef)
        v = 0.5 * torch.max((new_values - mb.returns) ** 2, (v_clipped - mb.returns) ** 2).mean()
    else:
        v = 0.5 * ((new_values - mb.returns) ** 2).mean()
    return pg - ent_coef * head.entropy(params).mean() + vf_coef * v


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("discrete", [True, False])
@pytest.mark.parametrize("clip_vloss", [True, False])
@pytest.mark.parametrize("norm_adv", [True, False])
def test_ppo_loss_gradient_matches_autograd_reference(dtype, discrete, clip_vloss, norm_adv):
    """float32 with values of a realistic scale matters: there ``old + (V - old)`` rounds away from
    ``V`` inside the clip range, and the clipped value branch must keep its gradient."""
    import gymnasium as gym

    from rlkit import make_head

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
    kw = dict(clip_coef=EPS, clip_vloss=clip_vloss, ent_coef=0.05, vf_coef=0.7, norm_adv=norm_adv)
    grads = []
    for fn in (lambda p, v: ppo_loss(head, p, v, mb, **kw).loss, lambda p, v: _reference_loss(head, p, v, mb, **kw)):
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
