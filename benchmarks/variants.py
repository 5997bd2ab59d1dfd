"""Variant benchmarks: PPO vs Outer-PPO vs HP3O.

Returns (final deterministic eval over 10 episodes, mean ± std over seeds, and wall-clock):

    python benchmarks/variants.py returns --env CartPole-v1 --preset cartpole --seeds 1 2 3 4 5 --steps 100000
    python benchmarks/variants.py returns --env Hopper-v5 --preset mujoco --seeds 1 2 3 --steps 300000

Per-update overhead at equal steps (same rollout, same number of gradient steps: HP3O draws
hp3o_samples = the rollout size, with the preset's minibatches and epochs), timed in one
process, variants interleaved, median of repeats; run it on an otherwise idle machine:

    python benchmarks/variants.py overhead --preset cartpole --updates 40 --repeats 5

Each env's returns and each preset's overhead are their own figure in benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np
from common import README, WRITE_HELP, emit

import rlkit
from rlkit.ablation.measurements import ExtendList

VARIANTS = {
    "ppo": ("ppo", {}),
    "outer-lr0.5": ("outer-lr", {"outer_lr": 0.5}),
    "outer-lr1.5": ("outer-lr", {"outer_lr": 1.5}),
    "outer-nesterov": ("outer-nesterov", {}),
    "hp3o": ("hp3o", {}),
    "hp3o-plus": ("hp3o-plus", {}),
}


def returns(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = {(r["env"], r["name"], r["seed"], r["steps"]) for r in map(json.loads, out.read_text().splitlines())} \
        if out.exists() else set()
    for seed in args.seeds:
        for name in args.variants:
            if (args.env, name, seed, args.steps) in done:
                continue
            variant, overrides = VARIANTS[name]
            cfg = rlkit.preset(args.preset, variant, env=args.env, seed=seed, total_steps=args.steps,
                               logdir=args.logdir, run_name=f"{args.env}__{name}__s{seed}__{args.steps}",
                               progress=False, **overrides)
            start = time.time()
            result = rlkit.train(cfg)
            rec = {"env": args.env, "name": name, "variant": result.variant, "seed": seed, "steps": args.steps,
                   "eval_return": result.eval_return_mean, "wall_seconds": time.time() - start,
                   "date": time.strftime("%Y-%m-%d %H:%M")}
            with out.open("a") as f:
                f.write(json.dumps(rec) + "\n")
            print(json.dumps(rec), flush=True)
    rows = [r for r in map(json.loads, out.read_text().splitlines()) if r["env"] == args.env and r["steps"] == args.steps]
    lines = [f"### Variants on {args.env}, {args.steps:,} steps — {time.strftime('%Y-%m-%d %H:%M')}",
             f"Command: `python benchmarks/variants.py returns --env {args.env} --preset {args.preset} "
             f"--seeds {' '.join(map(str, args.seeds))} --steps {args.steps}`  ",
             f"Machine: {platform.node()}, {platform.machine()}; {args.note}\n",
             "| variant | seeds | final eval return mean ± std | per seed | wall-clock per run (s) |", "|---|---|---|---|---|"]
    for name in args.variants:
        rs = [r for r in rows if r["name"] == name]
        if rs:
            vals = [r["eval_return"] for r in rs]
            lines.append(f"| {rs[0]['variant']} | {len(rs)} | {np.mean(vals):.1f} ± {np.std(vals):.1f} | "
                         f"{', '.join(f'{v:.0f}' for v in vals)} | {np.mean([r['wall_seconds'] for r in rs]):.0f} |")
    emit(lines, args.write, f"variants:returns:{args.env}")


def overhead(args: argparse.Namespace) -> None:
    base = rlkit.preset(args.preset, total_steps=10**9, logdir=args.logdir, progress=False, eval_episodes=0,
                        checkpoint_every=10**12)
    configs = {
        "ppo": base,
        # sigma = 1 learns exactly as PPO, so its difference is the machinery's cost alone.
        "outer-lr1": base.replace(outer=True, outer_lr=1.0),
        "outer-lr1.5": base.replace(outer=True, outer_lr=1.5),
        "hp3o": base.replace(hp3o=True, hp3o_samples=base.batch_size),
        "hp3o-plus": base.replace(hp3o=True, hp3o_plus=True, hp3o_samples=base.batch_size),
    }
    trainers = {name: rlkit.PPOTrainer(cfg.replace(run_name=f"overhead-{name}-{time.time_ns()}"))
                for name, cfg in configs.items()}
    for t in trainers.values():  # warm-up (HP3O also fills its buffer)
        for _ in range(args.warmup):
            t.update()
            t.progress.updates_done += 1
    times: dict[str, list[float]] = {name: [] for name in trainers}
    for _ in range(args.repeats):
        for name, t in trainers.items():
            start = time.perf_counter()
            for _ in range(args.updates):
                t.update()
                t.progress.updates_done += 1
            times[name].append((time.perf_counter() - start) / args.updates)
    ppo = statistics.median(times["ppo"])
    lines = [f"### Variant overhead per update at equal steps — {time.strftime('%Y-%m-%d %H:%M')}",
             f"Command: `python benchmarks/variants.py overhead --preset {args.preset} --updates {args.updates} "
             f"--repeats {args.repeats}`  ",
             f"Machine: {platform.node()}, {platform.machine()}, 1 torch thread, nothing else running. Each update: "
             f"{base.batch_size} env steps and {base.num_minibatches * base.update_epochs} minibatch steps of "
             f"{base.batch_size // base.num_minibatches} for every variant.\n",
             "| variant | median ms / update | overhead vs PPO | target |", "|---|---|---|---|"]
    targets = {"ppo": "", "outer-lr1": "≤ 5%", "outer-lr1.5": "≤ 5%", "hp3o": "≤ 25%", "hp3o-plus": "(HP3O+; no target stated)"}
    for name, ts in times.items():
        med = statistics.median(ts)
        lines.append(f"| {configs[name].variant} | {med * 1e3:.1f} | {100 * (med / ppo - 1):+.1f}% | {targets[name]} |")
    emit(lines, args.write, f"variants:overhead:{args.preset}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="mode", required=True)
    r = sub.add_parser("returns", help="final evaluation returns of each variant over seeds")
    r.add_argument("--env", default="CartPole-v1", help="env id")
    r.add_argument("--preset", default="cartpole", help="the preset every variant starts from")
    r.add_argument("--seeds", nargs="+", action=ExtendList, type=int, default=[1, 2, 3, 4, 5], help="seeds")
    r.add_argument("--steps", type=int, default=100_000, help="env steps per run")
    r.add_argument("--variants", nargs="+", action=ExtendList, default=list(VARIANTS), choices=list(VARIANTS),
                   help="variants to run")
    r.add_argument("--out", default="benchmarks/out/variants.jsonl",
                   help="the runs' JSON lines (appended; runs already there are skipped)")
    r.add_argument("--note", default="runs one at a time", help="text for the table's Machine line")
    o = sub.add_parser("overhead", help="per-update time of each variant at equal steps, against PPO")
    o.add_argument("--preset", default="cartpole", help="the preset every variant starts from")
    o.add_argument("--updates", type=int, default=40, help="updates per timed round")
    o.add_argument("--repeats", type=int, default=5, help="timed rounds (median reported)")
    o.add_argument("--warmup", type=int, default=5, help="untimed updates first (HP3O fills its buffer)")
    for p in (r, o):
        p.add_argument("--logdir", default="/tmp/rlkit-variants", help="the runs' folder")
        p.add_argument("--write", default=README, help=WRITE_HELP)
    args = parser.parse_args()
    returns(args) if args.mode == "returns" else overhead(args)


if __name__ == "__main__":
    main()
