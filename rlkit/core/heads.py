"""Policy heads: the only way PPO touches an action distribution.

A head turns the actor's output (``params``: logits or means, ``[B, out_dim]``) into
``sample``, ``log_prob``, ``entropy`` and ``mode``, says how its actions are stored
(``action_shape``, ``action_dtype``) and gives a numpy sampler for acting. Log-probabilities
and entropies are summed over action dimensions. The math is written out (no
``torch.distributions`` objects on the hot path) and tested against ``torch.distributions``.

A new head is a class with the :class:`PolicyHead` members plus one :func:`register_head`
call; nothing else in rlkit branches on the kind of head. What a fused kernel may do with a head
is the head's own declaration (:attr:`PolicyHead.fused_kind`), never a type check.
"""

from __future__ import annotations

import importlib
import math
from typing import Callable, ClassVar, Literal, NamedTuple, Protocol

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from rlkit.errors import UnsupportedSpaceError

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)

FusedKind = Literal["categorical", "autograd"]
"""The fused-kernel families a head can declare (see :attr:`PolicyHead.fused_kind`)."""


class NumpySample(NamedTuple):
    actions: np.ndarray
    """``[N]`` int64 or ``[N, A]`` float32, as sampled (unclipped)."""
    log_probs: np.ndarray
    """``[N]`` log pi(a|s)."""


class NumpySampler(Protocol):
    """Acting in numpy on a frozen copy of the head (see :class:`rlkit.gym.policies.NumpyActor`)."""

    def sample(self, out: np.ndarray, rng: np.random.Generator) -> NumpySample: ...

    def mode(self, out: np.ndarray) -> np.ndarray: ...


class PolicyHead(Protocol):
    """What the buffer, the loss and the actors need from an action distribution.

    A head may subclass this protocol (it then inherits the defaults below) or only match it."""

    fused_kind: ClassVar[FusedKind | None] = None
    """What the fused PPO loss (:mod:`rlkit.fast.loss`) may do with this head: ``"categorical"``
    (params are softmax logits; one fused node computes log-prob and entropy), ``"autograd"`` (the
    head's own ``log_prob_entropy`` feeds the fused objective through autograd) or None (the plain
    loss of :mod:`rlkit.core.loss` runs, whatever ``kernels`` says). None is the default: a head
    that declares nothing gets the formula (:func:`make_head` sets the default on a head that
    matches the protocol without subclassing it or declaring this)."""
    out_dim: int
    """Width of the actor's output the head reads."""
    action_shape: tuple[int, ...]
    """Shape of one stored action (``()`` for a discrete action)."""
    action_dtype: torch.dtype

    def sample(self, params: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor: ...

    def log_prob(self, params: torch.Tensor, actions: torch.Tensor) -> torch.Tensor: ...

    def entropy(self, params: torch.Tensor) -> torch.Tensor: ...

    def log_prob_entropy(self, params: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]: ...

    def mode(self, params: torch.Tensor) -> torch.Tensor: ...

    def to_env(self, actions: np.ndarray) -> np.ndarray: ...

    def numpy_sampler(self) -> NumpySampler: ...

    def parameters(self): ...

    # A head may also offer the analytic KL divergence (what KL-penalty objectives need; see
    # :func:`offers_kl`): ``full_params(params) -> [..., P]``, every number the distribution depends
    # on (logits; a Gaussian's means and log-stds), and ``kl(old, new) -> [...]``, KL(old || new)
    # between two of those, summed over action dimensions, for any leading axes.


class CategoricalHead(nn.Module):
    """Categorical over ``n`` actions (``Discrete``); params are logits ``[B, n]``."""

    fused_kind: ClassVar[FusedKind | None] = "categorical"
    action_shape: tuple[int, ...] = ()
    action_dtype = torch.int64

    def __init__(self, n: int, start: int = 0) -> None:
        super().__init__()
        self.n, self.start = n, start

    @property
    def out_dim(self) -> int:
        return self.n

    def sample(self, logits: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        """``[B]`` int64 actions."""
        probs = torch.softmax(logits, dim=-1)
        return torch.multinomial(probs, 1, generator=generator).squeeze(-1)

    def log_prob(self, logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """``[B]`` log pi(a|s) for int actions ``[B]``."""
        logp = torch.log_softmax(logits, dim=-1)
        return logp.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)

    def entropy(self, logits: torch.Tensor) -> torch.Tensor:
        """``[B]`` entropy ``-sum(p log p)``."""
        logp = torch.log_softmax(logits, dim=-1)
        return -(logp.exp() * logp).sum(-1)

    def log_prob_entropy(self, logits: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``log_prob`` and ``entropy`` from one log-softmax (the PPO loss needs both)."""
        logp = torch.log_softmax(logits, dim=-1)
        return logp.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1), -(logp.exp() * logp).sum(-1)

    def mode(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.argmax(-1)

    def full_params(self, logits: torch.Tensor) -> torch.Tensor:
        """The logits themselves: they are the whole distribution."""
        return logits

    def kl(self, old: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        return categorical_kl(old, new)

    def to_env(self, actions: np.ndarray) -> np.ndarray:
        return actions + self.start if self.start else actions

    def numpy_sampler(self) -> NumpySampler:
        return NumpyCategorical()


class NumpyCategorical:
    """Inverse-CDF sampling of one categorical per row of logits ``[N, k]``."""

    def __init__(self) -> None:
        self._rows = np.arange(0)

    def sample(self, out: np.ndarray, rng: np.random.Generator) -> NumpySample:
        return self.sample_from_uniforms(out, rng.random(out.shape[:-1], dtype=np.float32))

    def sample_from_uniforms(self, out: np.ndarray, u: np.ndarray) -> NumpySample:
        """Rows of logits ``[..., N, k]`` with one uniform each ``[..., N]`` in ``[0, 1)`` (modified
        in place): the samples ``sample`` draws from those uniforms, for any leading axes (e.g. ``K``
        stacked models; each row's numbers are those it gets alone, tested)."""
        z = out - out.max(-1, keepdims=True)
        cdf = np.exp(z).cumsum(-1)  # unnormalized; its last column is the partition sum
        total = cdf[..., -1]
        u *= total  # inverse-CDF sampling (clamped against float rounding at the top)
        actions = (u[..., None] >= cdf).sum(-1)
        np.minimum(actions, out.shape[-1] - 1, out=actions)
        rows = z.reshape(-1, z.shape[-1])
        if len(self._rows) != len(rows):
            self._rows = np.arange(len(rows))
        picked = rows[self._rows, actions.reshape(-1)].reshape(actions.shape)
        return NumpySample(actions, picked - np.log(total))

    def mode(self, out: np.ndarray) -> np.ndarray:
        return out.argmax(-1)


def gaussian_log_prob(mean: torch.Tensor, log_std: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """``log N(actions; mean, exp(log_std)^2)`` summed over the last axis: ``mean``, ``actions``
    ``[..., B, A]``, ``log_std`` broadcasting to them (``[A]``, or ``[K, 1, A]`` for ``K`` stacked heads)."""
    z = (actions - mean) * torch.exp(-log_std)
    return (-0.5 * z.square() - log_std).sum(-1) - mean.shape[-1] * _LOG_SQRT_2PI


def gaussian_entropy(mean: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """The entropy ``[..., B]`` of :func:`gaussian_log_prob`'s Gaussian (the same for every row)."""
    per_dim = log_std.sum(-1) + mean.shape[-1] * (0.5 + _LOG_SQRT_2PI)
    return per_dim.expand(mean.shape[:-1])


def categorical_kl(old: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
    """``KL(old || new) = sum p_old (log p_old - log p_new)`` of softmax logits ``[..., A]`` -> ``[...]``
    (an action of probability 0 under ``old`` adds 0, e.g. a masked one)."""
    log_old, log_new = torch.log_softmax(old, -1), torch.log_softmax(new, -1)
    return (log_old.exp() * (log_old - log_new)).sum(-1)


def gaussian_full_params(mean: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """``[..., B, 2A]``: ``mean [..., B, A]`` and ``log_std`` broadcast to it (``[A]``, or ``[K, 1, A]``
    for ``K`` stacked heads) side by side."""
    return torch.cat([mean, log_std.expand(mean.shape)], -1)


def gaussian_kl(old: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
    """``KL(old || new)`` of diagonal Gaussians given as :func:`gaussian_full_params` ``[..., 2A]`` ->
    ``[...]``: per dimension ``log(s1 / s0) + (s0^2 + (m0 - m1)^2) / (2 s1^2) - 1/2``, summed."""
    a = old.shape[-1] // 2
    mean0, log_std0, mean1, log_std1 = old[..., :a], old[..., a:], new[..., :a], new[..., a:]
    var_ratio = torch.exp(2 * (log_std0 - log_std1))
    return (log_std1 - log_std0 + 0.5 * (var_ratio + (mean0 - mean1).square() * torch.exp(-2 * log_std1)) - 0.5).sum(-1)


def offers_kl(head: object) -> bool:
    """Whether ``head`` offers ``full_params`` and ``kl`` (the analytic KL; see :class:`PolicyHead`)."""
    return callable(getattr(head, "full_params", None)) and callable(getattr(head, "kl", None))


class DiagGaussianHead(nn.Module):
    """Diagonal Gaussian with a state-independent log-std (``Box``); params are means ``[B, A]``.

    Samples are stored unclipped; ``to_env`` clips them to the Box bounds (clipping before
    storing would bias the log-probabilities of actions at the bounds).
    """

    fused_kind: ClassVar[FusedKind | None] = "autograd"
    action_dtype = torch.float32

    def __init__(self, action_dim: int, low: np.ndarray, high: np.ndarray, init_log_std: float = 0.0) -> None:
        super().__init__()
        self.action_dim = action_dim
        self.action_shape = (action_dim,)
        self.log_std = nn.Parameter(torch.full((action_dim,), float(init_log_std)))
        self.low = np.asarray(low, dtype=np.float32).reshape(-1)
        self.high = np.asarray(high, dtype=np.float32).reshape(-1)

    @property
    def out_dim(self) -> int:
        return self.action_dim

    def sample(self, mean: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
        return mean + noise * self.log_std.exp()

    def log_prob(self, mean: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        return gaussian_log_prob(mean, self.log_std, actions)

    def entropy(self, mean: torch.Tensor) -> torch.Tensor:
        return gaussian_entropy(mean, self.log_std)

    def log_prob_entropy(self, mean: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``log_prob`` and ``entropy`` together (the PPO loss needs both)."""
        return self.log_prob(mean, actions), self.entropy(mean)

    def mode(self, mean: torch.Tensor) -> torch.Tensor:
        return mean

    def full_params(self, mean: torch.Tensor) -> torch.Tensor:
        """``[..., 2A]``: the means and the log-std broadcast to every row (:func:`gaussian_full_params`)."""
        return gaussian_full_params(mean, self.log_std)

    def kl(self, old: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        return gaussian_kl(old, new)

    def to_env(self, actions: np.ndarray) -> np.ndarray:
        """A clipped copy for the env (the stored sample stays unclipped)."""
        return np.minimum(np.maximum(actions, self.low), self.high)

    def numpy_sampler(self) -> NumpySampler:
        return _NumpyGaussian(self.log_std.detach().cpu().numpy().astype(np.float32))


class _NumpyGaussian:
    def __init__(self, log_std: np.ndarray) -> None:
        self.std = np.exp(log_std)
        self.log_norm = np.float32(log_std.sum() + 0.5 * len(log_std) * math.log(2 * math.pi))

    def sample(self, out: np.ndarray, rng: np.random.Generator) -> NumpySample:
        return gaussian_from_noise(out, rng.standard_normal(out.shape, dtype=np.float32), self.std, self.log_norm)

    def mode(self, out: np.ndarray) -> np.ndarray:
        return out


def gaussian_from_noise(out: np.ndarray, noise: np.ndarray, std: np.ndarray, log_norm: np.ndarray | np.float32
                        ) -> NumpySample:
    """Diagonal Gaussian samples of means ``out [..., N, A]`` from standard normal ``noise`` of that
    shape: ``std`` broadcasting to it (``[A]``, or ``[K, 1, A]`` for ``K`` stacked samplers) and
    ``log_norm`` to ``[..., N]`` (a scalar, or ``[K, 1]``); each row's numbers are its own."""
    actions = out + noise * std
    log_probs = (-0.5 * np.square(noise)).sum(-1) - log_norm
    return NumpySample(actions.astype(np.float32, copy=False), log_probs.astype(np.float32, copy=False))


class GaussianStack(NamedTuple):
    """``K`` diagonal Gaussian samplers stacked on a leading axis once, to sample all of them in
    one pass at every step (each from its own random stream)."""

    std: np.ndarray
    """``[K, 1, A]``."""
    log_norm: np.ndarray
    """``[K, 1]``."""

    def sample(self, out: np.ndarray, rngs: list[np.random.Generator]) -> NumpySample:
        """Sampler ``k``'s ``sample(out[k], rngs[k])`` for every ``k`` of ``out [K, N, A]`` (each
        row's noise drawn from its own stream)."""
        noise = np.empty(out.shape, np.float32)
        for k, rng in enumerate(rngs):
            rng.standard_normal(out.shape[1:], dtype=np.float32, out=noise[k])
        return gaussian_from_noise(out, noise, self.std, self.log_norm)


def stack_gaussians(samplers: list[NumpySampler]) -> GaussianStack | None:
    """The samplers stacked, or None where they are not all diagonal Gaussians."""
    if not all(type(s) is _NumpyGaussian for s in samplers):
        return None
    return GaussianStack(np.stack([s.std for s in samplers])[:, None],  # type: ignore[attr-defined]
                         np.array([s.log_norm for s in samplers], np.float32)[:, None])  # type: ignore[attr-defined]


def sample_stacked_gaussians(samplers: list[NumpySampler], out: np.ndarray, rngs: list[np.random.Generator]
                             ) -> NumpySample | None:
    """``samplers[k].sample(out[k], rngs[k])`` for every ``k`` of ``out [K, N, A]`` in one pass
    (each row's noise drawn from its own stream), or None, drawing nothing, where they are not all
    diagonal Gaussians."""
    stack = stack_gaussians(samplers)
    return None if stack is None else stack.sample(out, rngs)


HeadFactory = Callable[[gym.Space], PolicyHead]
_HEADS: list[tuple[type[gym.Space], HeadFactory]] = []


def register_head(space_type: type[gym.Space], factory: HeadFactory) -> None:
    """Make ``factory(space)`` the head for action spaces of ``space_type`` (later registrations win)."""
    _HEADS.insert(0, (space_type, factory))


def make_head(space: gym.Space) -> PolicyHead:
    """The head for an action space; any other space is a one-line error naming it."""
    for space_type, factory in _HEADS:
        if isinstance(space, space_type):
            return _declared(factory(space))
    names = ", ".join(sorted({t.__name__ for t, _ in _HEADS}))
    raise UnsupportedSpaceError(f"unsupported action space {space}: rlkit has heads for {names} actions")


def _declared(head: PolicyHead) -> PolicyHead:
    """``head`` with :attr:`PolicyHead.fused_kind` present: a head that matches the protocol
    structurally (without subclassing it) and declares nothing gets the protocol's default."""
    if not hasattr(head, "fused_kind"):
        setattr(head, "fused_kind", PolicyHead.fused_kind)  # on the instance: the user's class stays as written
    return head


def _box_head(space: gym.Space) -> PolicyHead:
    assert isinstance(space, gym.spaces.Box)
    if len(space.shape) != 1:
        raise UnsupportedSpaceError(f"unsupported action space {space}: Box actions must be 1-D")
    return DiagGaussianHead(space.shape[0], space.low, space.high)


register_head(gym.spaces.Discrete, lambda space: CategoricalHead(int(space.n), int(space.start)))
register_head(gym.spaces.Box, _box_head)

importlib.import_module("rlkit.core.multi_heads")  # registers the MultiDiscrete and MultiBinary heads
