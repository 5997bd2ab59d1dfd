"""The ``rlkit`` command started from a warm process: each call is a fresh process, forked from a
server that has imported torch, rlkit's CLI and the toy envs once, instead of one that imports them
again (several seconds of CPU per call, most of the default suite's time).

What a test sees is what a fresh ``python -c CLI ARGS`` gives: its own pid, the exit code
(negative for a signal), stdout, and stderr led by whatever the server's imports wrote (warnings of
an import appear as a fresh process shows them). Each environment the calls come with (beyond
pytest's own PYTEST_* variables) gets its own server, started in it, since PYTHONPATH, RLKIT_* and
the like act at start-up (see :data:`MAX_SERVERS`); from another cwd than the repository's root,
or with ``RLKIT_TESTS_COLD=1``, a call is a real fresh process. Start-up itself (imports, signals
while importing) is tested with real processes (tests/test_startup.py, test_signals_and_hangs.py).
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).parents[1]
WARM_IMPORTS = ("tests.toy_envs", "rlkit_launch", "torch._dynamo", "rlkit.cli", "rlkit.gym.trainer")
"""What the server imports once: what every ``rlkit`` command of the tests imports."""


def serve() -> None:
    """The server's loop (its process runs ``python -c``): one request per stdin line, JSON with
    ``args``, ``cwd``, ``env``, ``out`` and ``err`` (file paths); it answers ``{"pid"}`` once the child is
    forked and ``{"status"}`` once it has ended. The child never returns here: it ends as
    :func:`_exit_as_python_does` says."""
    reply = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what the imports print to stdout goes with their stderr
    import importlib

    for name in WARM_IMPORTS:
        importlib.import_module(name)
    sys.stdout.flush()
    sys.stderr.flush()
    reply.write("{}\n")
    reply.flush()
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            reply.close()
            _become_the_command(request)
        reply.write(json.dumps({"pid": pid}) + "\n")
        reply.flush()
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        reply.write(json.dumps({"status": status}) + "\n")
        reply.flush()


def _become_the_command(request: dict) -> None:
    """In the forked child: stdin from /dev/null, stdout and stderr to the request's files, its
    cwd and argv, default signal handlers; then the command as its entry point runs it."""
    for fd, path, flags in ((0, os.devnull, os.O_RDONLY), (1, request["out"], os.O_WRONLY),
                            (2, request["err"], os.O_WRONLY | os.O_APPEND)):
        new = os.open(path, flags)
        os.dup2(new, fd)
        os.close(new)
    sys.stdin = open(os.devnull)
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.default_int_handler if s == signal.SIGINT else signal.SIG_DFL)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = ["-c", *request["args"]]
    import rlkit_launch

    _exit_as_python_does(rlkit_launch.main)


def _exit_as_python_does(entry) -> None:  # type: ignore[no-untyped-def]
    """``sys.exit(entry())`` as the interpreter ends a process: the exit code of an int, a message
    and 1 for another ``SystemExit`` value, a traceback and 1 for an exception; then non-daemon
    threads joined, atexit handlers run and stdio flushed, as ``Py_FinalizeEx`` does before it
    tears the modules down. The teardown itself (seconds with torch loaded) is skipped."""
    try:
        code = entry()
    except SystemExit as stop:
        code = stop.code
    except BaseException as error:  # noqa: BLE001  (reported as Python reports an uncaught exception)
        sys.excepthook(*sys.exc_info())
        if isinstance(error, KeyboardInterrupt):  # Python ends by the signal itself
            sys.stderr.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        code = 1
    if code is None:
        code = 0
    elif not isinstance(code, int):
        sys.stderr.write(f"{code}\n")
        code = 1
    import atexit as _atexit
    import threading

    threading._shutdown()  # type: ignore[attr-defined]
    _atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code & 0xFF)


class _Server:
    def __init__(self) -> None:
        self.env = dict(os.environ)
        self.dir = tempfile.mkdtemp(prefix="rlkit-warm-")
        self.imports_log = os.path.join(self.dir, "imports.log")
        with open(self.imports_log, "w") as log:
            self.proc = subprocess.Popen([sys.executable, "-c", "import tests.warm_cli as w; w.serve()"], cwd=ROOT,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True)
        self._read(600)  # the imports
        self.preamble = Path(self.imports_log).read_text()
        self.calls = 0
        atexit.register(self.close)

    def _read(self, timeout: float | None) -> dict:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise TimeoutError
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the warm CLI server died: {Path(self.imports_log).read_text()[-2000:]}")
        return json.loads(line)

    def run(self, args: list[str], cwd: Path | str, timeout: float) -> subprocess.CompletedProcess:
        self.calls += 1
        out, err = (os.path.join(self.dir, f"{self.calls}.{k}") for k in ("out", "err"))
        Path(out).write_text("")
        Path(err).write_text(self.preamble)
        request = {"args": args, "cwd": str(cwd), "out": out, "err": err, "env": dict(os.environ)}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        pid = self._read(60)["pid"]
        try:
            status = self._read(timeout)["status"]
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            self._read(60)
            raise subprocess.TimeoutExpired(args, timeout) from None
        stdout, stderr = (Path(p).read_text(errors="replace") for p in (out, err))
        for p in (out, err):
            os.unlink(p)
        return subprocess.CompletedProcess(args, status, stdout, stderr)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


_servers: dict[frozenset, _Server] = {}
MAX_SERVERS = 2
"""Servers kept per test process, one per environment the calls came with, the least recently used
closed for a new one: a library a test imports may set a variable for good (ray, cv2, pygame do),
a monkeypatched one comes and goes."""


def _startup_env(env: os._Environ | dict) -> dict:
    """The environment but pytest's own bookkeeping (PYTEST_CURRENT_TEST changes with each test)."""
    return {k: v for k, v in env.items() if not k.startswith("PYTEST_")}


def run(args: list[str], cwd: Path | str = ROOT, timeout: float = 120) -> subprocess.CompletedProcess | None:
    """``args`` run as ``python -c CLI *args`` would run them (see the module docstring), or None
    when this call must be a real fresh process: the servers are off, or ``cwd`` is not the
    repository's root (where ``python -c CLI`` finds the toy envs)."""
    if os.environ.get("RLKIT_TESTS_COLD") == "1" or Path(cwd).resolve() != ROOT.resolve():
        return None
    key = frozenset(_startup_env(os.environ).items())
    server = _servers.pop(key, None)
    if server is None:
        while len(_servers) >= MAX_SERVERS:
            _servers.pop(next(iter(_servers))).close()
        server = _Server()  # started in this environment: its imports saw what a fresh process sees
    _servers[key] = server  # the most recently used last
    return server.run(list(args), cwd, timeout)
