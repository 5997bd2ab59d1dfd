"""HP3O (Liu et al. 2025, "Enhancing PPO with Trajectory-Aware Hybrid Policies", arXiv 2502.15968),
once for every kind of trajectory.

Finished trajectories go into a FIFO buffer; each update trains on a hybrid batch made of the
best-return trajectory plus k-1 others drawn uniformly without replacement. What a trajectory
is and how chosen trajectories become a batch is an adapter's: a Gymnasium episode
(:mod:`rlkit.variants.hp3o_episodes`) or an LLM response (:mod:`rlkit.rlhf.token_grid`).
A trajectory record is a dataclass with ``episode_return`` and ``finished_update`` fields;
its tensor fields go to the checkpoint's safetensors, the rest to its JSON.
"""

from __future__ import annotations

import dataclasses
import sys
from collections import deque
from typing import Any, Generic, Protocol, TypeVar

import numpy as np
import torch

from rlkit.variants.base import Passes, VariantState
from rlkit.variants.hp3o_episodes import EpisodeAdapter
from rlkit.variants.hp3o_responses import ResponseAdapter
from rlkit.variants.hp3o_options import HP3OOptions
from rlkit.variants.registry import Plug, PlugContext

T = TypeVar("T")
R = TypeVar("R", contravariant=True)
S = TypeVar("S")


class TrajectoryBuffer(Generic[T]):
    """FIFO of at most ``capacity`` complete trajectories (oldest evicted first)."""

    def __init__(self, capacity: int) -> None:
        self.items: deque[T] = deque(maxlen=capacity)

    def add(self, trajectories: list[T]) -> None:
        self.items.extend(trajectories)

    def __len__(self) -> int:
        return len(self.items)

    def best_index(self) -> int:
        """Index of the highest-return trajectory (ties: the most recent)."""
        returns = np.array([t.episode_return for t in self.items])  # type: ignore[attr-defined]
        return int(len(returns) - 1 - np.argmax(returns[::-1]))

    def sample(self, k: int, rng: np.random.Generator) -> list[int]:
        """The best trajectory first, then ``min(k, len) - 1`` others uniformly without replacement."""
        best = self.best_index()
        others = [i for i in range(len(self.items)) if i != best]
        k = min(k, len(self.items))
        picked = rng.choice(len(others), size=k - 1, replace=False) if k > 1 else []
        return [best] + [others[int(i)] for i in picked]

    def state(self) -> VariantState:
        """Tensor fields as ``<i>.<field>``, every other field in a JSON list."""
        tensors: dict[str, torch.Tensor] = {}
        meta: list[dict[str, Any]] = []
        for i, item in enumerate(self.items):
            fields = {f.name: getattr(item, f.name) for f in dataclasses.fields(item)}  # type: ignore[arg-type]
            tensors.update({f"{i}.{k}": v for k, v in fields.items() if torch.is_tensor(v)})
            meta.append({k: v for k, v in fields.items() if not torch.is_tensor(v)})
        return VariantState(tensors, meta)

    def load_state(self, state: VariantState, record_type: type[T]) -> None:
        """Inverse of :meth:`state`; a stored trajectory that could not have been collected (a
        non-finite or out-of-range number, per-step fields of different lengths) is a ``ValueError``."""
        self.items.clear()
        for i, meta in enumerate(state.json or []):
            prefix = f"{i}."
            own = {k[len(prefix):]: v for k, v in state.tensors.items() if k.startswith(prefix)}
            self.items.append(_checked(record_type(**own, **meta), i))


PER_STEP = ("obs", "log_probs", "values", "rewards", "advantages", "returns")
"""Stored trajectory fields with one entry per action."""


def _checked(record: T, index: int) -> T:
    fields = {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}  # type: ignore[arg-type]
    steps = len(fields["actions"])
    for name, value in fields.items():
        if torch.is_tensor(value):
            bad = (value.is_floating_point() and not bool(torch.isfinite(value).all())) or (
                name in PER_STEP and (value.dim() == 0 or len(value) != steps))
        else:
            bad = type(value) in (int, float) and not abs(value) <= sys.float_info.max
        if bad:
            raise ValueError(f"HP3O's stored trajectory {index} holds a damaged {name}")
    return record


class TrajectoryAdapter(Protocol[R, T, S]):
    """The domain side of HP3O: trajectories out of a rollout, a batch source out of trajectories."""

    record_type: type[T]

    def split(self, rollout: R, update: int) -> list[T]:
        """The trajectories that finished in this rollout (oldest first)."""

    def batches(self, chosen: list[T], update: int) -> tuple[S, dict[str, float]]:
        """The epochs' batch source for the chosen trajectories (best first) and diagnostics."""

    def reset(self) -> None:
        """The environments were reset: drop unfinished trajectories."""

    def check(self, record: T) -> None:
        """A ``ValueError`` unless a restored trajectory fits this run (e.g. its observation width)."""


class HP3O(Generic[R, T, S]):
    """The HP3O batch source (:class:`rlkit.variants.base.BatchSource`)."""

    name = "hp3o"

    def __init__(self, adapter: TrajectoryAdapter[R, T, S], capacity: int, k: int, rng: np.random.Generator,
                 redraw_each_epoch: bool = False, schedule: str = "rollout") -> None:
        """``redraw_each_epoch``: hand the adapter every stored trajectory (best first) so it can
        draw the k for each epoch, as the authors' code does; otherwise k are drawn per update.
        ``schedule="episode"``: one update per finished episode once k trajectories are stored
        (the authors' code), returned as :class:`Passes`; ``"rollout"``: one per rollout."""
        self.adapter, self.k, self.rng, self.redraw, self.schedule = adapter, k, rng, redraw_each_epoch, schedule
        self.buffer: TrajectoryBuffer[T] = TrajectoryBuffer(capacity)

    def batches(self, rollout: R, update: int) -> tuple[S | Passes | None, dict[str, float]]:
        """Store the rollout's finished trajectories; the hybrid batch of the best one plus k - 1
        random others (None while there is nothing to learn from) and ``hp3o/`` diagnostics."""
        before = len(self.buffer)
        finished = self.adapter.split(rollout, update)
        self.buffer.add(finished)
        stats = {"hp3o/buffer_fill": float(len(self.buffer))}
        if self.schedule == "episode":  # the authors' learn() after each episode once >= k are stored
            capacity = self.buffer.items.maxlen or len(self.buffer)
            passes = sum(min(before + i, capacity) >= self.k for i in range(1, len(finished) + 1))
        else:
            passes = 1 if len(self.buffer) else 0
        stats["hp3o/updates"] = float(passes)
        if not passes:
            return None, stats
        k = len(self.buffer) if self.redraw else self.k
        sources, extras = [], []
        for _ in range(1 if self.redraw else passes):  # redrawn per epoch anyway: one source serves all
            chosen = [self.buffer.items[i] for i in self.buffer.sample(k, self.rng)]
            source, extra = self.adapter.batches(chosen, update)
            sources.append(source)
            extras.append(extra)
        stats.update({
            "hp3o/best_return": float(chosen[0].episode_return),  # type: ignore[attr-defined]
            "hp3o/best_age": float(update - chosen[0].finished_update),  # type: ignore[attr-defined]
            "hp3o/sampled_age": float(np.mean([update - t.finished_update for t in chosen])),  # type: ignore[attr-defined]
            "hp3o/sampled_trajectories": float(len(chosen)),
            **_mean_stats(extras),
        })
        if self.schedule == "rollout":
            return sources[0], stats
        return Passes(sources * passes if self.redraw else sources), stats

    def reset(self) -> None:
        self.adapter.reset()

    def state(self) -> VariantState:
        return self.buffer.state()

    def load_state(self, state: VariantState) -> None:
        self.buffer.load_state(state, self.adapter.record_type)
        for record in self.buffer.items:
            self.adapter.check(record)


def _mean_stats(extras: list[dict[str, float]]) -> dict[str, float]:
    """Each statistic's mean over the passes that report it."""
    keys = dict.fromkeys(k for e in extras for k in e)
    return {key: float(np.mean([e[key] for e in extras if key in e])) for key in keys}


def build_gym(options: HP3OOptions, ctx: PlugContext) -> Plug:
    """Hybrid batches of Gymnasium episodes (HP3O+ and every fidelity switch)."""
    adapter = EpisodeAdapter(ctx.num_envs, options, ctx.ppo.gamma, ctx.ppo.gae_lambda, ctx.ppo.clip_coef, ctx.rng,
                             ctx.model, ctx.device)
    return Plug(source=HP3O(adapter, options.hp3o_buffer_size, options.hp3o_trajectories, ctx.rng,
                            options.hp3o_redraw_each_epoch, options.hp3o_schedule))


def build_rlhf(options: HP3OOptions, ctx: PlugContext) -> Plug:
    """Hybrid grids of whole LLM responses (the FIFO holds responses; minibatches stay whole sequences)."""
    return Plug(source=HP3O(ResponseAdapter(ctx.device), options.hp3o_buffer_size, options.hp3o_trajectories,
                            ctx.rng))


__all__ = ["HP3O", "HP3OOptions", "TrajectoryBuffer", "build_gym", "build_rlhf"]
