"""Sample efficiency: final returns of the mujoco preset at 1M steps over several seeds.

Runs one (env, seed) at a time, appends each finished run as a JSON line to --out (runs
already there are skipped, so the script can be restarted), and with --summarize prints
a markdown table of mean, std and per-seed finals.

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
from report import ExtendList, cpu_model

import rlkit

PUBLISHED = {"Hopper-v5": "~2400", "HalfCheetah-v5": "~1450-1800", "Walker2d-v5": "~2300-3000"}


def run(env: str, seed: int, steps: int, logdir: str) -> dict:
    cfg = rlkit.preset("mujoco", env=env, seed=seed, total_steps=steps, logdir=logdir,
                       run_name=f"{env}__ppo__s{seed}__{steps}", progress=False)
    start = time.time()
    result = rlkit.train(cfg)
    return {**result.to_json(), "wall_seconds": time.time() - start, "date": time.strftime("%Y-%m-%d %H:%M"),
            "machine": f"{platform.node()}, {cpu_model()}"}


def summarize(path: Path) -> str:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    lines = ["| env | steps | seeds | final eval return mean ± std | per-seed finals | published 1M |",
             "|---|---|---|---|---|---|"]
    for env in dict.fromkeys(r["env"] for r in rows):
        finals = [r for r in rows if r["env"] == env]
        vals = np.array([r["eval_return_mean"] for r in finals])
        per_seed = ", ".join(f"s{r['seed']}: {r['eval_return_mean']:.0f}" for r in finals)
        lines.append(f"| {env} | {finals[0]['total_steps']:,} | {len(finals)} | {vals.mean():.0f} ± {vals.std():.0f} "
                     f"| {per_seed} | {PUBLISHED.get(env, '')} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", action=ExtendList, default=list(PUBLISHED))
    parser.add_argument("--seeds", nargs="+", action=ExtendList, type=int, default=[1, 2, 3])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--out", default="benchmarks/out/sample_efficiency.jsonl")
    parser.add_argument("--logdir", default="runs/sample_efficiency")
    parser.add_argument("--summarize", action="store_true")
    args = parser.parse_args()
    out = Path(args.out)
    if args.summarize:
        print(summarize(out))
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
