"""The two ends of the normalized score an ablation report aggregates across envs: a random
policy's return (0) and a reference score (1)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

NORMALIZE = ("minmax", "best-mean", "none")
"""``rlkit report --normalize``: ``minmax`` scales each env's scores from a random policy (0) to the
spec's ``[reference."ENV"]`` or the best run (1); ``best-mean`` from a random policy (0) to the best
variant's mean score (1), the normalization of Schulman et al. (2017), Table 1; ``none`` reports per
env only."""


def random_return(env_id: str, episodes: int = 10, seed: int = 10_000, env_kwargs: dict[str, Any] | None = None,
                  wrappers: str = "") -> float:
    """Mean return of uniformly random actions (the 'random' end of min-max normalization), on the
    env as the runs are evaluated: under the evaluation side of their wrapper stack ``wrappers``,
    and among the allowed actions where the env masks them (as every agent on it acts)."""
    from rlkit.gym.evaluation import run_episodes
    from rlkit.gym.envs import close_envs, env_gives_masks, make_env

    env = make_env(env_id, env_kwargs, wrappers)
    try:
        space, masked = env.action_space, env_gives_masks(env, env_id)
    finally:
        close_envs(env, env_id)  # a close() that raises is one warning
    space.seed(seed)
    rng = np.random.default_rng(seed)

    def act(obs: Any, action_mask: np.ndarray | None = None) -> Any:
        return int(rng.choice(np.flatnonzero(action_mask))) if action_mask is not None else space.sample()

    return run_episodes(act, env_id, episodes, seed, env_kwargs=env_kwargs, masked=masked, wrappers=wrappers).mean


def references(scores: pd.DataFrame, given: dict[str, dict[str, float]],
               env_kwargs: dict[str, dict[str, Any]] | None = None,
               wrappers: dict[str, str] | None = None, normalize: str = "minmax") -> dict[str, dict[str, Any]]:
    """Per env of ``scores`` (columns ``env``, ``score`` and, for ``best-mean``, ``variant``): the
    ``random`` and ``reference`` ends of the scale and their ``source``. ``minmax`` takes the spec's
    scores where it gives them, else a random policy's return and the best run's score; ``best-mean``
    takes the spec's ``random`` where given, else a random policy's, and the best variant's mean.
    An env whose reference does not beat the random policy has no scale: it is marked
    ``usable: False`` and left out of the normalized aggregate."""
    from rlkit.gym.envs import check_env_id

    out = {}
    for env in sorted(scores["env"].unique()):
        if env in given and normalize == "minmax":
            out[env] = {**given[env], "source": "spec", "usable": True}
            continue
        if env in given:
            random, source = float(given[env]["random"]), "spec's random"
        else:
            check_env_id(env)
            random = random_return(env, env_kwargs=(env_kwargs or {}).get(env), wrappers=(wrappers or {}).get(env, ""))
            source = "measured: random policy"
        out[env] = _scale(scores[scores.env == env], random, source, normalize)
    return out


def best_mean_over(runs: pd.DataFrame, refs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``refs`` (of ``best-mean``) with each env of ``runs`` scaled to the best variant's mean over
    ``runs`` alone: the runs an aggregate holds, so that its best variant's mean is exactly 1."""
    out = dict(refs)
    for env in sorted(runs["env"].unique()):
        out[env] = _scale(runs[runs.env == env], refs[env]["random"], refs[env]["origin"], "best-mean")
    return out


def _scale(runs: pd.DataFrame, random: float, source: str, normalize: str) -> dict[str, Any]:
    """One env's scale from ``random`` to the best run (``minmax``) or the best variant's mean."""
    if normalize == "best-mean":
        means = runs.groupby("variant")["score"].mean()
        best, what = float(means.max()), f"the best variant's mean ({means.idxmax()})"
    else:
        best, what = float(runs["score"].max()), "best run"
    out = {"random": random, "reference": best, "source": f"{source}; {what}", "usable": best > random,
           "origin": source}  # origin: where the random end comes from
    if not out["usable"]:
        out["source"] = ("not normalized: no variant's mean beats the random policy" if normalize == "best-mean"
                         else "not normalized: no run beats the random policy; give [reference.\"ENV\"] "
                              "in the spec to include it")
    return out
