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
import queue
import select
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).parents[1]
WARM_IMPORTS = ("tests.toy_envs", "rlkit_launch", "torch._dynamo", "rlkit.cli", "rlkit.gym.trainer")
"""What the server imports once: what every ``rlkit`` command of the tests imports."""


def serve() -> None:
    """The server's loop (its process runs ``python -c``): one request per stdin line, JSON with
    ``args``, ``cwd``, ``env``, ``out`` and ``err`` (file paths); it answers ``{"pid"}`` once the child is
    forked and ``{"exited", "status"}`` once a child has ended (children run side by side). The child
    never returns here: it ends as :func:`_exit_as_python_does` says."""
    reply = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what the imports print to stdout goes with their stderr
    import importlib

    for name in WARM_IMPORTS:
        importlib.import_module(name)
    sys.stdout.flush()
    sys.stderr.flush()
    reply.write("{}\n")
    reply.flush()
    live: set[int] = set()
    requests = os.fdopen(os.dup(0), "rb", buffering=0)
    pending = b""
    while True:
        ready, _, _ = select.select([requests], [], [], 0.01 if live else None)
        if ready:
            chunk = requests.read(65536)
            if not chunk:
                break
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                pid = os.fork()
                if pid == 0:
                    reply.close()
                    requests.close()
                    _become_the_command(json.loads(line))
                live.add(pid)
                reply.write(json.dumps({"pid": pid}) + "\n")
                reply.flush()
        for pid in list(live):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                live.discard(pid)
                reply.write(json.dumps({"exited": pid, "status": os.waitstatus_to_exitcode(status)}) + "\n")
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
    if request.get("session"):
        os.setsid()  # as Popen(start_new_session=True): a signal to the test's group misses it
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
    def __init__(self, env: dict) -> None:
        self.env = env
        """What the server was started in (a call's start-up environment)."""
        self.dir = tempfile.mkdtemp(prefix="rlkit-warm-")
        self.imports_log = os.path.join(self.dir, "imports.log")
        with open(self.imports_log, "w") as log:
            self.proc = subprocess.Popen([sys.executable, "-c", "import tests.warm_cli as w; w.serve()"], cwd=ROOT,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
        ready, _, _ = select.select([self.proc.stdout], [], [], 600)  # the imports
        if not ready or not self.proc.stdout.readline():
            raise RuntimeError(f"the warm CLI server did not start: {Path(self.imports_log).read_text()[-2000:]}")
        self.preamble = Path(self.imports_log).read_text()
        self.calls = 0
        self.started: queue.Queue = queue.Queue()
        """The pids of the forked children, in the order of the requests."""
        self.pids: list[int] = []
        self.exits: dict[int, int] = {}
        self.changed = threading.Condition()
        threading.Thread(target=self._read_replies, daemon=True).start()
        atexit.register(self.close)

    def _read_replies(self) -> None:
        for line in self.proc.stdout:
            reply = json.loads(line)
            if "pid" in reply:
                self.started.put(reply["pid"])
            else:
                with self.changed:
                    self.exits[reply["exited"]] = reply["status"]
                    self.changed.notify_all()
        self.started.put(None)
        with self.changed:
            self.changed.notify_all()

    def start(self, args: list[str], cwd: Path | str, env: dict, session: bool, out: str | None = None,
              err: str | None = None) -> "WarmProcess":
        """``args`` forked; its stdout and stderr go to the files ``out`` and ``err`` (a terminal's
        device, /dev/null; default: files of the server's folder that :meth:`WarmProcess.communicate`
        reads), stderr led by the server's imports' output."""
        self.calls += 1
        if out is None:
            out = os.path.join(self.dir, f"{self.calls}.out")
            Path(out).write_text("")
        if err is None:
            err = os.path.join(self.dir, f"{self.calls}.err")
            Path(err).write_text("")
        with open(err, "a") as stream:
            stream.write(self.preamble)
        request = {"args": args, "cwd": str(cwd), "out": out, "err": err, "env": env, "session": session}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        pid = self.started.get(timeout=60)
        if pid is None:
            raise RuntimeError(f"the warm CLI server died: {Path(self.imports_log).read_text()[-2000:]}")
        self.pids.append(pid)
        return WarmProcess(self, list(args), pid, out, err)

    def exit_status(self, pid: int, timeout: float | None) -> int | None:
        """``pid``'s exit code once it has ended within ``timeout`` s (None: still running)."""
        with self.changed:
            self.changed.wait_for(lambda: pid in self.exits or self.proc.poll() is not None, timeout)
            if pid not in self.exits and self.proc.poll() is not None:
                raise RuntimeError(f"the warm CLI server died: {Path(self.imports_log).read_text()[-2000:]}")
            return self.exits.get(pid)

    def run(self, args: list[str], cwd: Path | str, timeout: float) -> subprocess.CompletedProcess:
        proc = self.start(args, cwd, dict(os.environ), session=False)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(60)
            raise
        stdout, stderr = proc.communicate()
        for path in (proc._out, proc._err):
            os.unlink(path)
        return subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)

    def busy(self) -> bool:
        """Whether a child of it still runs (a server is closed only once none does)."""
        with self.changed:
            return any(pid not in self.exits for pid in self.pids)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class WarmProcess:
    """What a test does with ``subprocess.Popen(cli_command(*args), stdout=PIPE, stderr=PIPE,
    text=True)``, for a command forked warm: ``pid``, ``poll``, ``wait``, ``send_signal``, ``kill``,
    ``communicate`` (stdout and stderr once it has ended) and ``returncode``."""

    def __init__(self, server: _Server, args: list[str], pid: int, out: str, err: str) -> None:
        self.server, self.args, self.pid, self._out, self._err = server, args, pid, out, err
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self.server.exit_status(self.pid, 0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self.server.exit_status(self.pid, timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        return tuple(Path(p).read_text(errors="replace") for p in (self._out, self._err))  # type: ignore[return-value]


_servers: dict[frozenset, _Server] = {}
MAX_SERVERS = 2
"""Servers kept per test process, one per environment the calls came with, the least recently used
closed for a new one: a library a test imports may set a variable for good (ray, cv2, pygame do),
a monkeypatched one comes and goes."""


RUN_TIME_VARIABLES = ("RLKIT_TEST_MARKER",)
"""Variables only read while a command runs (the toy envs' marker file), not at start-up."""


def _startup_env(env: os._Environ | dict) -> dict:
    """The environment but pytest's own bookkeeping (PYTEST_CURRENT_TEST changes with each test)."""
    return {k: v for k, v in env.items() if not k.startswith("PYTEST_")}


def _server(env: dict) -> _Server:
    """The server for calls in ``env`` (started in it: its imports saw what a fresh process sees)."""
    key = frozenset(_startup_env(env).items())
    server = _servers.pop(key, None)
    if server is None:
        idle = [k for k, s in _servers.items() if not s.busy()]
        while len(_servers) >= MAX_SERVERS and idle:
            _servers.pop(idle.pop(0)).close()
        server = _Server(env)
    _servers[key] = server  # the most recently used last
    return server


def _cold(cwd: Path | str) -> bool:
    return os.environ.get("RLKIT_TESTS_COLD") == "1" or Path(cwd).resolve() != ROOT.resolve()


def run(args: list[str], cwd: Path | str = ROOT, timeout: float = 120) -> subprocess.CompletedProcess | None:
    """``args`` run as ``python -c CLI *args`` would run them (see the module docstring), or None
    when this call must be a real fresh process: the servers are off, or ``cwd`` is not the
    repository's root (where ``python -c CLI`` finds the toy envs)."""
    if _cold(cwd):
        return None
    return _server(dict(os.environ)).run(list(args), cwd, timeout)


def popen(args: list[str], env: dict | None = None, stdout: str | None = None, stderr: str | None = None,
          session: bool = True) -> WarmProcess | None:
    """``subprocess.Popen(cli_command(*args), cwd=ROOT, stdout=PIPE, stderr=PIPE, text=True,
    start_new_session=session, env=env)`` forked warm (``stdout``/``stderr``: file paths to write
    instead, read by ``communicate()`` when None), or None where it must be a fresh process (as
    :func:`run`). The variables of :data:`RUN_TIME_VARIABLES` reach the command without a server
    of their own."""
    if _cold(ROOT):
        return None
    env = dict(os.environ if env is None else env)
    startup = {k: v for k, v in env.items() if k not in RUN_TIME_VARIABLES}
    return _server(startup).start(list(args), ROOT, env, session, stdout, stderr)
