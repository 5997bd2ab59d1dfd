"""A population's environments stepped as one: every member's ``N`` sub-envs in one call per step.

With ``env_backend="vector"`` (CartPole) all members' sub-envs are one Gymnasium
``CartPoleVectorEnv`` of ``K * N`` (:class:`SharedCartPole`): one numpy step for the whole
population, member ``k`` the ``k``-th group of ``N`` with its own reset generator, so its episodes
are those of its single run whoever else steps beside it. Any other env steps member by member in
each member's own envs (:class:`EachMembersEnvs`), an error failing that member alone.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Sequence

import gymnasium as gym
import numpy as np

from rlkit.errors import EnvError, RlkitError
from rlkit.gym.backends import CartPoleSameStep, make_vector_backend
from rlkit.gym.envs import close_envs, step_envs
from rlkit.gym.population.host import HostedEnvs, stuck_error
from rlkit.io.signals import EnvStuck


class StackedStep(NamedTuple):
    """One step of a group's ``G`` members (rows of members not stepped hold zeros); a row is the
    member's index less the group's first, the keys of ``finals`` and ``errors`` members' indices."""

    obs: np.ndarray | list[Any]
    """``[G, N, ...]`` raw observations, or a member's raw batch as its envs return it at
    ``obs[row]`` (None if not stepped)."""
    rewards: np.ndarray
    """``[G, N]`` float64."""
    terminated: np.ndarray
    """``[G, N]`` bool."""
    truncated: np.ndarray
    """``[G, N]`` bool."""
    finals: dict[int, np.ndarray]
    """Member -> its ``[N]`` object array of final observations (set where an episode ended)."""
    errors: dict[int, RlkitError]
    """Member -> the one-line error its envs stopped with."""


class Group(NamedTuple):
    """Members ``lo .. hi - 1`` (rows ``lo:hi`` of the population's arrays), whose envs step as one."""

    lo: int
    hi: int
    hosted: bool
    """Their envs step in the population's env worker process."""

    @property
    def rows(self) -> slice:
        return slice(self.lo, self.hi)


class EachMembersEnvs:
    """Each member's own envs (``envs[k]``, as its single run makes them), stepped in turn; those of
    the members ``hosted`` holds (the last ones) step in its worker process, a group of their own
    (their ``envs[k]`` are views that refuse to step)."""

    def __init__(self, envs: Sequence[gym.vector.VectorEnv], env_id: str, num_envs: int,
                 hosted: HostedEnvs | None = None) -> None:
        self.envs, self.env_id, self.num_envs, self.hosted = list(envs), env_id, num_envs, hosted
        self.failed_at_start: dict[int, RlkitError] = dict(hosted.errors) if hosted is not None else {}
        """Members whose envs could not be made where they step."""
        k = len(self.envs)
        self.groups = [Group(0, k, False)] if hosted is None else \
            [Group(hosted.members[0], k, True), Group(0, hosted.members[0], False)]
        """The hosted group first: the population starts its step, then steps the others meanwhile."""
        self._stepped: StackedStep | None = None
        self._sent = False

    def start(self, group: Group, actions: np.ndarray, live: list[int]) -> None:
        """Step ``group``'s ``live`` members with ``actions [G, N, ...]`` (as the envs take them): a
        hosted group's sent to the worker, any other's stepped here and now."""
        if group.hosted:
            self._sent = self.hosted.start(actions, set(live))  # type: ignore[union-attr]
            return
        out = _blank(group.hi - group.lo, self.num_envs)
        for i in live:
            try:
                self._record(out, i, i - group.lo, step_envs(self.envs[i], self.env_id, actions[i - group.lo]))
            except RlkitError as exc:
                out.errors[i] = exc
            except EnvStuck as exc:  # after a stop signal: this member is given up, the others go on
                out.errors[i] = stuck_error(self.env_id, exc)
        self._stepped = out

    def finish(self, group: Group, live: list[int]) -> StackedStep:
        """``group``'s step begun by :meth:`start` (a hosted group's waited for)."""
        if not group.hosted:
            return self._stepped  # type: ignore[return-value]
        results = self.hosted.finish() if self._sent else {}  # type: ignore[union-attr]
        whole = self.hosted.stacked if self._sent and len(live) == group.hi - group.lo else None  # type: ignore[union-attr]
        if whole is not None and whole[1].dtype == np.float64 and whole[2].dtype == whole[3].dtype == bool:
            return StackedStep(*whole, {}, {})  # every member stepped as one array
        out = _blank(group.hi - group.lo, self.num_envs)
        for i in live:
            result = results.get(i) or EnvError(f"{self.env_id}: the population's env worker process died "
                                                "(exit or crash)")
            if isinstance(result, RlkitError):
                out.errors[i] = result
            else:
                self._record(out, i, i - group.lo,
                             (*result[:4], {} if result.finals is None else {"final_obs": result.finals}))
        return out

    @staticmethod
    def _record(out: StackedStep, k: int, row: int, step: tuple[Any, ...]) -> None:
        obs, rewards, terminated, truncated, info = step
        out.obs[row] = obs  # type: ignore[index]
        out.rewards[row], out.terminated[row], out.truncated[row] = rewards, terminated, truncated
        if "final_obs" in info:
            out.finals[k] = info["final_obs"]

    def close(self, abort: bool = False) -> None:
        """The worker, if any (each member closes its own envs)."""
        if self.hosted is not None:
            self.hosted.close(abort)


def _blank(rows: int, n: int) -> StackedStep:
    return StackedStep([None] * rows, np.zeros((rows, n)), np.zeros((rows, n), bool), np.zeros((rows, n), bool), {}, {})


class Elsewhere(gym.vector.VectorEnv):
    """Member ``k``'s envs as its trainer sees them while they step in ``host``'s worker: their
    spaces; ``reset(seed)`` resets them there; the population steps them (``step`` is refused)."""

    def __init__(self, envs: gym.vector.VectorEnv, host: HostedEnvs, k: int) -> None:
        self.host, self.k = host, k
        self.num_envs = envs.num_envs
        self.single_observation_space, self.single_action_space = envs.single_observation_space, envs.single_action_space
        self.observation_space, self.action_space = envs.observation_space, envs.action_space
        self.spec = envs.spec

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        return self.host.reset(self.k, seed), {}  # type: ignore[arg-type]

    def step(self, actions: Any) -> Any:
        raise RuntimeError("a population member's envs are stepped by its population")

    def close_extras(self, **kwargs: Any) -> None:
        """The worker closes them."""


class MemberGroup(gym.vector.VectorEnv):
    """Member ``group``'s sub-envs of a :class:`SharedCartPole`, as its trainer sees its envs:
    ``reset(seed)`` resets its group alone; the population steps them (``step`` is refused)."""

    def __init__(self, shared: CartPoleSameStep, group: int) -> None:
        self.shared, self.group = shared, group
        self.num_envs = shared.group_size
        self.single_observation_space, self.single_action_space = shared.single_observation_space, shared.single_action_space
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, self.num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, self.num_envs)
        self.spec = shared.spec

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[np.ndarray, dict]:
        return self.shared.reset_group(self.group, seed), {}

    def step(self, actions: Any) -> Any:
        raise RuntimeError("a population member's envs are stepped by its population")

    def close_extras(self, **kwargs: Any) -> None:
        """The population closes the shared env."""


class SharedCartPole:
    """All members' CartPole sub-envs as one ``CartPoleSameStep`` of ``K * N`` in ``K`` groups."""

    def __init__(self, env_id: str, num_members: int, num_envs: int, env_kwargs: dict[str, Any]) -> None:
        self.env = make_vector_backend(env_id.rpartition(":")[2], num_members * num_envs, env_kwargs,
                                       groups=num_members)
        self.num_members, self.num_envs = num_members, num_envs
        self.groups = [Group(0, num_members, False)]
        self._stepped: StackedStep | None = None

    def member(self, k: int, seed: int) -> MemberGroup:
        """Member ``k``'s view, its group reset with ``seed`` (the seed its own envs were reset with)."""
        self.env.reset_group(k, seed)
        return MemberGroup(self.env, k)

    def start(self, group: Group, actions: np.ndarray, live: list[int]) -> None:
        """``actions [K, N]``; every member's sub-envs step (a failed member's too: its draws are
        its own)."""
        self._stepped = self._step(actions)

    def finish(self, group: Group, live: list[int]) -> StackedStep:
        return self._stepped  # type: ignore[return-value]

    def _step(self, actions: np.ndarray) -> StackedStep:
        k, n = self.num_members, self.num_envs
        obs, rewards, terminated, truncated, info = self.env.step(actions.reshape(k * n))
        obs = obs.reshape(k, n, *obs.shape[1:])
        finals = {}
        if "final_obs" in info:
            ended = info["_final_obs"].reshape(k, n)
            finals = {i: info["final_obs"][i * n:(i + 1) * n] for i in np.flatnonzero(ended.any(axis=1))}
        return StackedStep(obs, rewards.reshape(k, n), terminated.reshape(k, n), truncated.reshape(k, n),
                           finals, {})

    def close(self, abort: bool = False) -> None:
        close_envs(self.env, "CartPole")
