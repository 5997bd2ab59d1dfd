"""Plug-in objectives against the default one: steps/s of PPO's clipped surrogate (the fused
kernels) and of the PPO paper's other objectives (the plain surrogate, the fixed and the adaptive
KL penalty: the autograd path), one seed alone and a population of ``--seeds``.

Each measurement trains in its own fresh subprocess, one at a time, with one torch thread; the
timed span is the whole training (envs and models built, rollouts and updates; no evaluation, no
checkpoint before the end). The table gives each objective's steps/s and its ratio to the
default's in the same kind of run (alone, or the population). Run it on an otherwise idle machine:

    python benchmarks/objectives.py                     # Hopper-v5, 20,480 steps per seed
    python benchmarks/objectives.py --objectives ppo kl-fixed --seeds 1 2 3 4 5 --repeat 3
    python benchmarks/objectives.py --steps 2048         # a quick look

It prints the table and replaces its figure in benchmarks/README.md (``--write ''``: print only).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

from common import README, WRITE_HELP, emit

from rlkit.ablation.measurements import ExtendList, cpu_model

OBJECTIVES = {
    "ppo": {},
    "no-clip": {"unclipped": True},
    "kl-fixed": {"kl_fixed": True, "kl_beta": 1.0},
    "kl-adaptive": {"kl_adaptive": True, "kl_dtarg": 0.01},
    "anneal-clip": {"anneal_clip": True},
}
"""Name -> the fields that choose the objective (``ppo``: the default, PPO's clipped surrogate)."""


def worker(objective: str, env: str, preset: str, steps: int, seeds: list[int]) -> dict:
    import torch._dynamo  # noqa: F401  (torch.optim imports it on the first optimizer; outside the timed span)

    import rlkit
    from rlkit.gym.population import train_population

    cfg = rlkit.preset(preset, env=env, total_steps=steps, eval_episodes=0, checkpoint_every=10**9, progress=False,
                       torch_threads=1, logdir="/tmp/rlkit-bench-objectives",
                       run_name=f"{objective}-{len(seeds)}-{time.time_ns()}", **OBJECTIVES[objective])
    start = time.perf_counter()
    if len(seeds) == 1:  # one seed, the single-run trainer
        results = [rlkit.train(cfg.replace(seed=seeds[0]))]
    else:
        results = [o.result for o in train_population(cfg, seeds)]
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "steps": sum(r.total_steps for r in results), "variant": cfg.variant}


def run_worker(args: argparse.Namespace, objective: str, seeds: list[int]) -> dict:
    command = [sys.executable, __file__, "--worker", objective, "--env", args.env, "--preset", args.preset,
               "--steps", str(args.steps), "--seeds", *map(str, seeds)]
    out = subprocess.run(command, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{objective} with seeds {seeds} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(args: argparse.Namespace) -> list[str]:
    """Every objective alone and as a population, ``--repeat`` rounds interleaved; medians."""
    kinds = [("one seed", args.seeds[:1]), (f"population of {len(args.seeds)}", args.seeds)]
    rounds = [[[run_worker(args, o, seeds) for o in args.objectives] for _, seeds in kinds]
              for _ in range(max(args.repeat, 1))]
    lines = [f"### Plug-in objectives on {args.env}, {args.steps:,} steps per seed — {time.strftime('%Y-%m-%d %H:%M')}",
             f"Command: `python benchmarks/objectives.py {' '.join(sys.argv[1:])}`  ",
             f"Machine: {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}, 1 torch thread, "
             f"runs one at a time; medians of {max(args.repeat, 1)} round(s)\n",
             "| objective | run | steps/s (each round) | × the default's |", "|---|---|---|---|"]
    for i, (kind, _) in enumerate(kinds):
        speeds = [[r[i][j]["steps"] / r[i][j]["seconds"] for r in rounds] for j in range(len(args.objectives))]
        medians = [sorted(s)[(len(s) - 1) // 2] for s in speeds]
        default = medians[args.objectives.index("ppo")] if "ppo" in args.objectives else None
        for j, objective in enumerate(args.objectives):
            ratio = f"{medians[j] / default:.2f}×" if default else "n/a"
            row = (f"| {rounds[0][i][j]['variant']} | {kind} | {medians[j]:,.0f} "
                   f"({', '.join(f'{s:,.0f}' for s in speeds[j])}) | {ratio} |")
            lines.append(row)
            print(row, flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--objectives", nargs="+", action=ExtendList, default=list(OBJECTIVES), choices=list(OBJECTIVES))
    parser.add_argument("--env", default="Hopper-v5")
    parser.add_argument("--preset", default="mujoco")
    parser.add_argument("--steps", type=int, default=20_480, help="environment steps per seed")
    parser.add_argument("--seeds", nargs="+", action=ExtendList, type=int, default=[1, 2, 3, 4, 5],
                        help="the population's seeds (the first one is also trained alone)")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of every run (medians reported)")
    parser.add_argument("--write", default=README, help=WRITE_HELP)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        print(json.dumps(worker(args.worker, args.env, args.preset, args.steps, args.seeds)))
        return
    emit(table(args), args.write, "objectives")


if __name__ == "__main__":
    main()
