"""Every long phase shows rlkit's progress bar on a terminal, and none of it reaches a log file."""

import os
import subprocess
import sys
import threading

import pytest

from tests import tiny_lm, warm_cli
from tests.robustness.helpers import ROOT, SMALL, cli_command

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs a pseudo-terminal")


def stderr_of(args, terminal, tmp_path, sized=True):
    """The command's stderr, written to a pseudo-terminal (``terminal``; 120 x 24 when ``sized``,
    else reporting no size, as under ``script``) or to a file."""
    if not terminal:
        log = tmp_path / "stderr.log"
        log.write_text("")
        warm = warm_cli.popen(args, stdout=os.devnull, stderr=str(log), session=False)
        if warm is not None:
            return warm.wait(300), log.read_text()
        with open(log, "w") as f:
            proc = subprocess.run(cli_command(*args), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=f, timeout=300)
        return proc.returncode, log.read_text()
    import pty

    master, slave = pty.openpty()
    if sized:
        import fcntl
        import struct
        import termios

        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    chunks = []

    def drain():
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:  # the terminal closed
                return
            if not data:
                return
            chunks.append(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    warm = warm_cli.popen(args, stdout=os.devnull, stderr=os.ttyname(slave), session=False)
    if warm is not None:  # the terminal stays open until the command, which opens it by name, has ended
        code = warm.wait(300)
        os.close(slave)
    else:
        proc = subprocess.Popen(cli_command(*args), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=slave)
        os.close(slave)
        code = proc.wait(timeout=300)
    reader.join(10)
    os.close(master)
    return code, b"".join(chunks).decode(errors="replace")


def has_bar(text, unit):
    return f"{unit}/s" in text or f"s/{unit}" in text


def commands(tmp_path):
    policy, rm, prompts = tiny_lm.save_models(tmp_path)
    prefs = tmp_path / "prefs.jsonl"
    prefs.write_text('{"prompt": "the movie was", "chosen": "good", "rejected": "bad"}\n' * 6)
    return {
        "train": (["train", *SMALL, "--logdir", str(tmp_path / "train"), "--run-name", "r"], "step"),
        "rlhf": (["rlhf", "--policy", str(policy), "--reward-model", str(rm), "--prompts", str(prompts),
                  "--iterations", "3", "--num-envs", "2", "--num-minibatches", "1", "--max-new-tokens", "2", "--torch-threads", "1",
                  "--no-save-model", "--logdir", str(tmp_path / "rlhf")], "it"),
        "rm train": (["rm", "train", "--backbone", str(policy), "--data", str(prefs), "--torch-threads", "1",
                      "--output", str(tmp_path / "rm_out")], "batch"),
    }


@pytest.mark.parametrize("command", ["train", "rlhf", "rm train"])
def test_the_bar_is_drawn_on_a_terminal_and_absent_from_a_log_file(tmp_path, command):
    pytest.importorskip("transformers")
    args, unit = commands(tmp_path / "tty")[command]
    code, text = stderr_of(args, True, tmp_path, sized=command != "rm train")
    assert code == 0 and has_bar(text, unit), text[-2000:]
    assert "Loading weights" not in text and "LOAD REPORT" not in text and "Writing model shards" not in text
    args, unit = commands(tmp_path / "file")[command]
    code, text = stderr_of(args, False, tmp_path)
    assert code == 0 and not has_bar(text, unit) and "\r" not in text and "\x1b[" not in text, text[-2000:]


def test_no_progress_hides_the_bar_on_a_terminal(tmp_path):
    args, unit = commands(tmp_path)["train"]
    code, text = stderr_of([*args, "--no-progress"], True, tmp_path)
    assert code == 0 and not has_bar(text, unit), text[-2000:]
