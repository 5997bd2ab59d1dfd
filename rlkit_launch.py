"""The ``rlkit`` command's entry point, outside the package so that it imports nothing heavy:
a Ctrl-C while Python is still importing rlkit (torch and its companions take a second or two)
ends with one line and exit code 130 instead of a traceback. Nothing has been written by then."""

from __future__ import annotations

import sys


def main() -> int:
    try:
        from rlkit.cli import main as cli_main
    except KeyboardInterrupt:
        print("rlkit: interrupted while starting; nothing was written", file=sys.stderr)
        return 130
    return cli_main()


if __name__ == "__main__":
    sys.exit(main())
