"""The ``rlkit`` command's entry point, outside the package so that it imports nothing heavy:
a Ctrl-C or SIGTERM while Python is still importing rlkit and, for a command that runs on torch,
torch (its companions and its C++ start-up take a second or two) ends with one line and exit code
128 + the signal instead of a traceback or a silent death. Nothing has been written by then. The
usage, every command's --help, ``rlkit sweep --dry-run``, ``rlkit report`` and ``rlkit records``
run without torch (:func:`rlkit.cli.needs_torch`) and start at once.
"""

from __future__ import annotations

import os
import signal
import sys

_SIGNALS = {signal.SIGINT, signal.SIGTERM}
_received: list[int] = []


def _hold_signals() -> None:
    """From here on SIGINT and SIGTERM are ignored until the process has exited: the exit is under
    way and its code stands. ``SIG_IGN`` survives interpreter shutdown (which resets Python
    handlers to the default, deadly one); a signal that arrived just before, still pending for the
    Python handler, is dropped without CPython's "ignored due to race condition" report."""
    sys.unraisablehook = _quiet_race(sys.unraisablehook)
    for s in _SIGNALS:
        signal.signal(s, signal.SIG_IGN)


def _quiet_race(hook):  # type: ignore[no-untyped-def]
    def unraisable(info) -> None:  # type: ignore[no-untyped-def]
        if not (isinstance(info.exc_value, OSError) and "ignored due to race condition" in str(info.exc_value)):
            hook(info)

    return unraisable


def _on_signal(signum: int, frame: object) -> None:
    """A signal during the imports ends the process here, once they are done (see
    :func:`_import_cli`), with one line and no traceback."""
    _hold_signals()
    if not _received:  # a second signal (Ctrl-C pressed twice) finds the exit already under way
        _received.append(signum)
        sys.stderr.write("rlkit: interrupted while starting; nothing was written\n")
        sys.stderr.flush()
        os._exit(128 + signum)


def _import_cli(argv: list[str]):  # type: ignore[no-untyped-def]
    """rlkit's CLI and, where the command ``argv`` runs on torch, torch, imported with SIGINT and
    SIGTERM blocked at the OS level: a signal stays pending until the imports are done and is then
    handled in Python, never inside an extension's import (torch's C++ start-up either aborts on
    an exception raised by a handler it calls back or fails on an interrupted system call)."""
    block = hasattr(signal, "pthread_sigmask")
    if block:
        signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        from rlkit.cli import main as cli_main, needs_torch

        if needs_torch(argv):
            import torch._dynamo  # noqa: F401  (torch.optim imports it with the first optimizer: also C++ start-up)
    finally:
        if block:  # a pending signal reaches _on_signal here, in plain Python
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGNALS)
    return cli_main


def main() -> int:
    previous = {s: signal.signal(s, _on_signal) for s in _SIGNALS}
    cli_main = _import_cli(sys.argv[1:])
    for s, handler in previous.items():
        signal.signal(s, handler)
    try:
        try:
            return cli_main()
        finally:  # --help exits here too: its text is written out before the exit
            sys.stdout.flush()
    except BrokenPipeError:  # a reader such as `head` stopped early: what it read stands, no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    finally:  # the outcome is reported: a signal while Python shuts down must not change the exit code
        _hold_signals()


if __name__ == "__main__":
    sys.exit(main())
