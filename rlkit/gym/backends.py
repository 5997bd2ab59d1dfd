"""Env stepping backends: ``gymnasium`` (one env object per sub-env, stepped in turn or in worker
processes), ``vector`` (the env's own vectorized implementation: all sub-envs in one numpy step,
where Gymnasium registers a ``vector_entry_point``) and ``envpool`` (EnvPool's C++ envs, stepped
in its thread pool: classic control, MuJoCo, Atari).

Both reset in NEXT_STEP mode: the step after an episode ends returns the first observation of the
next one, with reward 0, and ignores its action. rlkit trains in SAME_STEP mode (the reset
observation comes in the step that ended the episode, the final one in ``info["final_obs"]``),
so each is adapted here, or refused in one line.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Any, Iterator

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.cartpole import CartPoleVectorEnv
from gymnasium.utils import seeding

from rlkit.errors import ConfigError, EnvError

class CartPoleSameStep(gym.vector.VectorEnv):
    """Gymnasium's :class:`CartPoleVectorEnv` in SAME_STEP mode, its sub-envs in ``groups`` equal
    groups (a population's members), each with its own reset generator.

    ``step(actions [N])`` returns ``(obs [N, 4] float32, rewards [N] float64, terminated [N],
    truncated [N], info)`` with the semantics of :class:`rlkit.gym.vector.SameStepEnvs`: a
    sub-env whose episode ends is reset in the same step (its new state drawn as
    ``CartPoleVectorEnv`` draws it, from its group's generator), ``info["final_obs"][i]`` holds
    its last observation and ``info["_final_obs"]`` marks the ended ones. Terminations (the pole
    fell, the cart left the track) and truncations (the time limit) stay apart. A group's draws
    depend on its own sub-envs alone, so group ``g`` seeded ``s`` (:meth:`reset_group`) repeats
    the env of one group reset with seed ``s``, whatever the other groups do."""

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}

    def __init__(self, inner: CartPoleVectorEnv, groups: int = 1) -> None:
        self.inner = inner
        self.num_envs = inner.num_envs
        self.single_observation_space, self.single_action_space = inner.single_observation_space, inner.single_action_space
        self.observation_space, self.action_space = inner.observation_space, inner.action_space
        self.spec = inner.spec
        if groups < 1 or inner.num_envs % groups:
            raise ValueError(f"{inner.num_envs} sub-envs do not split into {groups} groups")
        self.group_size = inner.num_envs // groups
        self.generators: list[np.random.Generator | None] = [None] * groups

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        """Every sub-env (one group: as ``CartPoleVectorEnv.reset``; several: group ``g`` seeded
        ``seed + g``)."""
        if len(self.generators) == 1:
            obs, info = self.inner.reset(seed=seed, options=options)
            self.generators[0] = self.inner.np_random
            return np.ascontiguousarray(obs), info
        for g in range(len(self.generators)):
            self.reset_group(g, None if seed is None else seed + g)
        return np.ascontiguousarray(self.inner.state.T.astype(np.float32)), {}

    def reset_group(self, group: int, seed: int | None) -> np.ndarray:
        """Reset group ``group``'s sub-envs with a generator seeded ``seed`` (as
        ``CartPoleVectorEnv.reset(seed=seed)`` draws); returns their ``[n, 4]`` observations."""
        inner, n = self.inner, self.group_size
        if inner.state is None:
            inner.reset()
        rng, _ = seeding.np_random(seed)
        self.generators[group] = rng
        cols = slice(group * n, (group + 1) * n)
        inner.state[:, cols] = rng.uniform(low=inner.low, high=inner.high, size=(4, n))
        inner.steps[cols] = 0
        inner.prev_done[cols] = False
        return inner.state[:, cols].T.astype(np.float32)

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        inner = self.inner
        obs, reward, terminated, truncated, _ = inner.step(np.asarray(actions))
        obs, done = np.ascontiguousarray(obs), terminated | truncated  # [N, 4] rows (the env returns state.T)
        info: dict[str, Any] = {}
        if done.any():
            info = _final_obs(obs, done)
            n = self.group_size
            for g in np.unique(np.flatnonzero(done) // n):
                ids = g * n + np.flatnonzero(done[g * n:(g + 1) * n])
                inner.state[:, ids] = self._generator(g).uniform(low=inner.low, high=inner.high, size=(4, len(ids)))
            inner.steps[done] = 0
            inner.prev_done[:] = False  # reset here, not on the next step
            obs[done] = inner.state[:, done].T.astype(np.float32)
        return obs, reward.astype(np.float64), terminated, truncated, info

    def _generator(self, group: int) -> np.random.Generator:
        rng = self.generators[group]
        if rng is None:  # stepped before any seeded reset: an unseeded generator, as Gymnasium's
            rng = self.generators[group] = seeding.np_random()[0]
        return rng

    def close_extras(self, **kwargs: Any) -> None:
        self.inner.close()


def make_vector_backend(env_id: str, num_envs: int, env_kwargs: dict[str, Any], groups: int = 1) -> CartPoleSameStep:
    """``num_envs`` copies of ``env_id`` as its own vectorized implementation in SAME_STEP mode, in
    ``groups`` groups with their own reset generators; an id without one rlkit can adapt is a
    one-line :class:`ConfigError`."""
    spec = gym.spec(env_id)
    if spec.vector_entry_point is None:
        raise ConfigError(f"--env-backend vector: {env_id} has no vectorized implementation in Gymnasium "
                          "(use --env-backend gymnasium)")
    envs = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", **env_kwargs)
    if not isinstance(envs.unwrapped, CartPoleVectorEnv) or envs is not envs.unwrapped:
        envs.close()
        raise ConfigError(f"--env-backend vector: rlkit adapts CartPole's vectorized implementation to resets in "
                          f"the same step, not {env_id}'s (use --env-backend gymnasium)")
    return CartPoleSameStep(envs, groups)


def _final_obs(obs: np.ndarray, done: np.ndarray) -> dict[str, Any]:
    """``info`` of a SAME_STEP step: copies of the ended sub-envs' last observations."""
    final = np.full(len(done), None, object)
    for i in np.flatnonzero(done):
        final[i] = obs[i].copy()
    return {"final_obs": final, "_final_obs": done.copy()}


class EnvPoolSameStep(gym.vector.VectorEnv):
    """An EnvPool pool in SAME_STEP mode, with :class:`CartPoleSameStep`'s ``step`` semantics: the
    sub-envs whose episode ended take EnvPool's reset step at once (``env_id`` of just those).
    EnvPool seeds a pool when it is made, so a reset with a seed makes the pool again with it
    (sub-env ``i`` seeded ``seed + i``): a run's seeded resets repeat exactly."""

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}

    def __init__(self, task: str, num_envs: int, options: dict[str, Any]) -> None:
        self.task, self.options, self.num_envs = task, options, num_envs
        self.pool = self._make(seed=0)
        with _float32_bounds():
            self.single_observation_space, self.single_action_space = self.pool.observation_space, self.pool.action_space
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)

    def _make(self, seed: int) -> Any:
        import envpool

        with _float32_bounds():
            return envpool.make_gymnasium(self.task, num_envs=self.num_envs, seed=seed, **self.options)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        if seed is not None:
            self.pool.close()
            self.pool = self._make(seed)
        with _float32_bounds():  # EnvPool builds its spaces again for each batch it returns
            obs, _ = self.pool.reset()
        return np.array(obs), {}

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        with _float32_bounds():
            obs, reward, terminated, truncated, _ = self.pool.step(np.asarray(actions))
            obs, done = np.array(obs), terminated | truncated
            info: dict[str, Any] = {}
            if done.any():
                info = _final_obs(obs, done)
                ids = np.flatnonzero(done)
                first, *_, reset_info = self.pool.step(np.zeros((len(ids), *self.single_action_space.shape),
                                                                self.single_action_space.dtype), env_id=ids)
                obs[reset_info["env_id"]] = first
        return obs, np.asarray(reward, np.float64), np.asarray(terminated), np.asarray(truncated), info

    def close_extras(self, **kwargs: Any) -> None:
        self.pool.close()


@contextlib.contextmanager
def _float32_bounds() -> Iterator[None]:
    """Silences Gymnasium's warning that EnvPool's float64 space bounds become float32 (as declared)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*precision lowered by casting to float32")
        yield


def make_envpool_backend(env_id: str, num_envs: int, wrappers: str, env_kwargs: dict[str, Any]) -> gym.vector.VectorEnv:
    """``num_envs`` copies of ``env_id`` as EnvPool's task of the same name (``ALE/<Game>-v5`` as
    its ``<Game>-v5`` with the ``atari`` stack's settings: 30 no-op starts, frame skip 4, 84x84
    gray, 4 frames, episodic life, sign-clipped rewards, FIRE on reset, sticky actions 0.25 as
    ALE v5). The run's evaluation env stays Gymnasium's (:mod:`rlkit.gym.wrappers`)."""
    try:
        import envpool
    except ImportError:
        raise EnvError("--env-backend envpool needs EnvPool: pip install 'rlkit[envpool]'") from None
    atari = env_id.startswith("ALE/")
    task = env_id.split("/", 1)[1] if atari else env_id
    if task not in envpool.list_all_envs():
        raise ConfigError(f"--env-backend envpool: EnvPool has no {task!r} (use --env-backend gymnasium)")
    if atari != (wrappers == "atari") or wrappers not in ("", "atari"):
        raise ConfigError("--env-backend envpool runs ALE ids with --env-wrappers atari (as its own Atari "
                          "preprocessing) and other ids with no wrapper stack")
    options = dict(episodic_life=True, reward_clip=True, noop_max=30, frame_skip=4, stack_num=4, img_height=84,
                   img_width=84, gray_scale=True, use_fire_reset=True, repeat_action_probability=0.25) if atari else {}
    return EnvPoolSameStep(task, num_envs, {**options, **{k: v for k, v in env_kwargs.items() if k != "frameskip"}})
