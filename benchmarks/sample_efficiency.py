"""Sample efficiency: final returns of the mujoco preset at 1M steps over several seeds.

Runs one (env, seed) at a time, appends each finished run as a JSON line to --out (runs
already there are skipped, so the script can be restarted), and with --summarize prints
a markdown table of mean, std and per-seed finals: its figure in benchmarks/README.md.

    python benchmarks/sample_efficiency.py --envs Hopper-v5 HalfCheetah-v5 Walker2d-v5 --seeds 1 2 3
    python benchmarks/sample_efficiency.py --summarize
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np
from common import README, WRITE_HELP, emit

import rlkit
from rlkit.ablation.measurements import ExtendList, cpu_model

PUBLISHED = {"Hopper-v5": "~2400", "HalfCheetah-v5": "~1450-1800", "Walker2d-v5": "~2300-3000"}


def run(env: str, seed: int, steps: int, logdir: str) -> dict:
    cfg = rlkit.preset("mujoco", env=env, seed=seed, total_steps=steps, logdir=logdir,
                       run_name=f"{env}__ppo__s{seed}__{steps}", progress=False)
    start = time.time()
    result = rlkit.train(cfg)
    return {**result.to_json(), "wall_seconds": time.time() - start, "date": time.strftime("%Y-%m-%d %H:%M"),
            "machine": f"{platform.node()}, {cpu_model()}"}


def summarize(path: Path) -> list[str]:
    """The figure: per env, the final evaluation returns' mean, std and per-seed values, beside the
    published 1M-step references, with the runs' dates and machines."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    dates = sorted(r["date"] for r in rows if r.get("date"))
    span = f" — {dates[0]}" + (f" to {dates[-1]}" if dates[-1] != dates[0] else "") if dates else ""
    lines = [f"### Sample efficiency, mujoco preset{span}",
             f"Command: `python benchmarks/sample_efficiency.py --summarize --out {path}`  ",
             f"Machine: {'; '.join(dict.fromkeys(r.get('machine', 'not recorded') for r in rows))}; runs one at a time\n",
             "| env | steps | seeds | final eval return mean ± std | per-seed finals | published 1M |",
             "|---|---|---|---|---|---|"]
    for env in dict.fromkeys(r["env"] for r in rows):
        finals = [r for r in rows if r["env"] == env]
        vals = np.array([r["eval_return_mean"] for r in finals])
        per_seed = ", ".join(f"s{r['seed']}: {r['eval_return_mean']:.0f}" for r in finals)
        lines.append(f"| {env} | {finals[0]['total_steps']:,} | {len(finals)} | {vals.mean():.0f} ± {vals.std():.0f} "
                     f"| {per_seed} | {PUBLISHED.get(env, '')} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", action=ExtendList, default=list(PUBLISHED), help="MuJoCo env ids")
    parser.add_argument("--seeds", nargs="+", action=ExtendList, type=int, default=[1, 2, 3], help="seeds of each env")
    parser.add_argument("--steps", type=int, default=1_000_000, help="env steps per run")
    parser.add_argument("--out", default="benchmarks/out/sample_efficiency.jsonl",
                        help="the runs' JSON lines (appended; runs already there are skipped)")
    parser.add_argument("--logdir", default="runs/sample_efficiency", help="the runs' folder")
    parser.add_argument("--summarize", action="store_true", help="print (and --write) the table of --out's runs")
    parser.add_argument("--write", default=README, help="with --summarize: " + WRITE_HELP)
    args = parser.parse_args()
    out = Path(args.out)
    if args.summarize:
        emit(summarize(out), args.write, "sample_efficiency")
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():
        done = {(r["env"], r["seed"], r["total_steps"]) for r in map(json.loads, out.read_text().splitlines())}
    for seed in args.seeds:  # seed-major: every env gets a first seed before any gets a third
        for env in args.envs:
            steps = args.steps - args.steps % 2048
            if (env, seed, steps) in done:
                continue
            record = run(env, seed, args.steps, args.logdir)
            with out.open("a") as f:
                f.write(json.dumps(record) + "\n")
            print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
