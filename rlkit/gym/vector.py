"""A lean in-process vector env: Gymnasium's ``SyncVectorEnv`` semantics in SAME_STEP mode,
with only the info rlkit reads.

Gymnasium's ``SyncVectorEnv`` merges every key of every sub-env's info dict into batched arrays on
every step (``_add_info``), work that rivals a cheap env's own step. rlkit reads one thing from
the info: the true final observation of an episode that ended at this step. :class:`SameStepEnvs`
steps the same envs in the same order with the same seeds, so its observations, rewards,
terminations and truncations are those of ``SyncVectorEnv(autoreset_mode=SAME_STEP)`` bit for bit
(tested side by side).
"""

from __future__ import annotations

import contextlib
from copy import deepcopy
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from rlkit.gym.action_masks import env_mask


class SameStepEnvs(gym.vector.VectorEnv):
    """``len(env_fns)`` envs stepped one after another in this process.

    ``step(actions [N, ...])`` returns ``(obs [N, ...], rewards [N] float64, terminated [N],
    truncated [N], info)``. When sub-env ``i``'s episode ends, it is reset in the same step: ``obs[i]``
    is the first observation of the next episode and ``info["final_obs"][i]`` the last one of the
    ended episode (``info["_final_obs"]`` marks which entries are set); ``info`` has no other keys
    (an ``info["action_mask"]`` is kept per sub-env for :meth:`action_masks`).
    Every call returns fresh arrays (none is reused by a later step).
    """

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]]) -> None:
        self.envs: list[gym.Env] = []
        try:
            for fn in env_fns:
                self.envs.append(fn())
        except BaseException:  # the envs made before the one that failed are closed (quietly: the failure is the news)
            for env in self.envs:
                with contextlib.suppress(Exception):
                    env.close()
            raise
        self.num_envs = len(self.envs)
        first = self.envs[0]
        self.single_observation_space = first.observation_space
        self.single_action_space = first.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.spec = first.spec
        self.info_masks: list[Any] = [None] * self.num_envs
        """Each sub-env's ``info["action_mask"]`` for its current observation (None: it gave none)."""
        self._stack: Callable[[list[Any]], Any] = (
            np.array if isinstance(self.single_observation_space, gym.spaces.Box) else self._concatenate)

    def _concatenate(self, items: list[Any]) -> Any:
        out = create_empty_array(self.single_observation_space, self.num_envs)
        return concatenate(self.single_observation_space, items, out)

    def reset(self, *, seed: int | Sequence[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        """Reset every sub-env; an int ``seed`` seeds sub-env ``i`` with ``seed + i`` (as Gymnasium)."""
        seeds = [seed + i for i in range(self.num_envs)] if isinstance(seed, int) else \
            list(seed) if seed is not None else [None] * self.num_envs
        if len(seeds) != self.num_envs:
            raise ValueError(f"{len(seeds)} seeds for {self.num_envs} envs")
        obs = []
        for i, (env, s) in enumerate(zip(self.envs, seeds)):
            o, inf = env.reset(seed=s, options=options)
            obs.append(o)
            self.info_masks[i] = inf.get("action_mask")
        return self._stack(obs), {}

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        n = self.num_envs
        rewards = np.zeros(n, np.float64)
        terminated, truncated = np.zeros(n, np.bool_), np.zeros(n, np.bool_)
        obs: list[Any] = [None] * n
        info: dict[str, Any] = {}
        per_env = actions if isinstance(actions, np.ndarray) else list(iterate(self.action_space, actions))
        for i, env in enumerate(self.envs):
            obs[i], rewards[i], terminated[i], truncated[i], inf = env.step(per_env[i])
            if terminated[i] or truncated[i]:
                if not info:
                    info = {"final_obs": np.full(n, None, object), "_final_obs": np.zeros(n, np.bool_)}
                info["final_obs"][i], info["_final_obs"][i] = deepcopy(obs[i]), True  # reset may reuse its array
                obs[i], inf = env.reset()
            self.info_masks[i] = inf.get("action_mask")
        return self._stack(obs), rewards, terminated, truncated, info

    def action_masks(self, n_actions: int) -> np.ndarray:
        """``[N, A]`` bool masks of the current observations: each sub-env's ``action_masks()``, or
        its ``info["action_mask"]`` (see :mod:`rlkit.gym.masking`)."""
        return np.stack([env_mask(env, {"action_mask": m}, n_actions) for env, m in zip(self.envs, self.info_masks)])

    def close_extras(self, **kwargs: Any) -> None:
        """Close every sub-env, even after one raised (the first error is raised after)."""
        errors = []
        for env in self.envs:
            try:
                env.close()
            except (Exception, SystemExit) as exc:  # noqa: BLE001  (the others still close)
                errors.append(exc)
        if errors:
            raise errors[0]
