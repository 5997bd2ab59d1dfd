import pytest
import torch

from rlkit import Batch, CategoricalHead, clipped_surrogate, ppo_loss
from rlkit.core.loss import ratio_stats

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


def test_clipped_mse_value_loss_uses_the_clipped_prediction_alone():
    """Stable-Baselines3's form: mean((V_clip - R)^2), no max and no 0.5. Old values 0, returns 1,
    V = (0.9, 0.1, -0.5): the clipped predictions (0.2, 0.1, -0.2) alone count, and only the
    second (inside the clip range) has a gradient, 2 (0.1 - 1) / 3. The pessimistic max instead
    takes the unclipped -0.5 for the third (its error 1.5 is larger) and passes its gradient."""
    head = CategoricalHead(4)
    mb = _batch(n=3)._replace(values=torch.zeros(3), returns=torch.ones(3))
    logits = torch.zeros(3, 4)
    kw = dict(clip_coef=EPS, ent_coef=0.0, vf_coef=1.0, norm_adv=False)
    grads = {}
    for form in ("clipped-mse", "max"):
        new_values = torch.tensor([0.9, 0.1, -0.5], requires_grad=True)
        out = ppo_loss(head, logits, new_values, mb, clip_vloss=True, vloss_form=form, **kw)
        out.loss.backward()  # the value term is the only one that depends on new_values
        grads[form] = (float(out.v_loss), new_values.grad.tolist())
    assert grads["clipped-mse"][0] == pytest.approx((0.8 ** 2 + 0.9 ** 2 + 1.2 ** 2) / 3)
    assert grads["clipped-mse"][1] == pytest.approx([0.0, 2 * (0.1 - 1.0) / 3, 0.0])
    assert grads["max"][0] == pytest.approx(0.5 * (0.8 ** 2 + 0.9 ** 2 + 1.5 ** 2) / 3)
    assert grads["max"][1] == pytest.approx([0.0, (0.1 - 1.0) / 3, (-0.5 - 1.0) / 3])
    unclipped = ppo_loss(head, logits, torch.tensor([0.9, 0.1, -0.5]), mb, clip_vloss=False,
                         vloss_form="clipped-mse", **kw)
    assert float(unclipped.v_loss) == pytest.approx((0.1 ** 2 + 0.9 ** 2 + 1.5 ** 2) / 3)


def test_a_minibatch_of_one_advantage_is_whitened_to_zero_without_a_warning():
    """The std of one value is undefined (torch warns and returns NaN): its advantage minus the
    mean is 0, and so is the whitened one; two or more values are whitened as before."""
    import warnings

    from rlkit.core.loss import normalize_advantages

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert normalize_advantages(torch.tensor([3.0])).tolist() == [0.0]
        assert normalize_advantages(torch.tensor([[3.0], [-1.0]]), dim=1).tolist() == [[0.0], [0.0]]
        two = normalize_advantages(torch.tensor([1.0, 3.0]))
    std, mean = torch.std_mean(torch.tensor([1.0, 3.0]))
    assert torch.equal(two, (torch.tensor([1.0, 3.0]) - mean) / (std + 1e-8))
