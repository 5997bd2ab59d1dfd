"""Memory torsos (``--memory lstm|gru``): a recurrent cell between a policy's encoder and its
heads, registered by name like heads and encoders.

A torso's state for ``N`` envs is one ``[N, S]`` tensor (the LSTM's ``h`` then ``c``, the GRU's
``h``), so rollouts store it, checkpoints save it and minibatches gather it as any other field.
Three ways to run a torso, tested against each other:

- :meth:`MemoryTorso.step`: one time step for ``N`` envs (acting, with torch);
- :func:`replay_stepwise`: a ``[L, B]`` block of sequences step by step, the state zeroed where
  an episode starts (the plain reference);
- :meth:`MemoryTorso.replay`: the same block cut at episode starts into segments, padded and run
  through the cuDNN/MKL-backed ``nn.LSTM`` / ``nn.GRU`` in one call (the fast default of updates);

and :meth:`MemoryTorso.snapshot`, a float32 numpy copy that acts in the rollout loop (torch's
per-op dispatch dominates acting on a few observations).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch
from torch import nn

from rlkit.errors import ConfigError


class MemoryTorso(nn.Module):
    """A one-layer LSTM or GRU of ``size`` units over ``in_dim`` inputs (PyTorch's gate order:
    LSTM ``i, f, g, o``; GRU ``r, z, n``)."""

    def __init__(self, kind: str, in_dim: int, size: int) -> None:
        super().__init__()
        if kind not in ("lstm", "gru"):
            raise ConfigError(f"unknown memory cell {kind!r}")
        self.kind, self.in_dim, self.out_dim = kind, in_dim, size
        self.rnn: nn.LSTM | nn.GRU = (nn.LSTM if kind == "lstm" else nn.GRU)(in_dim, size)
        for name, param in self.rnn.named_parameters():  # orthogonal weights, zero biases (as CleanRL's LSTM agent)
            nn.init.orthogonal_(param, 1.0) if name.startswith("weight") else nn.init.zeros_(param)
        self.state_size = 2 * size if kind == "lstm" else size
        """Numbers of state per env: ``S``."""

    def initial_state(self, n: int) -> torch.Tensor:
        """``[n, S]`` zeros: the state at an episode's start."""
        return torch.zeros(n, self.state_size, device=self.rnn.weight_ih_l0.device)

    def _weights(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        r = self.rnn
        return r.weight_ih_l0, r.weight_hh_l0, r.bias_ih_l0, r.bias_hh_l0

    def step(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``x [N, in_dim]``, ``state [N, S]`` -> (output ``[N, H]``, next state ``[N, S]``)."""
        if self.kind == "lstm":
            h, c = torch.lstm_cell(x, tuple(state.chunk(2, dim=1)), *self._weights())
            return h, torch.cat([h, c], dim=1)
        h = torch.gru_cell(x, state, *self._weights())
        return h, h

    def replay(self, x: torch.Tensor, starts: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """``x [L, B, in_dim]`` inputs of ``B`` sequences, ``starts [L, B]`` bool (an episode starts
        there: the state is zeroed before that step), ``state [B, S]`` at each sequence's first
        step -> outputs ``[L, B, H]``; the numbers of :func:`replay_stepwise`, in one padded call."""
        cut = Segments.of(starts)
        init = state.index_select(0, cut.column) * cut.carries[:, None].to(state.dtype)
        # Padding repeats a segment's last step: it comes after every output that is read.
        padded = x.reshape(-1, x.shape[-1]).index_select(0, cut.source.reshape(-1))
        padded = padded.reshape(*cut.source.shape, x.shape[-1])
        if self.kind == "lstm":
            h0, c0 = init.chunk(2, dim=1)
            out, _ = self.rnn(padded, (h0[None].contiguous(), c0[None].contiguous()))
        else:
            out, _ = self.rnn(padded, init[None].contiguous())
        flat = out.reshape(-1, self.out_dim).index_select(0, cut.order)
        return flat.reshape(*starts.shape, self.out_dim)

    def snapshot(self) -> "NumpyMemory":
        return NumpyMemory(self)


def replay_stepwise(torso: MemoryTorso, x: torch.Tensor, starts: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
    """:meth:`MemoryTorso.replay` step by step: the reference its padded segments are tested against."""
    outs = []
    for t in range(x.shape[0]):
        state = state * (~starts[t])[:, None].to(state.dtype)
        out, state = torso.step(x[t], state)
        outs.append(out)
    return torch.stack(outs)


class Segments:
    """``[L, B]`` sequences cut where episodes start, as index tensors for one padded RNN call.

    ``K`` segments (column-major: sequence ``b``'s in time order), the longest ``M`` steps."""

    def __init__(self, source: torch.Tensor, valid: torch.Tensor, column: torch.Tensor, carries: torch.Tensor,
                 order: torch.Tensor) -> None:
        self.source, self.valid, self.column, self.carries, self.order = source, valid, column, carries, order

    @classmethod
    def of(cls, starts: torch.Tensor) -> "Segments":
        """``source [M, K]``: the flat ``t * B + b`` index of each padded slot (padding repeats a
        valid one and is masked by ``valid [M, K]``); ``column [K]``: each segment's sequence;
        ``carries [K]``: whether it continues the sequence's given state (its first step is no
        episode start); ``order [L * B]``: where each ``(t, b)`` output sits in the padded ``[M * K]``."""
        s = starts.detach().cpu().numpy().astype(bool)
        length, width = s.shape
        begin = s.copy()
        begin[0] = True
        t_idx, b_idx = np.nonzero(begin.T)[1], np.nonzero(begin.T)[0]  # column-major segment starts
        ends = np.empty_like(t_idx)
        same_column = np.r_[b_idx[1:] == b_idx[:-1], False]
        ends[same_column] = t_idx[1:][same_column[:-1]]
        ends[~same_column] = length
        lengths = ends - t_idx
        m, k = int(lengths.max()), len(t_idx)
        steps = np.arange(m)[:, None]
        valid = steps < lengths[None, :]
        time = np.minimum(t_idx[None, :] + steps, ends[None, :] - 1)
        source = time * width + b_idx[None, :]
        order = np.empty(length * width, dtype=np.int64)
        order[source[valid]] = (steps * k + np.arange(k)[None, :])[valid]
        dev = starts.device
        return cls(*(torch.as_tensor(a, device=dev) for a in (source.astype(np.int64), valid, b_idx.astype(np.int64),
                                                               ~s[t_idx, b_idx], order)))


class NumpyMemory:
    """A frozen float32 numpy copy of a :class:`MemoryTorso` that steps ``N`` envs at once."""

    def __init__(self, torso: MemoryTorso) -> None:
        w_ih, w_hh, b_ih, b_hh = (p.detach().cpu().numpy().astype(np.float32) for p in torso._weights())
        self.kind, self.size = torso.kind, torso.out_dim
        self.w_ih, self.w_hh, self.b_ih, self.b_hh = w_ih.T.copy(), w_hh.T.copy(), b_ih, b_hh
        self.state_size = torso.state_size

    def initial_state(self, n: int) -> np.ndarray:
        return np.zeros((n, self.state_size), np.float32)

    def step(self, x: np.ndarray, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``x [N, in_dim]``, ``state [N, S]`` -> (output ``[N, H]``, next state ``[N, S]``)."""
        H = self.size
        if self.kind == "lstm":
            h, c = state[:, :H], state[:, H:]
            gates = x @ self.w_ih + self.b_ih + h @ self.w_hh + self.b_hh
            i, f, g, o = (gates[:, k * H:(k + 1) * H] for k in range(4))
            c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
            h = _sigmoid(o) * np.tanh(c)
            return h, np.concatenate([h, c], axis=1)
        gi, gh = x @ self.w_ih + self.b_ih, state @ self.w_hh + self.b_hh
        r = _sigmoid(gi[:, :H] + gh[:, :H])
        z = _sigmoid(gi[:, H:2 * H] + gh[:, H:2 * H])
        n = np.tanh(gi[:, 2 * H:] + r * gh[:, 2 * H:])
        h = (1 - z) * n + z * state
        return h, h


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (np.tanh(0.5 * x) + 1)  # overflow-free in float32


MEMORIES: dict[str, Callable[[int, int], MemoryTorso]] = {}
"""Registered torsos: name -> ``factory(in_dim, size)``."""


def register_memory(name: str, factory: Callable[[int, int], MemoryTorso]) -> None:
    """Make ``factory`` available as ``--memory name``."""
    MEMORIES[name] = factory


def make_memory(name: str, in_dim: int, size: int) -> MemoryTorso:
    """The torso ``name`` over ``in_dim`` inputs, or a one-line :class:`ConfigError`."""
    if name not in MEMORIES:
        raise ConfigError(f"unknown memory {name!r}; choose from {', '.join(MEMORIES)} (a torso of your own "
                          "registers when its module is in RLKIT_VARIANTS)")
    return MEMORIES[name](in_dim, size)


register_memory("lstm", lambda in_dim, size: MemoryTorso("lstm", in_dim, size))
register_memory("gru", lambda in_dim, size: MemoryTorso("gru", in_dim, size))
