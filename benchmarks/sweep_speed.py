"""Sweep and report speed on this machine.

1. 20 CartPole-v1 runs x 100k steps (cartpole preset): each alone in its own process, one after
   another, then the same 20 as one `rlkit sweep` with 2 workers. Target: sweep wall time
   <= 0.6 x the sum of the standalone wall times.
2. Per-run overhead: the share of a standalone run's wall time that is not training (process
   start, imports, env creation, final evaluation, files). Target <= 10%.
3. `rlkit report` on a synthetic sweep of 300 runs x 50 evaluations. Target <= 30 s.

    python benchmarks/sweep_speed.py [--runs 20] [--steps 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import README, WRITE_HELP, emit

ROOT = Path(__file__).parents[1]


def standalone(seed: int, steps: int, logdir: str) -> tuple[float, float]:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "rlkit.cli", "train", "--preset", "cartpole", "--seed", str(seed),
                          "--total-steps", str(steps), "--logdir", logdir, "--no-progress"],
                         capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - start
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return wall, result["total_steps"] / result["steps_per_second"]


def synthetic_sweep(root: Path, variants: int = 5, envs: int = 3, seeds: int = 20, points: int = 50) -> None:
    env_ids = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0"][:envs]
    spec = {"name": "synthetic", "envs": env_ids, "seeds": seeds, "total_steps": points * 512, "num_envs": 4,
            "variants": {f"v{i}": {"clip_coef": 0.1 + 0.05 * i} for i in range(variants)},
            "reference": {e: {"random": 0.0, "reference": 500.0} for e in env_ids}}
    from rlkit.ablation.results import claim_sweep_dir
    from rlkit.ablation.spec import expand

    parsed = expand(spec)
    claim_sweep_dir(root, parsed, None)
    rng = np.random.default_rng(0)
    for run in parsed.runs:
        d = root / "runs" / run.name
        d.mkdir(parents=True)
        skill = 1 + 0.1 * int(run.variant[1:])
        history = [[(k + 1) * 512, float(500 * (1 - np.exp(-skill * k / points)) + rng.normal(0, 20)), 1.0]
                   for k in range(points)]
        (d / "result.json").write_text(json.dumps({"total_steps": points * 512, "steps_per_second": 20000.0,
                                                   "eval_return_mean": history[-1][1], "eval_history": history,
                                                   "eval_seconds": [h[0] / 20000 for h in history]}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--write", default=README, help=WRITE_HELP)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp())
    alone = [standalone(seed, args.steps, str(tmp / "alone")) for seed in range(1, args.runs + 1)]
    walls, trains = np.array([a[0] for a in alone]), np.array([a[1] for a in alone])
    spec = tmp / "spec.toml"
    spec.write_text(f'name = "speed"\nenvs = ["CartPole-v1"]\nseeds = {args.runs}\npreset = "cartpole"\n'
                    f'total_steps = {args.steps}\n[variants]\nppo = {{}}\n')
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "rlkit.cli", "sweep", str(spec), "--out", str(tmp / "sweep"), "--workers", "2"],
                   check=True, cwd=ROOT, capture_output=True)
    sweep_wall = time.perf_counter() - start
    import csv

    with open(tmp / "sweep" / "runs.csv") as f:
        rows = list(csv.DictReader(f))
    in_sweep = np.array([(float(r["run_seconds"]) - float(r["train_seconds"])) / float(r["run_seconds"]) for r in rows])
    synthetic_sweep(tmp / "synthetic")
    from rlkit.ablation.report import write_report

    start = time.perf_counter()
    write_report(str(tmp / "synthetic"), reps=2000)
    report_wall = time.perf_counter() - start
    overhead = (walls - trains) / walls
    lines = [f"### Sweep and report speed — {time.strftime('%Y-%m-%d %H:%M')}",
             f"Command: `python benchmarks/sweep_speed.py {' '.join(sys.argv[1:])}`  ",
             f"Machine: {platform.node()}, {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
             "nothing else running\n",
             "| what | measured | target |", "|---|---|---|",
             f"| {args.runs} CartPole runs x {args.steps:,} steps, standalone one by one (sum of wall times) | {walls.sum():.1f} s "
             f"(per run {walls.mean():.2f} s, of which training {trains.mean():.2f} s) | |",
             f"| the same {args.runs} runs as `rlkit sweep --workers 2` | {sweep_wall:.1f} s = "
             f"{sweep_wall / walls.sum():.2f} x the sum | <= 0.6 x |",
             f"| per-run overhead in the sweep (env creation, final 10-episode evaluation, checkpoint and files; "
             f"the worker process is reused) | {in_sweep.mean():.1%} (min {in_sweep.min():.1%}, max {in_sweep.max():.1%}) "
             "| <= 10% |",
             f"| per-run overhead of a standalone run (also process start and imports) | {overhead.mean():.1%} | |",
             f"| `rlkit report` on 300 runs x 50 evaluations (3 envs x 5 variants x 20 seeds, 2000 bootstrap "
             f"resamples, 7 figures) | {report_wall:.1f} s | <= 30 s |"]
    emit(lines, args.write, "sweep_speed")


if __name__ == "__main__":
    main()
