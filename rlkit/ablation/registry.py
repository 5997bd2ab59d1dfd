"""Environments registered in the sweep's own process (``gym.register`` in a researcher's script
or a test module) reach the workers that do not inherit that process's memory: spawned pool
workers and Ray tasks get the sweep's env specs and register the ones they lack."""

from __future__ import annotations

import pickle

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

from rlkit.ablation.packing import Item


def sweep_env_specs(runs: list[Item]) -> list[EnvSpec]:
    """The registered specs of the runs' env ids that a worker can receive: ids without a
    ``module:`` prefix (Gymnasium imports that module itself) whose spec pickles (an entry point
    given as a ``"module:Class"`` string, or a class importable by name)."""
    ids = {run.env for item in runs for run in (item if isinstance(item, list) else [item])}
    specs = []
    for env_id in sorted(i for i in ids if ":" not in i):
        spec = gym.registry.get(env_id)
        if spec is None:
            continue  # the run fails on its own, with Gymnasium's message
        try:
            pickle.dumps(spec)
        except Exception:  # an entry point defined in __main__ or a closure: the worker cannot import it
            continue
        specs.append(spec)
    return specs


def register_missing(specs: list[EnvSpec]) -> None:
    """In a worker: register each of ``specs`` whose id this process lacks."""
    for spec in specs:
        if spec.id not in gym.registry:
            gym.registry[spec.id] = spec
