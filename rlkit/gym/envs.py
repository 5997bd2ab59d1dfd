"""Vectorized Gymnasium environments with explicit autoreset semantics and clear errors."""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import json
import logging
import signal
import sys
import traceback
from typing import Any, Iterator

import gymnasium as gym
import numpy as np

from rlkit.errors import ConfigError, EnvError
from rlkit.errors import one_line as _one_line
from rlkit.gym.backends import make_envpool_backend, make_vector_backend
from rlkit.gym.action_masks import has_action_masks
from rlkit.gym.vector import SameStepEnvs
from rlkit.gym.wrappers import check_wrappers, make_kwargs, wrap
from rlkit.io.process import die_with_owner
from rlkit.io.signals import EnvStuck, env_wait, from_a_signal

log = logging.getLogger("rlkit")

ENV_FAILURES = (Exception, SystemExit)
"""What an env's own code raises when it fails: any exception, and ``sys.exit`` (a simulator's
wrapper that exits on an error would otherwise end rlkit silently, with exit code 0); a
KeyboardInterrupt stays an interrupt."""


def check_env_id(env_id: str) -> None:
    """Raise :class:`EnvError` unless ``env_id`` is registered with Gymnasium. Gymnasium's
    ``module:EnvId`` form imports ``module`` first (which registers its envs)."""
    module, _, name = env_id.rpartition(":")
    if module:
        try:
            importlib.import_module(module)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001  (a SyntaxError, sys.exit, whatever its code raises)
            raise EnvError(f"cannot import module {module!r} of env id {env_id!r}: {_import_failure(exc)}") from None
    register_namespace(name)
    if name not in gym.registry:
        register_installed()  # ids without a namespace: ale-py's BreakoutNoFrameskip-v4, MiniGrid's
    try:
        gym.spec(name)
    except gym.error.Error as exc:
        hint = " (POPGym's ids need the popgym package: pip install 'rlkit[popgym]')" \
            if name.startswith("popgym-") and importlib.util.find_spec("popgym") is None else ""
        raise EnvError(f"unknown environment id {env_id!r}: {_one_line(exc)}{hint}") from None


def _import_failure(exc: BaseException) -> str:
    """Why a module did not import, in one line: the error's type, its message and, for a
    SyntaxError, the file and line."""
    if isinstance(exc, ImportError):
        return _one_line(exc)
    where = f" ({exc.filename}, line {exc.lineno})" if isinstance(exc, SyntaxError) and exc.filename else ""
    text = exc.msg if isinstance(exc, SyntaxError) else _one_line(exc)
    return f"{type(exc).__name__}: {text}{where}"


@functools.cache
def register_installed() -> None:
    """Register the ids of every env package of :data:`NAMESPACES` (and MiniGrid's and POPGym's)
    that is installed (once per process)."""
    for module, function, _ in NAMESPACES.values():  # a package that is missing or broken registers nothing
        with contextlib.suppress(Exception):
            _register(module, function)
    for package in ("minigrid", "popgym"):  # each registers its ids when imported
        with contextlib.suppress(Exception):
            importlib.import_module(package)


def _register(module: str, function: str | None) -> None:
    """Import ``module`` (an ``ImportError`` when it is not installed) and register its env ids."""
    package = importlib.import_module(module)
    if function:
        getattr(package, function)()
    else:
        gym.register_envs(package)


NAMESPACES = {"MinAtar": ("minatar.gym", "register_envs", "minatar"), "ALE": ("ale_py", None, "atari"),
              "rlkit": ("rlkit_envs", "register_envs", "")}
"""Env id namespace -> (module, its registering function or None: ``gym.register_envs(module)``,
the rlkit extra that installs it): ids that exist only once their package has registered them."""


def register_namespace(env_id: str) -> None:
    """Register the ids of ``env_id``'s namespace (``MinAtar/Breakout-v1``, ``ALE/Pong-v5``) if its
    package is installed and has not yet; a missing package is a one-line :class:`EnvError`
    naming the extra that installs it."""
    namespace = env_id.split("/", 1)[0] if "/" in env_id else None
    if namespace not in NAMESPACES or env_id in gym.registry:
        return
    module, function, extra = NAMESPACES[namespace]
    try:
        _register(module, function)
    except ImportError:
        raise EnvError(f"{env_id!r} needs the {module.split('.')[0]} package: pip install 'rlkit[{extra}]'") from None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001  (as for an env module: whatever its import raises)
        raise EnvError(f"{env_id!r}: the {module.split('.')[0]} package failed to register its envs: "
                       f"{_import_failure(exc)}") from None


EXTRAS = {"gymnasium.envs.box2d": "box2d", "ale_py": "atari", "minatar": "minatar", "minigrid": "minigrid",
          "popgym": "popgym"}
"""Entry-point module prefix -> the rlkit extra that installs what its envs need."""


def _cannot_make(env_id: str, exc: BaseException, wrappers: str = "", env_kwargs: dict[str, Any] | None = None
                 ) -> EnvError:
    """A failed construction as one line naming the wrapper stack and the ``--env-kwargs`` (if
    any) and the error's type (``KeyError: 5`` says what a bare ``5`` does not); a missing
    optional dependency names rlkit's extra for it."""
    under = f" under --env-wrappers {wrappers}" if wrappers else ""
    under += f" with --env-kwargs {_kwargs_text(env_kwargs)}" if env_kwargs else ""
    what = _one_line(exc) if isinstance(exc, (EnvError, ConfigError)) else f"{type(exc).__name__}: {_one_line(exc)}"
    message = f"could not make {env_id!r}{under}: {what}"
    if isinstance(exc, (BrokenPipeError, EOFError, ConnectionResetError)):
        message = f"could not make {env_id!r}{under}: a worker process died while starting (exit or crash)"
    if isinstance(exc, (gym.error.DependencyNotInstalled, ImportError)):
        entry = str(getattr(gym.spec(env_id.rpartition(":")[2]), "entry_point", ""))
        extra = next((x for prefix, x in EXTRAS.items() if entry.startswith(prefix)), None)
        if extra:
            message += f" (install it with: pip install 'rlkit[{extra}]')"
    return EnvError(message)


def _kwargs_text(env_kwargs: dict[str, Any]) -> str:
    """``env_kwargs`` as the JSON the user gave (``repr`` for what JSON cannot write)."""
    try:
        return json.dumps(env_kwargs)
    except (TypeError, ValueError):
        return repr(env_kwargs)


def _signal_free_worker(*args: Any) -> None:
    """Gymnasium's subprocess worker, ignoring SIGINT and SIGTERM: an interrupt (Ctrl-C reaches
    the whole process group) is the trainer's alone, which finishes its update, checkpoints and
    closes the workers (a worker killed mid-step would leave the trainer waiting or reading a broken
    pipe). Set in the worker itself, so the trainer never ignores a signal, whatever the start method."""
    from gymnasium.vector.async_vector_env import _async_worker

    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.SIG_IGN)
    die_with_owner()  # the trainer, even while this worker is stuck in an env's step
    index, env_fn, pipe, parent_pipe, _, error_queue = args[:6]
    if isinstance(env_fn, EnvMaker):
        env_fn.warn_on_close = False
    try:
        env = _CloseQuietly(env_fn())  # a failing close() is ignored here: the trainer has warned of it once
    except ENV_FAILURES as exc:  # reported as Gymnasium's workers report a failed step: the trainer raises it
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # before the report: the trainer may terminate it at once
        error_queue.put((index, type(exc), exc, traceback.format_exc()))
        pipe.send((None, False))
        _await_first_command(pipe, parent_pipe)
        sys.exit(1)
    _async_worker(index, lambda: env, *args[2:])


FAILED_WORKER_WAIT = 30.0
"""Seconds a worker whose env failed waits for the trainer's first command at most."""


def _await_first_command(pipe: Any, parent_pipe: Any) -> None:
    """A worker whose env failed stays until the trainer's first command (exiting before would close
    the pipe under it, and it would report a broken pipe instead of the cause), the trainer's end
    closing (its exit or death), SIGTERM (the trainer's multiprocessing terminates it on exit; the
    caller has restored SIGTERM's default), or
    :data:`FAILED_WORKER_WAIT` seconds: a trainer that gave up on another worker never writes."""
    parent_pipe.close()  # this process's copy of the trainer's end: its death is then seen here as EOF
    with contextlib.suppress(EOFError, OSError):
        if pipe.poll(FAILED_WORKER_WAIT):
            pipe.recv()


class _CloseQuietly(gym.Wrapper):
    def close(self) -> None:
        with contextlib.suppress(Exception, KeyboardInterrupt):  # a worker ignores the user's signals
            super().close()


class EnvMaker:
    """One training env: ``gym.make(env_id, **env_kwargs)`` under the wrapper stack ``wrappers``
    (:mod:`rlkit.gym.wrappers`), picklable for async workers (the id's namespace is registered
    first, whatever the start method). Gymnasium's async envs also make one env in the trainer's
    process to read the spaces and close it at once: there (``warn_on_close``) a failing
    ``close()`` is the one warning of it, not a failure to make the envs."""

    def __init__(self, env_id: str, env_kwargs: dict[str, Any], wrappers: str = "", warn_on_close: bool = True) -> None:
        self.env_id, self.env_kwargs, self.wrappers, self.warn_on_close = env_id, env_kwargs, wrappers, warn_on_close

    def __call__(self) -> gym.Env:
        register_namespace(self.env_id.rpartition(":")[2])
        env = gym.make(self.env_id, disable_env_checker=True, **make_kwargs(self.wrappers, self.env_kwargs))
        env = wrap(env, self.wrappers, training=True)
        return _WarnOnClose(env, self.env_id) if self.warn_on_close else env


class _WarnOnClose(gym.Wrapper):
    def __init__(self, env: gym.Env, env_id: str) -> None:
        super().__init__(env)
        self.env_id = env_id

    def close(self) -> None:
        try:
            super().close()
        except BaseException as exc:  # noqa: BLE001  (sorted by close_failed)
            if not close_failed(exc):
                raise
            warn_close_failed(self.env_id, exc)


_WARNED: set[str] = set()


def new_run_warnings() -> None:
    """A new run in this process: :func:`warn_close_failed` warns once again."""
    _WARNED.clear()


def close_failed(exc: BaseException) -> bool:
    """Whether ``exc``, raised by closing envs, is their own failure (one of :data:`ENV_FAILURES`,
    or a KeyboardInterrupt that no signal raised) rather than the user's stop."""
    return isinstance(exc, ENV_FAILURES) or (isinstance(exc, KeyboardInterrupt) and not from_a_signal(exc))


def warn_close_failed(env_id: str, exc: BaseException) -> None:
    """One warning per env id and run that its ``close()`` failed (ignored: closing must neither
    mask an error nor cost a finished run its result)."""
    if env_id not in _WARNED:
        _WARNED.add(env_id)
        said = _one_line(exc)
        name = type(exc).__name__
        log.warning("%s failed while closing: %s (ignored)", env_id, name if said == name else f"{name}: {said}")


def check_backend(backend: str, async_envs: bool, wrappers: str) -> None:
    """A one-line :class:`ConfigError` for a backend that cannot honour ``async_envs`` or ``wrappers``."""
    if backend != "gymnasium" and async_envs:
        raise ConfigError(f"--env-backend {backend} steps every env in one call from this process: drop --async-envs")
    if backend == "vector" and wrappers:
        raise ConfigError("--env-backend vector steps Gymnasium's vectorized env, under no wrapper stack: drop "
                          "--env-wrappers")
    if backend == "envpool" and wrappers not in ("", "atari"):
        raise ConfigError(f"--env-backend envpool steps EnvPool's own envs, under no wrapper stack but its Atari "
                          f"preprocessing (--env-wrappers atari): --env-wrappers {wrappers} needs --env-backend gymnasium")


def make_vec_env(env_id: str, num_envs: int, async_envs: bool = False, wrappers: str = "",
                 backend: str = "gymnasium", **env_kwargs: Any) -> gym.vector.VectorEnv:
    """``num_envs`` copies of ``env_id`` (under the training side of the wrapper stack ``wrappers``)
    in SAME_STEP autoreset mode: in this process (:class:`~rlkit.gym.vector.SameStepEnvs`), one
    worker process each with ``async_envs``, or with ``backend="vector"`` the env's own vectorized
    implementation (:mod:`rlkit.gym.backends`).

    SAME_STEP (Gymnasium 1.x): when an episode ends at step t, ``step`` returns the reset
    observation and puts the true final observation in ``info["final_obs"]``; so no
    transition across a reset is ever formed, and a truncation can bootstrap from
    V(final observation).
    """
    check_env_id(env_id)
    check_wrappers(wrappers)
    check_backend(backend, async_envs, wrappers)
    try:
        if backend == "vector":
            return make_vector_backend(env_id.rpartition(":")[2], num_envs, env_kwargs)
        if backend == "envpool":
            return make_envpool_backend(env_id.rpartition(":")[2], num_envs, wrappers, env_kwargs)
        if not async_envs:  # Gymnasium's SyncVectorEnv semantics, without its per-step info merging
            return SameStepEnvs([EnvMaker(env_id, env_kwargs, wrappers, warn_on_close=False)] * num_envs)
        with _quiet_workers(gym.vector.AsyncVectorEnv):
            return gym.vector.AsyncVectorEnv([EnvMaker(env_id, env_kwargs, wrappers)] * num_envs, copy=False,
                                             autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
                                             worker=_signal_free_worker)
    except (EnvError, ConfigError):
        raise
    except ENV_FAILURES as exc:  # a broken env constructor, a missing optional dependency, ...
        raise _cannot_make(env_id, exc, wrappers, env_kwargs) from exc


def make_env(env_id: str, env_kwargs: dict[str, Any] | None = None, wrappers: str = "",
             training: bool = False) -> gym.Env:
    """One ``env_id`` env (``gym.make`` with ``env_kwargs``), under the evaluation (or with
    ``training``, the training) side of the wrapper stack ``wrappers``; a failure is a one-line
    :class:`EnvError`."""
    check_env_id(env_id)
    check_wrappers(wrappers)
    try:
        return wrap(gym.make(env_id, **make_kwargs(wrappers, env_kwargs or {})), wrappers, training)
    except ENV_FAILURES as exc:  # a broken env constructor, an unknown keyword, a missing optional dependency, ...
        raise _cannot_make(env_id, exc, wrappers, env_kwargs) from exc


def vector_env_masks(envs: gym.vector.VectorEnv, env_id: str, env_kwargs: dict[str, Any]) -> bool:
    """Whether the env gives action masks (:func:`rlkit.gym.masking.has_action_masks`); masks are
    read from in-process envs only, so with ``--async-envs`` they are a one-line refusal."""
    if isinstance(envs, SameStepEnvs):
        return env_gives_masks(envs.envs[0], env_id)
    probe = make_env(env_id, env_kwargs)
    try:
        masked = env_gives_masks(probe, env_id)
    finally:
        close_envs(probe, env_id)
    if masked:
        raise EnvError(f"{env_id} gives action masks, which rlkit reads from its own in-process envs: drop "
                       "--async-envs and --env-backend")
    return False


def env_gives_masks(env: gym.Env, env_id: str) -> bool:
    """:func:`rlkit.gym.masking.has_action_masks`, with a failing probe reset as one line naming the env."""
    try:
        return has_action_masks(env)
    except ENV_FAILURES as exc:
        raise EnvError(f"{env_id} raised on reset: {type(exc).__name__}: {_one_line(exc)}") from exc


def close_envs(envs: gym.vector.VectorEnv | gym.Env, env_id: str, abort: bool = False) -> None:
    """Close the envs. When aborting (an error or an interrupt is on its way out) workers are
    terminated rather than waited for. A failure to close is a one-line warning: it must neither
    mask the cause of an abort nor cost a finished run its evaluation and result."""
    if abort and isinstance(envs, gym.vector.AsyncVectorEnv):
        for process in envs.processes:  # a worker may be mid-step or dead; it ignores SIGTERM (see above)
            process.kill()
            process.join(timeout=5)
        for pipe in envs.parent_pipes:
            if pipe is not None:  # Gymnasium drops the pipe of a worker that reported an error
                pipe.close()
        envs.closed = True  # nothing left to wait for (close() would wait on the pending step)
        return
    try:
        with _quiet_workers(envs), env_wait():  # after a stop signal, a close() that never returns is left
            envs.close()
    except EnvStuck as exc:
        log.warning("%s: %s", env_id, exc.waited_for("close"))
    except BaseException as exc:  # noqa: BLE001  (sorted by close_failed)
        if not close_failed(exc):
            raise
        if not abort:
            warn_close_failed(env_id, exc)


@contextlib.contextmanager
def _quiet_workers(envs: object) -> Iterator[None]:
    """Gymnasium's async envs (``envs``, or the class while they are made) print a worker's whole
    traceback before re-raising its error; rlkit reports that error in one line instead, so the
    print is held back while they run."""
    if not (isinstance(envs, gym.vector.AsyncVectorEnv) or envs is gym.vector.AsyncVectorEnv):
        yield
        return
    level, gym.logger.min_level = gym.logger.min_level, gym.logger.ERROR + 1
    try:
        yield
    finally:
        gym.logger.min_level = level


def step_envs(envs: gym.vector.VectorEnv, env_id: str, actions: np.ndarray) -> tuple[Any, ...]:
    """``envs.step`` with worker failures (an exception, a dead worker) reported as one line naming the env."""
    try:
        with _quiet_workers(envs), env_wait():  # after a stop signal, a step stuck for the grace period is given up
            return envs.step(actions)
    except (EOFError, BrokenPipeError, ConnectionResetError) as exc:
        raise EnvError(f"{env_id}: a worker process died while stepping (exit or crash)") from exc
    except ENV_FAILURES as exc:
        raise EnvError(f"{env_id} raised while stepping: {type(exc).__name__}: {_one_line(exc)}") from exc


def reset_envs(envs: gym.vector.VectorEnv, env_id: str, seed: int) -> np.ndarray:
    try:
        with _quiet_workers(envs), env_wait():
            obs, _ = envs.reset(seed=seed)
    except ENV_FAILURES as exc:
        raise EnvError(f"{env_id} raised on reset: {type(exc).__name__}: {_one_line(exc)}") from exc
    return obs


def as_observation_array(obs: Any, env_id: str) -> np.ndarray:
    """Observations as a numeric array, or a one-line error naming what the env returned."""
    if type(obs) is np.ndarray and obs.dtype.kind in "fiub":  # the usual case, checked per step
        return obs
    if obs is None:
        raise EnvError(f"{env_id} returned None as an observation")
    array = np.asarray(obs)
    if not np.issubdtype(array.dtype, np.number) and array.dtype != np.bool_:
        raise EnvError(f"{env_id} returned a non-numeric observation of dtype {array.dtype}")
    return array
