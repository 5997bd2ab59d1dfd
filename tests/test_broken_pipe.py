"""A reader that stops early (``rlkit train --help | head``) ends the command quietly: no traceback
on stderr, and exit code 128 + SIGPIPE as for other Unix tools (argparse's own help drops a failed
write itself and exits 0)."""

import signal
import subprocess
import sys

import pytest

LAUNCH = "import sys, rlkit_launch; sys.exit(rlkit_launch.main())"


@pytest.mark.parametrize("argv", [["train", "--help"], ["--help"], ["sweep", "--help"]])
def test_a_closed_pipe_ends_quietly(argv, tmp_path):
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the command writes a byte
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) in (0, 128 + signal.SIGPIPE), err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err
