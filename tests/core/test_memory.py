"""Memory torsos: one step against torch's own cells, the padded replay against the stepwise one,
the numpy acting copy against torch, and episode starts that reset the state."""

import numpy as np
import pytest
import torch

from rlkit.core.memory import MEMORIES, Segments, make_memory, replay_stepwise
from rlkit.errors import ConfigError


def _torso(kind, in_dim=5, size=7, seed=0):
    torch.manual_seed(seed)
    torso = make_memory(kind, in_dim, size)
    with torch.no_grad():  # biases away from their zero init, so every weight is exercised
        for p in torso.parameters():
            p.add_(0.3 * torch.randn_like(p))
    return torso


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_one_step_is_torchs_own_cell(kind):
    torso = _torso(kind)
    x, state = torch.randn(4, 5), torch.randn(4, torso.state_size)
    out, nxt = torso.step(x, state)
    cell = (torch.nn.LSTMCell if kind == "lstm" else torch.nn.GRUCell)(5, 7)
    cell.load_state_dict({k.replace("_l0", ""): v for k, v in torso.rnn.state_dict().items()})
    if kind == "lstm":
        h, c = cell(x, (state[:, :7], state[:, 7:]))
        ref = torch.cat([h, c], 1)
    else:
        h = ref = cell(x, state)
    assert torch.allclose(out, h, atol=1e-6) and torch.allclose(nxt, ref, atol=1e-6)


def _starts(length, width, p, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(length, width, generator=g) < p


@pytest.mark.parametrize("kind", ["lstm", "gru"])
@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 1.0])
def test_the_padded_replay_gives_the_stepwise_outputs_and_gradients(kind, p):
    torso = _torso(kind)
    length, width = 13, 6
    starts = _starts(length, width, p, seed=1)
    x = torch.randn(length, width, 5, requires_grad=True)
    state = torch.randn(width, torso.state_size, requires_grad=True)
    fast, plain = torso.replay(x, starts, state), replay_stepwise(torso, x, starts, state)
    assert fast.shape == (length, width, 7) and torch.allclose(fast, plain, atol=1e-5)
    weights = torch.randn_like(fast)
    grads = [torch.autograd.grad((out * weights).sum(), [x, state, *torso.parameters()]) for out in (fast, plain)]
    for a, b in zip(*grads):
        assert torch.allclose(a, b, atol=1e-4)


def test_a_state_given_to_a_sequence_that_starts_an_episode_is_not_read():
    torso = _torso("lstm")
    starts = torch.zeros(4, 2, dtype=torch.bool)
    starts[0, 0] = True
    x = torch.randn(4, 2, 5)
    a = torso.replay(x, starts, torch.randn(2, torso.state_size))
    b = torso.replay(x, starts, torch.randn(2, torso.state_size))
    assert torch.equal(a[:, 0], b[:, 0]) and not torch.allclose(a[:, 1], b[:, 1])


def test_an_episode_start_inside_a_sequence_forgets_what_came_before():
    torso = _torso("gru")
    x = torch.randn(8, 1, 5)
    starts = torch.zeros(8, 1, dtype=torch.bool)
    starts[5, 0] = True
    whole = torso.replay(x, starts, torch.randn(1, torso.state_size))
    fresh = torso.replay(x[5:], starts[5:], torch.randn(1, torso.state_size))
    assert torch.allclose(whole[5:], fresh, atol=1e-6)


def test_segments_cover_every_step_once_in_order():
    starts = torch.tensor([[0, 1, 0], [1, 0, 0], [0, 0, 0], [1, 1, 0]], dtype=torch.bool)
    cut = Segments.of(starts)
    # column 0: [0], [1, 2], [3]; column 1: [0, 1, 2], [3]; column 2: [0..3]
    assert cut.column.tolist() == [0, 0, 0, 1, 1, 2]
    assert cut.carries.tolist() == [True, False, False, False, False, True]
    assert cut.valid.sum(0).tolist() == [1, 2, 1, 3, 1, 4]
    assert sorted(cut.order.tolist()) == sorted(set(cut.order.tolist())) and len(cut.order) == 12


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_the_numpy_copy_steps_as_torch_does(kind):
    torso = _torso(kind, in_dim=6, size=16)
    actor = torso.snapshot()
    x, state = np.random.default_rng(0).standard_normal((2, 9, 6)).astype(np.float32)[0], actor.initial_state(9)
    ref = torso.initial_state(9)
    for t in range(20):
        out, state = actor.step(x, state)
        with torch.no_grad():
            ref_out, ref = torso.step(torch.from_numpy(x), ref)
        assert np.allclose(out, ref_out.numpy(), atol=1e-5) and np.allclose(state, ref.numpy(), atol=1e-5), t
        x = np.tanh(out[:, :6])


def test_an_unknown_memory_is_one_line():
    with pytest.raises(ConfigError, match="choose from lstm, gru"):
        make_memory("transformer", 3, 4)
    assert set(MEMORIES) >= {"lstm", "gru"}
