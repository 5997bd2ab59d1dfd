import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.distributions import Categorical, Independent, Normal

from rlkit import CategoricalHead, DiagGaussianHead, UnsupportedSpaceError, make_head
from rlkit.gym.policies import MLPActorCritic


def test_categorical_matches_torch_distributions():
    torch.manual_seed(0)
    head = CategoricalHead(5)
    logits = torch.randn(32, 5) * 3
    actions = torch.randint(0, 5, (32,))
    ref = Categorical(logits=logits)
    torch.testing.assert_close(head.log_prob(logits, actions), ref.log_prob(actions))
    torch.testing.assert_close(head.entropy(logits), ref.entropy())


def test_gaussian_matches_torch_distributions_summed_over_dims():
    torch.manual_seed(0)
    head = DiagGaussianHead(3, -np.ones(3), np.ones(3))
    with torch.no_grad():
        head.log_std.copy_(torch.tensor([-0.5, 0.0, 0.7]))
    mean = torch.randn(16, 3)
    actions = torch.randn(16, 3) * 2
    ref = Normal(mean, head.log_std.exp().expand_as(mean))
    torch.testing.assert_close(head.log_prob(mean, actions), ref.log_prob(actions).sum(-1))
    torch.testing.assert_close(head.entropy(mean), ref.entropy().sum(-1))


@pytest.mark.parametrize("head,params", [
    (CategoricalHead(4), torch.tensor([[2.0, -1.0, 0.5, 0.0]])),
    (DiagGaussianHead(2, -np.ones(2), np.ones(2)), torch.tensor([[0.3, -0.2]])),
])
def test_entropy_is_minus_expected_log_prob(head, params):
    gen = torch.Generator().manual_seed(0)
    many = params.expand(20000, -1)
    samples = head.sample(many, gen)
    mc = -head.log_prob(many, samples).mean().detach()
    assert float(mc) == pytest.approx(float(head.entropy(params)[0].detach()), abs=0.03)


def test_gaussian_actions_clipped_only_for_the_env():
    head = DiagGaussianHead(2, np.array([-1.0, -1.0]), np.array([1.0, 1.0]))
    raw = np.array([[3.0, -0.5]], np.float32)
    np.testing.assert_array_equal(head.to_env(raw), [[1.0, -0.5]])
    assert raw[0, 0] == 3.0  # the stored sample is untouched


@pytest.mark.parametrize("space", [
    gym.spaces.Dict({"a": gym.spaces.Discrete(2)}),
    gym.spaces.Tuple((gym.spaces.Discrete(2),)),
    gym.spaces.Text(5),
])
def test_unsupported_action_space_names_it(space):
    with pytest.raises(UnsupportedSpaceError, match=type(space).__name__):
        make_head(space)


@pytest.mark.parametrize("action_space", [gym.spaces.Discrete(3), gym.spaces.Box(-1, 1, (2,))])
def test_numpy_acting_matches_torch_head(action_space):
    torch.manual_seed(0)
    model = MLPActorCritic(gym.spaces.Box(-5, 5, (4,)), action_space)
    with torch.no_grad():  # make the policy far from uniform so the check has teeth
        model.actor[-1].weight.mul_(300.0)
    actor = model.snapshot()
    obs = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    res = actor.act(obs, np.random.default_rng(1))
    params, values = model(torch.from_numpy(obs))
    actions = torch.from_numpy(res.actions)
    np.testing.assert_allclose(res.log_probs, model.head.log_prob(params, actions).detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(res.values, values.detach().numpy(), atol=1e-5)
    np.testing.assert_allclose(actor.value(obs), values.detach().numpy(), atol=1e-5)


def test_numpy_categorical_sampling_frequencies():
    torch.manual_seed(0)
    model = MLPActorCritic(gym.spaces.Box(-5, 5, (2,)), gym.spaces.Discrete(3))
    with torch.no_grad():
        model.actor[-1].bias.copy_(torch.tensor([0.0, 1.0, -1.0]))
    obs = np.zeros((200_000, 2), np.float32)
    res = model.snapshot().act(obs, np.random.default_rng(0))
    freq = np.bincount(res.actions, minlength=3) / len(obs)
    probs = torch.softmax(model(torch.from_numpy(obs[:1]))[0], -1)[0].detach().numpy()
    np.testing.assert_allclose(freq, probs, atol=0.005)


def test_orthogonal_init_gains():
    model = MLPActorCritic(gym.spaces.Box(-1, 1, (8,)), gym.spaces.Discrete(2))
    w_hidden = model.actor[0].weight.detach()
    w_pi, w_v = model.actor[-1].weight.detach(), model.critic[-1].weight.detach()
    # Orthogonal rows scaled by sqrt(2): W W^T = 2 I (8 inputs < 64 outputs -> columns orthonormal).
    torch.testing.assert_close(w_hidden.T @ w_hidden, 2 * torch.eye(8), atol=1e-4, rtol=0)
    assert float(torch.linalg.matrix_norm(w_pi, ord=2)) == pytest.approx(0.01, rel=1e-3)
    assert float(torch.linalg.matrix_norm(w_v, ord=2)) == pytest.approx(1.0, rel=1e-3)
    assert all(float(m.bias.abs().max()) == 0 for m in model.actor if isinstance(m, torch.nn.Linear))


def _torch_distribution(head, params):
    """The head's distribution as torch.distributions builds it (a Gaussian's dims independent)."""
    if isinstance(head, CategoricalHead):
        return Categorical(logits=params)
    return Independent(Normal(params, head.log_std.exp().expand_as(params)), 1)


@pytest.mark.parametrize("head,params", [
    (CategoricalHead(4), torch.randn(16, 4, generator=torch.Generator().manual_seed(0)) * 3),
    (DiagGaussianHead(2, -np.ones(2), np.ones(2), init_log_std=-0.7), torch.randn(16, 2)),
])
def test_log_prob_entropy_matches_torch_distributions(head, params):
    """The pair the PPO loss uses (the fused kernels' ``autograd`` path reads it for a Gaussian)."""
    actions = head.sample(params, torch.Generator().manual_seed(1))
    log_prob, entropy = head.log_prob_entropy(params, actions)
    ref = _torch_distribution(head, params)
    torch.testing.assert_close(log_prob, ref.log_prob(actions))
    torch.testing.assert_close(entropy, ref.entropy())


@pytest.mark.parametrize("n,scale", [(2, 1.0), (7, 3.0), (50, 10.0)])
def test_categorical_log_prob_entropy_and_its_gradient_match_torch_distributions(n, scale):
    """The fused log-softmax's values and its gradient with respect to the logits, against
    autograd through torch.distributions.Categorical (float64)."""
    head = CategoricalHead(n)
    g = torch.Generator().manual_seed(n)
    logits = (torch.randn(32, n, generator=g, dtype=torch.float64) * scale)
    actions = torch.randint(0, n, (32,), generator=g)
    w_lp, w_h = torch.randn(32, generator=g, dtype=torch.float64), torch.randn(32, generator=g, dtype=torch.float64)
    grads = []
    for ours in (True, False):
        z = logits.clone().requires_grad_()
        if ours:
            lp, h = head.log_prob_entropy(z, actions)
        else:
            ref = Categorical(logits=z)
            lp, h = ref.log_prob(actions), ref.entropy()
        ((lp * w_lp).sum() + (h * w_h).sum()).backward()
        grads.append((lp.detach(), h.detach(), z.grad))
    for ours, ref in zip(*grads):
        torch.testing.assert_close(ours, ref, rtol=1e-9, atol=1e-12)


def test_categorical_kl_matches_torch_distributions():
    torch.manual_seed(0)
    head = CategoricalHead(6)
    old, new = torch.randn(3, 32, 6) * 3, torch.randn(3, 32, 6) * 3  # any leading axes (a population's [K, B])
    old[0, 0, 2] = -1e8  # a masked action: probability 0 under the old policy adds nothing
    ref = torch.distributions.kl_divergence(Categorical(logits=old), Categorical(logits=new))
    torch.testing.assert_close(head.kl(head.full_params(old), head.full_params(new)), ref)
    assert torch.equal(head.kl(old, old), torch.zeros(3, 32))


def test_gaussian_kl_matches_torch_distributions_summed_over_dims():
    from rlkit.core.heads import gaussian_full_params

    torch.manual_seed(0)
    head = DiagGaussianHead(3, -np.ones(3), np.ones(3))
    with torch.no_grad():
        head.log_std.copy_(torch.tensor([-0.5, 0.0, 0.7]))
    old_mean, new_mean = torch.randn(16, 3), torch.randn(16, 3)
    old = head.full_params(old_mean)
    new_log_std = torch.tensor([0.2, -0.3, 0.1])
    new = gaussian_full_params(new_mean, new_log_std)
    assert old.shape == (16, 6)
    ref = torch.distributions.kl_divergence(Independent(Normal(old_mean, head.log_std.exp().expand(16, 3)), 1),
                                            Independent(Normal(new_mean, new_log_std.exp().expand(16, 3)), 1))
    torch.testing.assert_close(head.kl(old, new), ref)
    assert torch.equal(head.kl(old, old), torch.zeros(16))
    stacked = gaussian_full_params(torch.randn(2, 16, 3), torch.zeros(2, 1, 3))  # K heads' log-stds [K, 1, A]
    assert stacked.shape == (2, 16, 6) and torch.equal(stacked[..., 3:], torch.zeros(2, 16, 3))


def test_only_heads_with_an_analytic_kl_offer_it():
    from rlkit.core.heads import offers_kl
    from rlkit.core.multi_heads import BernoulliHead

    assert offers_kl(CategoricalHead(2)) and offers_kl(DiagGaussianHead(1, -np.ones(1), np.ones(1)))
    assert not offers_kl(BernoulliHead((3,)))
