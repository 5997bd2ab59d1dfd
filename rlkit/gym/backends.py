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

from rlkit.errors import ConfigError, EnvError

class CartPoleSameStep(gym.vector.VectorEnv):
    """Gymnasium's :class:`CartPoleVectorEnv` in SAME_STEP mode.

    ``step(actions [N])`` returns ``(obs [N, 4] float32, rewards [N] float64, terminated [N],
    truncated [N], info)`` with the semantics of :class:`rlkit.gym.vector.SameStepEnvs`: a
    sub-env whose episode ends is reset in the same step (its new state drawn as
    ``CartPoleVectorEnv`` draws it, from the env's own generator), ``info["final_obs"][i]`` holds
    its last observation and ``info["_final_obs"]`` marks the ended ones. Terminations (the pole
    fell, the cart left the track) and truncations (the time limit) stay apart."""

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}

    def __init__(self, inner: CartPoleVectorEnv) -> None:
        self.inner = inner
        self.num_envs = inner.num_envs
        self.single_observation_space, self.single_action_space = inner.single_observation_space, inner.single_action_space
        self.observation_space, self.action_space = inner.observation_space, inner.action_space
        self.spec = inner.spec

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        obs, info = self.inner.reset(seed=seed, options=options)
        return np.ascontiguousarray(obs), info

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        inner = self.inner
        obs, reward, terminated, truncated, _ = inner.step(np.asarray(actions))
        obs, done = np.ascontiguousarray(obs), terminated | truncated  # [N, 4] rows (the env returns state.T)
        info: dict[str, Any] = {}
        if done.any():
            info = _final_obs(obs, done)
            inner.state[:, done] = inner.np_random.uniform(low=inner.low, high=inner.high, size=(4, int(done.sum())))
            inner.steps[done] = 0
            inner.prev_done[:] = False  # reset here, not on the next step
            obs[done] = inner.state[:, done].T.astype(np.float32)
        return obs, reward.astype(np.float64), terminated, truncated, info

    def close_extras(self, **kwargs: Any) -> None:
        self.inner.close()


def make_vector_backend(env_id: str, num_envs: int, env_kwargs: dict[str, Any]) -> gym.vector.VectorEnv:
    """``num_envs`` copies of ``env_id`` as its own vectorized implementation in SAME_STEP mode;
    an id without one rlkit can adapt is a one-line :class:`ConfigError`."""
    spec = gym.spec(env_id)
    if spec.vector_entry_point is None:
        raise ConfigError(f"--env-backend vector: {env_id} has no vectorized implementation in Gymnasium "
                          "(use --env-backend gymnasium)")
    envs = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", **env_kwargs)
    if not isinstance(envs.unwrapped, CartPoleVectorEnv) or envs is not envs.unwrapped:
        envs.close()
        raise ConfigError(f"--env-backend vector: rlkit adapts CartPole's vectorized implementation to resets in "
                          f"the same step, not {env_id}'s (use --env-backend gymnasium)")
    return CartPoleSameStep(envs)


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
    if atari != (wrappers == "atari"):
        raise ConfigError("--env-backend envpool runs ALE ids with --env-wrappers atari (as its own Atari "
                          "preprocessing) and other ids with no wrapper stack")
    options = dict(episodic_life=True, reward_clip=True, noop_max=30, frame_skip=4, stack_num=4, img_height=84,
                   img_width=84, gray_scale=True, use_fire_reset=True, repeat_action_probability=0.25) if atari else {}
    return EnvPoolSameStep(task, num_envs, {**options, **{k: v for k, v in env_kwargs.items() if k != "frameskip"}})
