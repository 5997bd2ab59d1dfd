"""The population's fused stacked MLP node and fused loss against the plain batched forward
(autograd through ``baddbmm`` and ``tanh``) and plain loss: the same outputs and gradients, and a
member's bits whatever ``K``."""

import pytest
import torch

from rlkit.core.config import PPOConfig
from rlkit.gym.population.network import StackedLoss
from tests.gym.population.test_network import SPACES, _batch, _members


def _loss_grads(kind, fused, k=3):
    """The stacked outputs and ``[K, P]`` gradient of the PPO loss for members 0..k-1 of three,
    each on its own rows of one batch of three members' data."""
    models, plain = _members(kind, k)
    mb = _batch(_members(kind, 3)[0], 3).map(lambda x: x[:k])
    if fused:
        from rlkit.core.optim import FlatParameters
        from rlkit.gym.population.network import StackedParameters

        flats = [FlatParameters(m.ordered_parameters(), split=sum(p.numel() for p in m.actor_parameters()))
                 for m in models]
        plain = StackedParameters(flats, models[0], fused=True)
    dist_params, values = plain.forward(mb.obs)
    out = StackedLoss(models[0].head, PPOConfig(), fused=fused)(plain.head_tensors(), dist_params, values, mb)
    plain.zero_grad()
    out.loss.sum().backward()
    return dist_params.detach(), values.detach(), plain.theta.grad.clone()


@pytest.mark.parametrize("kind", SPACES)
def test_the_fused_node_gives_the_plain_forward_and_gradients(kind):
    a, b = _loss_grads(kind, fused=False), _loss_grads(kind, fused=True)
    for x, y in zip(a, b):
        assert torch.allclose(x, y, atol=1e-5), (x - y).abs().max()
    assert b[2].abs().sum() > 0


@pytest.mark.parametrize("kind", SPACES)
def test_a_members_bits_through_the_fused_node_do_not_depend_on_k(kind):
    one, three = _loss_grads(kind, fused=True, k=1), _loss_grads(kind, fused=True, k=3)
    for x, y in zip(one, three):
        assert torch.equal(x[0], y[0])


def _node(k, sizes, numpy=True):
    """A stacked fused node of ``k`` members (seeded weights) for actor widths ``sizes`` and a
    critic of the same hidden widths; ``numpy=False`` forces the torch path."""
    from rlkit.fast.stacked_mlp import StackedFusedMLP

    spec_a, spec_c, at = [], [], 0
    for spec, widths in ((spec_a, sizes), (spec_c, [*sizes[:-1], 1])):
        for inp, out in zip(widths, widths[1:]):
            spec.append((slice(at, at + out * inp), slice(at + out * inp, at + out * inp + out), (out, inp)))
            at += out * inp + out
    theta = (torch.randn(3, at, generator=torch.Generator().manual_seed(0))[:k] * 0.5).requires_grad_()
    node = StackedFusedMLP(theta, spec_a, spec_c)
    node.numpy = node.numpy and numpy
    return node


@pytest.mark.parametrize("sizes", [[1, 5, 1], [3, 8, 8, 2], [4, 64, 64, 2]])
@pytest.mark.parametrize("rows", [1, 7, 128])
def test_the_numpy_node_gives_a_member_the_same_bits_whatever_k_and_the_torch_nodes_numbers(sizes, rows):
    g = torch.Generator().manual_seed(1)
    obs = torch.randn(3, rows, sizes[0], generator=g)
    g_params, g_values = torch.randn(3, rows, sizes[-1], generator=g), torch.randn(3, rows, generator=g)
    results = {}
    for k, numpy in ((3, True), (1, True), (3, False)):
        node = _node(k, sizes, numpy)
        params, values, inputs = node.forward(obs[:k])
        grad = node.backward(g_params[:k], g_values[:k], inputs)
        results[k, numpy] = (params, values, grad)
        assert grad.abs().sum() > 0
    for a, b in zip(results[3, True], results[1, True]):
        assert torch.equal(a[:1], b)
    for a, b in zip(results[3, True], results[3, False]):
        assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()
