"""HP3O on Gymnasium episodes (Liu et al. 2025, arXiv 2502.15968; the FIFO and the choice of
trajectories are :mod:`rlkit.variants.hp3o`'s).

Each sub-env's steps are stitched into trajectories across rollouts. The PPO ratio is
taken against each trajectory's stored behaviour log-probs, advantages come from
:func:`compute_gae` with the core's truncation rule. HP3O+ raises the baseline of states in
non-best trajectories to the best trajectory's value at the nearest state (within a threshold).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from typing import Any, Callable

import numpy as np
import torch

from rlkit.core.buffer import Batch, Rollout, RolloutBuffer
from rlkit.core.gae import compute_gae


@dataclass
class Trajectory:
    """One complete episode of one sub-env, as collected (``L`` steps)."""

    obs: torch.Tensor
    """``[L, obs_dim]`` normalized observations the policy acted on."""
    actions: torch.Tensor
    """``[L]`` or ``[L, A]`` unclipped actions."""
    log_probs: torch.Tensor
    """``[L]`` behaviour log-probs."""
    values: torch.Tensor
    """``[L]`` values at collection time."""
    rewards: torch.Tensor
    """``[L]`` rewards as trained on (scaled when reward normalization is on)."""
    final_obs: torch.Tensor
    """``[obs_dim]`` normalized final observation (used on truncation)."""
    final_value: float
    """V(final observation) at collection time (bootstrap on truncation)."""
    terminated: bool
    truncated: bool
    episode_return: float
    """Undiscounted return in raw rewards (what 'best' ranks by)."""
    finished_update: int
    advantages: torch.Tensor | None = None
    """``[L]`` advantages kept from the trajectory's first use (``--hp3o-advantages first-use``)."""
    returns: torch.Tensor | None = None
    """``[L]`` value targets kept with them."""

    def __len__(self) -> int:
        return self.obs.shape[0]


class TrajectoryAssembler:
    """Stitches each sub-env's steps into trajectories across rollouts and vector resets."""

    def __init__(self, num_envs: int) -> None:
        self.pending: list[list[dict[str, torch.Tensor]]] = [[] for _ in range(num_envs)]

    def add_rollout(self, buf: RolloutBuffer, update: int) -> list[Trajectory]:
        """Finished trajectories in this rollout (oldest first); unfinished tails are kept."""
        finished: list[tuple[int, Trajectory]] = []
        dones = buf.np["dones"]
        for n in range(buf.num_envs):
            start = 0
            for t in np.flatnonzero(dones[:, n]):
                chunks = self.pending[n] + [self._chunk(buf, n, start, t + 1)]
                self.pending[n] = []
                finished.append((int(t), self._close(chunks, buf, n, int(t), update)))
                start = t + 1
            if start < buf.num_steps:
                self.pending[n].append(self._chunk(buf, n, start, buf.num_steps))
        return [traj for _, traj in sorted(finished, key=lambda item: item[0])]

    def discard_pending(self) -> None:
        """Drop unfinished tails (the envs were reset, e.g. at a checkpoint)."""
        self.pending = [[] for _ in self.pending]

    @staticmethod
    def _chunk(buf: RolloutBuffer, n: int, start: int, stop: int) -> dict[str, torch.Tensor]:
        return {k: getattr(buf, k)[start:stop, n].clone()
                for k in ("obs", "actions", "log_probs", "values", "rewards", "raw_rewards")}

    @staticmethod
    def _close(chunks: list[dict[str, torch.Tensor]], buf: RolloutBuffer, n: int, t: int, update: int) -> Trajectory:
        cat = {k: torch.cat([c[k] for c in chunks]) for k in chunks[0]}
        terminated = bool(buf.terminated[t, n])
        return Trajectory(cat["obs"], cat["actions"], cat["log_probs"], cat["values"], cat["rewards"],
                          buf.final_obs[t, n].clone(), float(buf.final_values[t, n]), terminated,
                          not terminated, float(cat["raw_rewards"].double().sum()), update)


def hp3o_plus_baseline(obs: torch.Tensor, values: torch.Tensor, best_obs: torch.Tensor, best_values: torch.Tensor,
                       threshold: float) -> torch.Tensor:
    """``[L]`` baseline for states ``obs [L, d]`` of a non-best trajectory: the best trajectory's
    value at the nearest of its states ``best_obs [M, d]`` where that value is larger and the
    Euclidean distance is at most ``threshold``; the state's own value elsewhere. Image pixels
    (``uint8``) are compared as stored, in pixel units."""
    dist = torch.cdist(obs[None].float(), best_obs[None].float())[0]
    nearest = dist.argmin(dim=1)
    candidate = best_values[nearest]
    use = (dist.gather(1, nearest[:, None])[:, 0] <= threshold) & (candidate > values)
    return torch.where(use, candidate, values)


@dataclass
class HybridBatches:
    """The k chosen trajectories' transitions with advantages; ``epoch_batch`` draws a fresh
    sample for each epoch. ``paper`` sampling (the authors' code): ``min(samples // k, L)``
    transitions of each trajectory of length L, without replacement, so short trajectories give a
    smaller batch and no transition repeats within an epoch. ``topup``: exactly ``samples``
    transitions, split evenly, drawn with replacement from trajectories shorter than their share."""

    pooled: Batch
    segments: list[tuple[int, int]]
    samples: int
    rng: np.random.Generator
    sampling: str = "paper"
    shuffle: bool = True
    """Shuffled minibatches, or contiguous chunks (trajectory by trajectory, as the authors' code)."""
    redraw_k: int = 0
    """With k > 0: every epoch uses the best trajectory (the first segment) plus k - 1 others drawn
    uniformly without replacement from the rest (the authors' code); 0: every segment, every epoch."""

    def epoch_batch(self) -> Batch:
        segments = self.segments
        if self.redraw_k and len(segments) > self.redraw_k:
            others = self.rng.choice(len(segments) - 1, size=self.redraw_k - 1, replace=False)
            segments = [segments[0]] + [segments[1 + int(i)] for i in others]
        k = len(segments)
        if self.sampling == "paper":
            picks = [start + self.rng.choice(stop - start, size=min(self.samples // k, stop - start), replace=False)
                     for start, stop in segments]
        else:
            shares = [self.samples // k + (1 if i < self.samples % k else 0) for i in range(k)]
            picks = [start + self.rng.choice(stop - start, size=share, replace=stop - start < share)
                     for (start, stop), share in zip(segments, shares)]
        index = torch.from_numpy(np.concatenate(picks)).to(self.pooled.obs.device)
        return self.pooled.map(lambda x: x.index_select(0, index))


def trajectory_gae(trajs: list[Trajectory], values: list[torch.Tensor], final_values: list[float], gamma: float,
                   lam: float, current: list[torch.Tensor] | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(advantages ``[L_i]``, returns ``[L_i]``) per trajectory from one :func:`compute_gae` call on a
    ``[L_max, k]`` right-padded block: each column ends with done (and terminated unless the
    episode was truncated, which bootstraps from its final value); padding is terminated and done,
    so it contributes nothing. ``current`` (HP3O+'s TD form): the value of s_t in each TD error
    r_t + gamma V(s_t+1) - current(s_t), while V(s_t+1) and the returns A + V keep ``values``."""
    k, length = len(trajs), max(len(t) for t in trajs)
    device = trajs[0].obs.device
    rewards, vals, next_vals = (torch.zeros(length, k, device=device) for _ in range(3))
    term = torch.ones(length, k, dtype=torch.bool, device=device)
    done = torch.ones(length, k, dtype=torch.bool, device=device)
    for j, (traj, v, fv) in enumerate(zip(trajs, values, final_values)):
        n = len(traj)
        rewards[:n, j], vals[:n, j] = traj.rewards, (v if current is None else current[j])
        next_vals[:n - 1, j], next_vals[n - 1, j] = v[1:], (fv if traj.truncated else 0.0)
        term[:n - 1, j], term[n - 1, j] = False, traj.terminated
        done[:n - 1, j] = False
    gae = compute_gae(rewards, vals, next_vals, term, done, gamma, lam)
    if current is None:
        return [(gae.advantages[:len(t), j], gae.returns[:len(t), j]) for j, t in enumerate(trajs)]
    return [(gae.advantages[:len(t), j], gae.advantages[:len(t), j] + values[j]) for j, t in enumerate(trajs)]


def build_hybrid_batches(trajs: list[Trajectory], gamma: float, lam: float, samples: int, rng: np.random.Generator,
                         value_fn: Callable[[torch.Tensor], torch.Tensor] | None = None,
                         plus_threshold: float | None = None, sampling: str = "paper",
                         plus_form: str = "baseline") -> tuple[HybridBatches, float]:
    """Advantages for ``trajs`` (best first) and the per-epoch sampler. With ``value_fn`` the
    current critic recomputes values; with ``plus_threshold`` HP3O+ applies to non-best
    trajectories: ``plus_form="baseline"`` replaces the baseline at each step (``A = R - V'``,
    value targets unchanged); ``"td"`` (the authors' code) uses ``V'(s_t)`` for the current state in
    every TD error, ``r_t + gamma V(s_t+1) - V'(s_t)``, and ``A' + V`` as the value targets. Returns the sampler and the fraction
    of non-best states whose value HP3O+ replaced."""
    if value_fn is None:
        values = [t.values.float() for t in trajs]
        final_values = [t.final_value for t in trajs]
    else:
        recomputed = [value_fn(torch.cat([t.obs, t.final_obs[None]])).float() for t in trajs]
        values, final_values = [v[:-1] for v in recomputed], [float(v[-1]) for v in recomputed]
    parts, segments, offset, replaced, total = [], [], 0, 0, 0
    for j, (traj, (advantages, returns)) in enumerate(zip(trajs, trajectory_gae(trajs, values, final_values,
                                                                                 gamma, lam))):
        if traj.advantages is not None and traj.returns is not None:  # kept from its first use
            advantages, returns = traj.advantages, traj.returns
        elif j > 0 and plus_threshold is not None:
            baseline = hp3o_plus_baseline(traj.obs, values[j], trajs[0].obs, values[0], plus_threshold)
            changed = int((baseline != values[j]).sum())
            replaced, total = replaced + changed, total + len(traj)
            if plus_form == "baseline":
                advantages = returns - baseline
            elif changed:  # td; with nothing replaced HP3O's own estimate stands, bit for bit
                ((advantages, returns),) = trajectory_gae([traj], [values[j]], [final_values[j]], gamma, lam,
                                                          current=[baseline])
        parts.append(Batch(traj.obs, traj.actions, traj.log_probs, advantages, returns, values[j]))
        segments.append((offset, offset + len(traj)))
        offset += len(traj)
    pooled = Batch.concat(parts)
    return HybridBatches(pooled, segments, samples, rng, sampling), replaced / max(total, 1)


class EpisodeAdapter:
    """HP3O's adapter for Gymnasium episodes (:class:`rlkit.variants.hp3o.TrajectoryAdapter`):
    trajectories stitched from a :class:`RolloutBuffer`, hybrid batches with GAE per trajectory,
    HP3O+ baselines and replay diagnostics. ``options`` is :class:`rlkit.variants.hp3o_options.HP3OOptions`."""

    record_type = Trajectory

    def __init__(self, num_envs: int, options: Any, gamma: float, lam: float, clip_coef: float,
                 rng: np.random.Generator, model: torch.nn.Module, device: torch.device) -> None:
        self.assembler = TrajectoryAssembler(num_envs)
        self.options, self.gamma, self.lam, self.clip_coef = options, gamma, lam, clip_coef
        self.rng, self.model, self.device = rng, model, device

    def split(self, rollout: Rollout, update: int) -> list[Trajectory]:
        return self.assembler.add_rollout(rollout.buffer, update)

    def reset(self) -> None:
        self.assembler.discard_pending()

    def check(self, record: Trajectory) -> None:
        width = self.model.obs_dim  # type: ignore[union-attr]
        if record.obs.dim() != 2 or record.obs.shape[1] != width or record.final_obs.shape != (width,):
            raise ValueError(f"HP3O's stored observations are of shape {list(record.obs.shape)}; this run's "
                             f"have {width} values")

    @torch.no_grad()
    def batches(self, chosen: list[Trajectory], update: int) -> tuple[HybridBatches, dict[str, float]]:
        opt = self.options
        stored, chosen = chosen, [_to(t, self.device) for t in chosen]
        if opt.hp3o_timeouts_terminal:  # the authors' code ends every episode without a bootstrap
            chosen = [dataclasses.replace(t, terminated=True, truncated=False) for t in chosen]
        value_fn = self.model.value if opt.hp3o_recompute_values else None
        hybrid, replaced = build_hybrid_batches(chosen, self.gamma, self.lam, opt.hp3o_samples, self.rng, value_fn,
                                                opt.hp3o_threshold if opt.hp3o_plus else None, opt.hp3o_sampling,
                                                opt.hp3o_plus_form)
        if opt.hp3o_advantages == "first-use":  # the authors' code computes them once per trajectory
            for record, (start, stop) in zip(stored, hybrid.segments):
                if record.advantages is None:
                    record.advantages = hybrid.pooled.advantages[start:stop].to(record.obs.device).clone()
                    record.returns = hybrid.pooled.returns[start:stop].to(record.obs.device).clone()
        hybrid.shuffle = not opt.hp3o_contiguous_minibatches
        hybrid.redraw_k = opt.hp3o_trajectories if opt.hp3o_redraw_each_epoch else 0
        stats = self.replay_stats(hybrid.pooled, [update - t.finished_update for t in chosen],
                                  [len(t) for t in chosen], opt.hp3o_samples)
        if opt.hp3o_plus:
            stats["hp3o/baseline_replaced_frac"] = replaced
        return hybrid, stats

    def replay_stats(self, pooled: Batch, ages: list[int], lengths: list[int], samples: int) -> dict[str, float]:
        """How stale the chosen trajectories are for the current policy, before the update: the
        share of the epoch's samples from this update's rollout (age 0), and the ratio
        pi_now / pi_behaviour over every chosen transition, its clip fraction split by age."""
        share = [min(samples // len(ages), n) for n in lengths]
        age = torch.cat([torch.full((n,), a, device=pooled.obs.device) for a, n in zip(ages, lengths)])
        log_ratio = self.model.head.log_prob(self.model(pooled.obs)[0], pooled.actions) - pooled.log_probs
        clipped = ((log_ratio.exp() - 1).abs() > self.clip_coef).float()
        stats = {"hp3o/replay_ratio_mean": float(log_ratio.exp().mean()),
                 "hp3o/replay_log_ratio_std": float(log_ratio.std()) if len(log_ratio) > 1 else 0.0,
                 "hp3o/replay_clipfrac": float(clipped.mean()),
                 "hp3o/newest_sample_frac": sum(s for s, a in zip(share, ages) if a == 0) / max(sum(share), 1)}
        for name, mask in (("newest", age == 0), ("older", age > 0)):
            if mask.any():  # logged only when the update has such samples
                stats[f"hp3o/replay_clipfrac_{name}"] = float(clipped[mask].mean())
        return stats


def _to(traj: Trajectory, device: torch.device) -> Trajectory:
    if traj.obs.device == device:
        return traj
    values = {f.name: getattr(traj, f.name) for f in fields(Trajectory)}
    return Trajectory(**{k: (v.to(device) if torch.is_tensor(v) else v) for k, v in values.items()})
