"""Environments registered in the sweep's own process (``gym.register`` in a researcher's script
or a test module) reach the workers that do not inherit that process's memory: spawned pool
workers and Ray tasks get the sweep's env specs and register the ones they lack.

Each spec travels as pickled bytes and is loaded in the worker on its own, so a spec a worker
cannot load (an entry point that is a lambda, a closure, or a class in ``__main__`` of an
interactive session; a module only the sweep's process can import) fails only the runs of that
env, with one line saying why, and never the pool."""

from __future__ import annotations

import pickle
from typing import Any, NamedTuple

import gymnasium as gym

from rlkit.ablation.packing import Item
from rlkit.errors import EnvError, one_line


class SentSpec(NamedTuple):
    """One env registration on its way to a worker."""

    env_id: str
    spec: bytes | None
    """The pickled :class:`gymnasium.envs.registration.EnvSpec` (None: it does not pickle)."""
    reason: str = ""
    """Why it did not pickle."""


def sweep_env_specs(runs: list[Item]) -> list[SentSpec]:
    """The registrations of the runs' env ids without a ``module:`` prefix (Gymnasium imports that
    module itself in the worker) that this process holds."""
    ids = {run.env for item in runs for run in (item if isinstance(item, list) else [item])}
    sent = []
    for env_id in sorted(i for i in ids if ":" not in i):
        spec = gym.registry.get(env_id)
        if spec is None:
            continue  # the run fails on its own, with Gymnasium's message
        try:
            sent.append(SentSpec(env_id, pickle.dumps(spec)))
        except Exception as exc:
            sent.append(SentSpec(env_id, None, f"{type(exc).__name__}: {one_line(exc)}"))
    return sent


def register_missing(specs: list[SentSpec]) -> None:
    """In a worker: register each of ``specs`` whose id this process lacks; one that cannot be
    loaded here is registered as an env whose construction raises that reason in one line."""
    for sent in specs:
        if sent.env_id in gym.registry:
            continue
        reason = sent.reason
        if sent.spec is not None:
            try:
                gym.registry[sent.env_id] = pickle.loads(sent.spec)
                continue
            except Exception as exc:
                reason = f"{type(exc).__name__}: {one_line(exc)}"
        gym.register(sent.env_id, entry_point=unloadable, kwargs={"env_id": sent.env_id, "reason": reason},
                     disable_env_checker=True)


def unloadable(env_id: str, reason: str, **_: Any) -> gym.Env:
    """The construction of an env whose registration could not reach this worker."""
    raise EnvError(f"{env_id} is registered in the sweep's process in a form a worker process cannot load "
                   f"({reason}): register it with a 'module:Class' entry point from an importable module")
