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
        mine = scores[scores.env == env]
        if normalize == "best-mean":
            best, what = float(mine.groupby("variant")["score"].mean().max()), "the best variant's mean"
        else:
            best, what = float(mine["score"].max()), "best run"
        if env in given:
            random, source = float(given[env]["random"]), f"spec's random; {what}"
        else:
            check_env_id(env)
            random = random_return(env, env_kwargs=(env_kwargs or {}).get(env), wrappers=(wrappers or {}).get(env, ""))
            source = f"measured: random policy; {what}"
        out[env] = {"random": random, "reference": best, "source": source, "usable": best > random}
        if not out[env]["usable"]:
            out[env]["source"] = ("not normalized: no variant's mean beats the random policy" if normalize == "best-mean"
                                  else "not normalized: no run beats the random policy; give [reference.\"ENV\"] "
                                       "in the spec to include it")
    return out
