"""The ``rlkit`` command's entry point, outside the package so that it imports nothing heavy:
a Ctrl-C or SIGTERM while Python is still importing rlkit (torch and its companions take a second
or two) ends with one line and exit code 128 + the signal instead of a traceback or a silent death.
Nothing has been written by then."""

from __future__ import annotations

import signal
import sys


class _Terminated(KeyboardInterrupt):
    """SIGTERM during the imports."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated


def main() -> int:
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        from rlkit.cli import main as cli_main
    except KeyboardInterrupt as exc:
        print("rlkit: interrupted while starting; nothing was written", file=sys.stderr)
        return 128 + (signal.SIGTERM if isinstance(exc, _Terminated) else signal.SIGINT)
    finally:
        signal.signal(signal.SIGTERM, previous)
    try:
        return cli_main()
    finally:  # the outcome is reported: a signal while Python shuts down must not change the exit code
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, signal.SIG_IGN)


if __name__ == "__main__":
    sys.exit(main())
