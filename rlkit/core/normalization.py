"""Running observation normalization and reward scaling (numpy, float64 statistics).

Both are part of the agent: their statistics are saved in checkpoints (JSON) and frozen
at evaluation (``update=False``).
"""

from __future__ import annotations

import math

import numpy as np


class RunningMeanStd:
    """Parallel-algorithm running mean/variance (Chan et al.) over the leading axis."""

    def __init__(self, shape: tuple[int, ...] = (), epsilon: float = 1e-4) -> None:
        self.mean = np.zeros(shape, np.float64)
        self.var = np.ones(shape, np.float64)
        self.count = self.epsilon = epsilon

    def update(self, x: np.ndarray) -> None:
        """Fold in a batch ``x [n, *shape]`` (called every env step: kept to a few numpy calls)."""
        n = x.shape[0]
        batch_mean, batch_var = (x[0], 0.0) if n == 1 else (x.mean(0), x.var(0))
        delta = batch_mean - self.mean
        total = self.count + n
        self.mean = self.mean + delta * (n / total)
        m2 = self.var * self.count + batch_var * n + np.square(delta) * (self.count * n / total)
        self.var = m2 / total
        self.count = total

    def state_dict(self) -> dict[str, object]:
        return {"mean": self.mean.tolist(), "var": self.var.tolist(), "count": self.count}

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Statistics of the same shape (anything else is a ``ValueError`` naming it)."""
        mean, var = _numbers(state["mean"], "mean"), _numbers(state["var"], "var")
        if type(state["count"]) not in (int, float):
            raise ValueError(f"running count {state['count']!r} is not a number")
        count = float(state["count"])  # type: ignore[arg-type]
        if mean.shape != self.mean.shape or var.shape != self.mean.shape:
            raise ValueError(f"running statistics of shape {list(mean.shape)}/{list(var.shape)}; expected "
                             f"{list(self.mean.shape)}")
        if not (np.isfinite(mean).all() and np.isfinite(var).all() and (var >= 0).all()
                and self.epsilon <= count < math.inf):
            raise ValueError(f"running statistics that are not finite, a negative variance or a count below "
                             f"its start ({self.epsilon}) or infinite")
        with np.errstate(over="ignore"):  # the next update forms (mean - batch mean)**2 * count and var * count
            if not (np.isfinite(np.square(2 * mean) * count).all() and np.isfinite(var * count).all()):
                raise ValueError("running statistics too large to update in float64")
        self.mean, self.var, self.count = mean, var, count


class ObsNormalizer:
    """``(obs - mean) / sqrt(var + eps)`` clipped to ``[-clip, clip]``; identity when disabled."""

    def __init__(self, shape: tuple[int, ...], enabled: bool, clip: float = 10.0, eps: float = 1e-8,
                 scaled: np.ndarray | None = None, dtype: type = np.float32) -> None:
        """``dtype``: of the observations returned when disabled (``uint8`` keeps image pixels as bytes)."""
        self.enabled, self.clip, self.eps, self.dtype = enabled, clip, eps, dtype
        self.rms = RunningMeanStd(shape)
        self.fixed = None if scaled is None or np.all(scaled) else ~np.asarray(scaled, bool)
        """Columns passed through unchanged (one-hot and binary parts of an encoded observation)."""
        self._refresh()

    def _refresh(self) -> None:
        self._mean = self.rms.mean.astype(np.float32)
        self._inv_std = (1.0 / np.sqrt(self.rms.var + self.eps)).astype(np.float32)
        if self.fixed is not None:
            self._mean[self.fixed], self._inv_std[self.fixed] = 0.0, 1.0

    def __call__(self, obs: np.ndarray, update: bool) -> np.ndarray:
        """``[N, *obs_shape]`` -> float32 normalized observations."""
        if not self.enabled:
            return np.asarray(obs, dtype=self.dtype)
        obs = np.asarray(obs, dtype=np.float32)
        if update:
            self.rms.update(obs)
            self._refresh()
        out = (obs - self._mean) * self._inv_std
        return np.minimum(np.maximum(out, -self.clip, out=out), self.clip, out=out)

    def state_dict(self) -> dict[str, object]:
        return {"enabled": self.enabled, "clip": self.clip, "rms": self.rms.state_dict()}

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Statistics for this normalizer: its ``enabled`` and ``clip`` are the run's own, so a
        state that says otherwise is a ``ValueError``."""
        _same_settings("observation normalization", state, self.enabled, self.clip)
        self.rms.load_state_dict(state["rms"])  # type: ignore[arg-type]
        self._refresh()


class RewardScaler:
    """Divide rewards by the running std of the discounted return (as SB3's VecNormalize).

    The per-env discounted return restarts on every episode end (terminated or truncated).
    """

    def __init__(self, num_envs: int, gamma: float, enabled: bool, clip: float = 10.0, eps: float = 1e-8) -> None:
        self.enabled, self.gamma, self.clip, self.eps = enabled, gamma, clip, eps
        self.rms = RunningMeanStd(())
        self.returns = np.zeros(num_envs, np.float64)

    def __call__(self, rewards: np.ndarray, dones: np.ndarray, update: bool) -> np.ndarray:
        rewards = np.asarray(rewards, dtype=np.float32)
        if not self.enabled:
            return rewards
        if update:
            self.returns = self.returns * self.gamma + rewards
            self.rms.update(self.returns)
            if dones.any():
                self.returns[dones] = 0.0
        out = rewards * np.float32(1.0 / math.sqrt(float(self.rms.var) + self.eps))
        return np.minimum(np.maximum(out, -self.clip, out=out), self.clip, out=out)

    def reset(self) -> None:
        self.returns[:] = 0.0

    def state_dict(self) -> dict[str, object]:
        return {"enabled": self.enabled, "clip": self.clip, "rms": self.rms.state_dict(),
                "returns": self.returns.tolist()}

    def load_state_dict(self, state: dict[str, object]) -> None:
        """As :meth:`ObsNormalizer.load_state_dict`, with the per-env discounted returns."""
        _same_settings("reward scaling", state, self.enabled, self.clip)
        self.rms.load_state_dict(state["rms"])  # type: ignore[arg-type]
        returns = _numbers(state["returns"], "returns")
        if returns.shape != self.returns.shape or not np.isfinite(returns).all():
            raise ValueError(f"discounted returns of shape {list(returns.shape)} (expected "
                             f"{list(self.returns.shape)}), or not finite")
        self.returns = returns


class StackedStats:
    """``K`` running statistics (and reward scalers' discounted returns) kept stacked as rows of
    ``[K, ...]`` arrays from one update to the next: each one's ``mean``, ``var`` (and ``returns``)
    are views of its row, updated in place, so an update stacks nothing. Statistics replaced since
    the last update (loaded, or updated alone) are stacked again first. In place or not, each row's
    numbers are those of :meth:`RunningMeanStd.update` (the same operations in the same order)."""

    def __init__(self) -> None:
        self.stats: list[RunningMeanStd] = []
        self.scalers: list[RewardScaler] = []
        self.mean = self.var = self.count = self.returns = np.zeros(0)

    def fold(self, stats: list[RunningMeanStd], x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each ``stats[k].update(x[k])`` for ``x [K, n, *shape]``; returns the means and variances
        ``[K, *shape]`` (the rows themselves: read them before the next update)."""
        if len(stats) != len(self.stats) or not all(
                a is b and a.mean.base is self.mean and a.var.base is self.var for a, b in zip(stats, self.stats)):
            self._stack(stats)
        n, mean, var, count = x.shape[1], self.mean, self.var, self.count
        batch_mean, batch_var = (x[:, 0], 0.0) if n == 1 else (x.mean(1), x.var(1))
        delta = batch_mean - mean
        total = count + n
        mean += delta * (n / total)
        np.divide(var * count + batch_var * n + np.square(delta) * (count * n / total), total, out=var)
        count[...] = total
        for st, c in zip(stats, total.reshape(-1).tolist()):
            st.count = c
        return mean, var

    def _stack(self, stats: list[RunningMeanStd]) -> None:
        self.stats = list(stats)
        self.mean, self.var = np.stack([st.mean for st in stats]), np.stack([st.var for st in stats])
        self.count = np.array([st.count for st in stats], np.float64).reshape(-1, *([1] * (self.mean.ndim - 1)))
        for k, st in enumerate(stats):
            st.mean, st.var = self.mean[k, ...], self.var[k, ...]  # views, 0-d ones too

    def discounted(self, scalers: list[RewardScaler], rewards: np.ndarray) -> np.ndarray:
        """Each scaler's ``returns * gamma + rewards`` (``[K, N]``), as its rows."""
        if len(scalers) != len(self.scalers) or not all(
                a is b and a.returns.base is self.returns for a, b in zip(scalers, self.scalers)):
            self.scalers = list(scalers)
            self.returns = np.stack([sc.returns for sc in scalers])
            for k, sc in enumerate(scalers):
                sc.returns = self.returns[k, ...]
        self.returns *= scalers[0].gamma
        self.returns += rewards
        return self.returns


def normalize_stacked(norms: list[ObsNormalizer], obs: np.ndarray, rows: StackedStats | None = None) -> np.ndarray:
    """``norms[k](obs[k], update=True)`` for every ``k`` of ``obs [K, N, *shape]``, in a few numpy
    calls for all (normalizers of one config: the first one's settings); ``rows`` keeps their
    statistics stacked from one call to the next."""
    first = norms[0]
    if not first.enabled:
        return np.asarray(obs, dtype=first.dtype)
    x = np.asarray(obs, dtype=np.float32)
    mean, var = (rows or StackedStats()).fold([m.rms for m in norms], x)
    means, inv_stds = mean.astype(np.float32), (1.0 / np.sqrt(var + first.eps)).astype(np.float32)
    if first.fixed is not None:
        means[:, first.fixed], inv_stds[:, first.fixed] = 0.0, 1.0
    for k, m in enumerate(norms):
        m._mean, m._inv_std = means[k], inv_stds[k]
    out = (x - means[:, None]) * inv_stds[:, None]
    return np.minimum(np.maximum(out, -first.clip, out=out), first.clip, out=out)


def scale_stacked(scalers: list[RewardScaler], rewards: np.ndarray, dones: np.ndarray,
                  rows: StackedStats | None = None) -> np.ndarray:
    """``scalers[k](rewards[k], dones[k], update=True)`` for every ``k`` of ``rewards [K, N]``;
    ``rows`` keeps their statistics and returns stacked from one call to the next."""
    first = scalers[0]
    rewards = np.asarray(rewards, dtype=np.float32)
    if not first.enabled:
        return rewards
    rows = rows or StackedStats()
    returns = rows.discounted(scalers, rewards)
    _, var = rows.fold([sc.rms for sc in scalers], returns)
    if dones.any():
        returns[dones] = 0.0
    out = rewards * (1.0 / np.sqrt(var + first.eps)).astype(np.float32)[:, None]
    return np.minimum(np.maximum(out, -first.clip, out=out), first.clip, out=out)


def _same_settings(what: str, state: dict[str, object], enabled: bool, clip: float) -> None:
    """A stored normalizer's ``enabled`` and ``clip`` equal the ones the run builds from its config."""
    stored = (state["enabled"], state["clip"])
    if type(stored[0]) is not bool or type(stored[1]) not in (int, float) or stored != (enabled, clip):
        raise ValueError(f"{what} stored as enabled={stored[0]!r}, clip={stored[1]!r}; the run's config gives "
                         f"enabled={enabled}, clip={clip}")


def _numbers(values: object, what: str) -> np.ndarray:
    """Stored statistics as float64: JSON numbers only (strings or booleans are a ``ValueError``)."""
    array = np.asarray(values)
    if array.dtype.kind not in "if":
        raise ValueError(f"running {what} holds values that are not numbers")
    return array.astype(np.float64)
