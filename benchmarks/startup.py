"""How fast the ``rlkit`` command starts: the median wall time of fresh processes running
``python -c "import torch"``, ``rlkit --help``, ``rlkit train --help`` and ``rlkit sweep SPEC
--dry-run`` on a finished tiny sweep (what a no-op rerun of a sweep reads), each one's ratio to
the bare ``import torch`` (target: at most 1.2x) and whether it imports torch at all.

The runs are interleaved (one of each command per round, after one untimed round) so that a
change in the machine's load reaches every command alike; the load average before and after is
on the figure's Machine line. Run it on an otherwise idle machine.

    python benchmarks/startup.py                     # 10 rounds, the figure written to benchmarks/README.md
    python benchmarks/startup.py --runs 3 --write ''   # a quick look, no figure written
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import README, WRITE_HELP, emit

LAUNCH = "import sys, rlkit_launch; sys.exit(rlkit_launch.main())"
"""The ``rlkit`` command as installed (its entry point), for ``python -X importtime``."""
SPEC = """name = "startup"
envs = ["CartPole-v1"]
seeds = 1
preset = "cartpole"
total_steps = 512
num_envs = 2
num_steps = 128
eval_episodes = 1

[variants]
ppo = {}
"""


def rlkit_command() -> list[str]:
    """The installed ``rlkit`` script beside this Python, else its entry point run by this Python."""
    script = Path(sys.executable).with_name("rlkit")
    return [str(script)] if script.is_file() else [sys.executable, "-c", LAUNCH]


def finished_sweep(folder: Path) -> tuple[Path, Path]:
    """A one-run sweep trained to the end in ``folder`` (not timed): its spec and its directory."""
    spec, out = folder / "startup.toml", folder / "sweep"
    spec.write_text(SPEC)
    done = subprocess.run([*rlkit_command(), "sweep", str(spec), "--out", str(out), "--workers", "1"],
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"startup.py: the tiny sweep failed: {done.stderr.strip()[-500:]}")
    return spec, out


def imports_torch(argv: list[str]) -> bool:
    """Whether ``rlkit ARGV`` imports torch (``python -X importtime`` lists every module imported)."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", LAUNCH, *argv], capture_output=True, text=True)
    return any(line.split("|")[-1].strip() == "torch" for line in done.stderr.splitlines()
               if line.startswith("import time:"))


def median_seconds(commands: dict[str, list[str]], runs: int) -> dict[str, float]:
    """Each command's median wall time over ``runs`` interleaved rounds of fresh processes."""
    seconds: dict[str, list[float]] = {name: [] for name in commands}
    for round_ in range(runs + 1):
        for name, argv in commands.items():
            start = time.perf_counter()
            subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
            if round_:  # the first round warms the file cache
                seconds[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="timed rounds, one fresh process per command each "
                        "(default: 10)")
    parser.add_argument("--write", default=README, help=WRITE_HELP)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        spec, sweep = finished_sweep(Path(folder))
        rlkit = rlkit_command()
        dry_run = ["sweep", str(spec), "--out", str(sweep), "--dry-run"]
        commands = {'python -c "import torch"': [sys.executable, "-c", "import torch"],
                    "rlkit --help": [*rlkit, "--help"], "rlkit train --help": [*rlkit, "train", "--help"],
                    "rlkit sweep SPEC --dry-run (a finished sweep)": [*rlkit, *dry_run]}
        medians = median_seconds(commands, args.runs)
        torch_in = {name: True for name in commands}
        torch_in.update({name: imports_torch(argv) for name, argv in
                         (("rlkit --help", ["--help"]), ("rlkit train --help", ["train", "--help"]),
                          ("rlkit sweep SPEC --dry-run (a finished sweep)", dry_run))})
    torch_s = medians['python -c "import torch"']
    lines = [f"### Start-up — {time.strftime('%Y-%m-%d %H:%M')}",
             f"Command: `python benchmarks/startup.py {' '.join(shlex.quote(a) for a in sys.argv[1:])}`  ",
             f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, load "
             f"average {load_before:.2f} before and {os.getloadavg()[0]:.2f} after; median of {args.runs} fresh "
             "processes each", "",
             "| command | median s | × import torch | imports torch |", "|---|---|---|---|"]
    lines += [f"| `{name}` | {s:.2f} | {s / torch_s:.2f}× | {'yes' if torch_in[name] else 'no'} |"
              for name, s in medians.items()]
    emit(lines, args.write, "startup")


if __name__ == "__main__":
    main()
