"""Some members' envs stepped in one worker process beside the trainer (a population with
``async_envs=True``): while the trainer steps its own members' envs, the worker steps the others',
so a population of envs stepped in Python (MuJoCo) uses a second core. One message each way per
step for all the worker's members (Gymnasium's ``AsyncVectorEnv`` pays a round trip per sub-env,
which costs more than a MuJoCo step itself).

The worker makes each member's envs as its single run makes them in-process and resets them with
the member's seed, so a member's episodes are those of its single run wherever its envs step. An
env error fails that member alone; a worker that dies fails all of its members, each with one line.
"""

from __future__ import annotations

import multiprocessing
import signal
import time
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np

from rlkit.errors import EnvError, RlkitError
from rlkit.gym.envs import ENV_FAILURES, close_envs, make_vec_env, reset_envs, step_envs
from rlkit.io.process import die_with_owner
from rlkit.io.signals import EnvStuck, env_wait
from rlkit.io.wire import pack_arrays, pack_object, unpack


class HostedSpec(NamedTuple):
    """What the worker makes: ``len(seeds)`` members' envs of one config."""

    env_id: str
    num_envs: int
    wrappers: str
    env_kwargs: dict[str, Any]
    seeds: list[int]
    """Each hosted member's reset seed (its episode seed)."""


class MemberResult(NamedTuple):
    """One hosted member's step: what ``envs.step`` returns, final observations as an object array."""

    obs: Any
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    finals: np.ndarray | None


def _host(conn: Any, parent_conn: Any, spec: HostedSpec) -> None:
    """The worker: make and reset the members' envs, then answer ``("step", actions)`` (one entry
    per hosted member: its actions, or None to leave it) until ``"close"`` or the trainer's end."""
    for s in (signal.SIGINT, signal.SIGTERM):  # the trainer's signals; it closes this worker
        signal.signal(s, signal.SIG_IGN)
    die_with_owner()  # the trainer, even while this worker is stuck in an env's step
    parent_conn.close()  # the trainer's death is then an EOF here
    envs: list[gym.vector.VectorEnv | None] = []
    errors: list[RlkitError | None] = []
    for seed in spec.seeds:
        made = None
        try:
            made = make_vec_env(spec.env_id, spec.num_envs, False, spec.wrappers, **spec.env_kwargs)
            reset_envs(made, spec.env_id, seed)
            envs.append(made)
            errors.append(None)
        except RlkitError as exc:  # this member fails; the others' envs go on
            if made is not None:
                close_envs(made, spec.env_id, abort=True)
            envs.append(None)
            errors.append(exc)
    try:
        conn.send_bytes(pack_object(errors))
        while True:
            _wait(conn)
            message = unpack(conn.recv_bytes())
            command, data = ("step", message.arrays[0]) if message.arrays is not None else message.value
            if command == "close":
                break
            if command == "reset":
                conn.send_bytes(pack_object(_reset(envs, *data, spec.env_id)))
            else:
                conn.send_bytes(_results([_step(envs, i, spec.env_id, a) for i, a in enumerate(data)]))
    except (EOFError, OSError):
        pass
    for e in envs:
        if e is not None:
            close_envs(e, spec.env_id, abort=True)


CLOSE_SECONDS = 10.0
"""How long a closing worker is given to close its envs and exit before it is killed."""
ABORT_SECONDS = 1.0
"""The same when the run aborts (fails, or stops at once): a worker stuck in an env is killed at once."""

SPIN_SECONDS = 0.002
"""How long each side polls its pipe before it sleeps on it: a wake-up from sleep can take longer
than a MuJoCo step; a rollout's steps come sooner than this, an update's pause is longer."""


def _wait(conn: Any) -> None:
    """Until ``conn`` has a message: polled for :data:`SPIN_SECONDS`, then slept on."""
    deadline = time.perf_counter() + SPIN_SECONDS
    while not conn.poll():
        if time.perf_counter() > deadline:
            conn.poll(None)
            return


def _reset(envs: list[gym.vector.VectorEnv | None], i: int, seed: int, env_id: str) -> Any:
    """Member ``i``'s envs reset with ``seed``: the observations, or the exception raised."""
    try:
        if envs[i] is None:
            raise RuntimeError("its envs failed before")
        return envs[i].reset(seed=seed)[0]  # type: ignore[union-attr]
    except ENV_FAILURES as exc:  # noqa: BLE001  (the trainer's reset reports it in one line)
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def _results(results: list[MemberResult | RlkitError | None]) -> bytes:
    """The members' step as four stacked arrays (observations, rewards, terminated, truncated) when
    each stepped, none ended an episode and their arrays match; else pickled."""
    first = results[0]
    if type(first) is MemberResult and all(
            type(r) is MemberResult and r.finals is None
            and all(type(a) is np.ndarray and a.dtype == b.dtype and a.shape == b.shape for a, b in zip(r[:4], first[:4]))
            for r in results):  # np.array of equal arrays stacks them (np.stack's result, a third of its time)
        return pack_arrays([np.array([r[f] for r in results]) for f in range(4)])  # type: ignore[index]
    return pack_object(results)


def _step(envs: list[gym.vector.VectorEnv | None], i: int, env_id: str, actions: Any) -> MemberResult | RlkitError | None:
    if envs[i] is None or actions is None:
        return None
    try:
        try:
            obs, rewards, terminated, truncated, info = step_envs(envs[i], env_id, actions)  # type: ignore[arg-type]
        except KeyboardInterrupt as exc:  # the env's own (this worker ignores the trainer's signals)
            said = f": {exc}" if str(exc) else ""
            raise EnvError(f"{env_id} raised while stepping: KeyboardInterrupt{said}") from None
    except RlkitError as exc:
        close_envs(envs[i], env_id, abort=True)  # type: ignore[arg-type]
        envs[i] = None
        return exc
    return MemberResult(obs, rewards, terminated, truncated, info.get("final_obs"))


def stuck_error(env_id: str, exc: EnvStuck, what: str = "") -> EnvError:
    """The one line a member fails with when its envs were given up after a stop signal."""
    return EnvError(f"{env_id}: {exc.message}{f' ({what})' if what else ''}; its newest checkpoint stands")


class HostedEnvs:
    """The trainer's side of one worker hosting ``spec``'s members' envs (their indices ``members``
    in the population). ``start`` sends a step's actions, ``finish`` waits for the results."""

    def __init__(self, spec: HostedSpec, members: list[int]) -> None:
        self.spec, self.members = spec, members
        ctx = multiprocessing.get_context()
        self.conn, child = ctx.Pipe()
        self.process = ctx.Process(target=_host, args=(child, self.conn, spec), daemon=True,
                                   name="rlkit-population-envs")
        self.process.start()
        child.close()
        self.dead = False
        self.lost = EnvError(f"{spec.env_id}: the population's env worker process died (exit or crash)")
        """What the hosted members fail with once the worker is gone."""
        self.stacked: list[np.ndarray] | None = None
        """The last step's four arrays (observations, rewards, terminated, truncated: ``[H, N, ...]``)
        when every hosted member stepped and none ended an episode; else None."""
        self.errors: dict[int, RlkitError] = {}
        """Members whose envs could not be made or reset in the worker."""
        for k, error in zip(members, self._receive()):
            if error is not None:
                self.errors[k] = error

    def _receive(self) -> Any:
        self.stacked = None
        try:
            with env_wait():  # after a stop signal, a worker stuck in an env's step is given up
                _wait(self.conn)
                message = unpack(self.conn.recv_bytes())
            self.stacked = message.arrays
            if message.arrays is None:
                return message.value
            obs, rewards, terminated, truncated = message.arrays
            return [MemberResult(obs[i], rewards[i], terminated[i], truncated[i], None) for i in range(len(obs))]
        except EnvStuck as exc:
            self.lost = stuck_error(self.spec.env_id, exc, "the population's env worker stepping them is stopped")
            self.dead = True
            self.process.kill()  # it ignores SIGTERM, and its env may never return
            return [self.lost] * len(self.members)
        except (EOFError, OSError):
            self.dead = True
            return [self.lost] * len(self.members)

    def start(self, actions: np.ndarray, live: set[int]) -> bool:
        """Send the hosted live members' actions (``actions[i]``: ``members[i]``'s); False if the
        worker is gone."""
        if self.dead:
            return False
        try:
            if isinstance(actions, np.ndarray) and live.issuperset(self.members):
                self.conn.send_bytes(pack_arrays([actions[:len(self.members)]]))
            else:
                self.conn.send_bytes(pack_object(("step", [actions[i] if k in live else None
                                                           for i, k in enumerate(self.members)])))
        except (BrokenPipeError, OSError):
            self.dead = True
        return not self.dead

    def finish(self) -> dict[int, MemberResult | RlkitError]:
        """Each hosted live member's result (an error fails it)."""
        return {k: r for k, r in zip(self.members, self._receive()) if r is not None}

    def reset(self, k: int, seed: int) -> np.ndarray:
        """Member ``k``'s envs reset with ``seed`` in the worker; returns their observations."""
        if not self.dead:
            try:
                self.conn.send_bytes(pack_object(("reset", (self.members.index(k), seed))))
            except (BrokenPipeError, OSError):
                self.dead = True
        obs = self._receive() if not self.dead else None
        if self.dead or isinstance(obs, BaseException):
            raise obs if isinstance(obs, BaseException) else self.lost
        return obs

    def close(self, abort: bool = False) -> None:
        """Ask the worker to close its envs and exit; one that does not within :data:`CLOSE_SECONDS`
        (:data:`ABORT_SECONDS` when ``abort``: the run is failing or stopped at once, the worker
        perhaps stuck in an env) is killed (it ignores SIGTERM, the trainer's signal)."""
        if not self.dead:
            try:
                self.conn.send_bytes(pack_object(("close", None)))
            except (BrokenPipeError, OSError):
                pass
        self.process.join(timeout=ABORT_SECONDS if abort else CLOSE_SECONDS)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(timeout=5)
        self.conn.close()
