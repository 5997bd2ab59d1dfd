"""Do a population's members return what single runs of the same seeds return?

Where a member's bits cannot be a single run's (on CUDA cuBLAS picks its batched-GEMM kernel by the
population size; on any device a single run's unstacked kernels round otherwise than a member's),
the seeds are compared as samples: ``--seeds`` seeds trained as one population on ``--device``, the
same seeds as single runs (``--jobs`` processes at a time, one torch thread each), and the final
evaluation returns' IQM and mean with 95% stratified-bootstrap intervals (rliable), and the
probability that a member beats a single run, P(population > single), with its interval (0.5: no
difference). Matching: overlapping intervals and a P interval that holds 0.5.

    python checks/population_vs_single.py --device cuda --jobs 10 [--write OUT.md]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from rlkit.ablation.measurements import cpu_model, write_section


def config(preset: str, env: str, steps: int, device: str, logdir: str, name: str):  # noqa: ANN201 (a TrainConfig)
    """The one configuration both ways train (a population's members and the single runs)."""
    import rlkit

    return rlkit.preset(preset, env=env, total_steps=steps, device=device, logdir=logdir, run_name=name,
                        progress=False, torch_threads=1, checkpoint_every=10**9)


def single(args: argparse.Namespace, seed: int, logdir: str) -> float:
    """Final evaluation mean of one single run (its own process)."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import population_vs_single as b; "
            "print(json.dumps(b.run_single(*sys.argv[2:])))")
    out = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent), args.preset, args.env,
                          str(args.steps), args.device, logdir, str(seed)], capture_output=True, text=True, check=True)
    return float(json.loads(out.stdout.strip().splitlines()[-1]))


def run_single(preset: str, env: str, steps: str, device: str, logdir: str, seed: str) -> float:
    import rlkit

    cfg = config(preset, env, int(steps), device, logdir, f"single__s{seed}").replace(seed=int(seed))
    return float(rlkit.train(cfg).eval_history[-1][1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="cartpole", help="the preset both ways train")
    ap.add_argument("--env", default="CartPole-v1", help="env id")
    ap.add_argument("--steps", type=int, default=50_000, help="env steps per seed")
    ap.add_argument("--seeds", type=int, default=10, help="seeds 1..N, as one population and as single runs")
    ap.add_argument("--device", default="cuda", help="device of the population and of the single runs")
    ap.add_argument("--jobs", type=int, default=2, help="single runs at a time")
    ap.add_argument("--reps", type=int, default=2000, help="bootstrap resamples of every interval")
    ap.add_argument("--write", default="", metavar="FILE",
                    help="markdown file whose population_vs_single section the table replaces (default: print only)")
    args = ap.parse_args()
    import torch

    from rlkit.ablation.stats import improvement, interval_estimates
    from rlkit.gym.population import train_population

    torch.set_num_threads(1)
    seeds = list(range(1, args.seeds + 1))
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        members = train_population(config(args.preset, args.env, args.steps, args.device, tmp, "pop"), seeds)
        pop_s = time.perf_counter() - start
        pop = [float(m.result.eval_history[-1][1]) for m in members]
        start = time.perf_counter()
        with ThreadPoolExecutor(args.jobs) as pool:
            alone = list(pool.map(lambda s: single(args, s, tmp), seeds))
        single_s = time.perf_counter() - start
    matrices = {"population": np.array(pop)[:, None], "single": np.array(alone)[:, None]}
    est = interval_estimates(matrices, args.reps)
    p = improvement(matrices, "single", args.reps)["population"]
    fmt = lambda m, v: f"{est[v][m][0]:.1f} [{est[v][m][1]:.1f}, {est[v][m][2]:.1f}]"  # noqa: E731
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M")
    device = torch.cuda.get_device_name() if args.device == "cuda" else cpu_model()
    lines = [f"### A population's members against single runs ({args.env}, {args.device}) — {stamp}",
             f"Command: `python checks/population_vs_single.py --preset {args.preset} --env {args.env} --steps "
             f"{args.steps} --seeds {args.seeds} --device {args.device} --jobs {args.jobs}`  ",
             f"Machine: {platform.node()}, {device}, torch {torch.__version__}, Python {platform.python_version()}", "",
             "| seeds 1–%d as | final eval IQM [95%% CI] | mean [95%% CI] | wall s |" % args.seeds, "|---|---|---|---|",
             f"| one population | {fmt('iqm', 'population')} | {fmt('mean', 'population')} | {pop_s:.0f} |",
             f"| single runs ({args.jobs} at a time) | {fmt('iqm', 'single')} | {fmt('mean', 'single')} | {single_s:.0f} |",
             "", f"P(population > single) = {p[0]:.2f} [{p[1]:.2f}, {p[2]:.2f}]. Per seed (population / single): "
             + ", ".join(f"{s}: {a:.0f}/{b:.0f}" for s, a, b in zip(seeds, pop, alone)) + "."]
    print("\n".join(lines))
    if args.write:
        write_section(args.write, "\n".join(lines), "population_vs_single")


if __name__ == "__main__":
    main()
