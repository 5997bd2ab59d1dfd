"""Many seeds in one process: a population of K seeds against one seed trained alone, side by side.

Each measurement trains in its own fresh subprocess, one at a time, with one torch thread; the
timed span is the whole training (envs and models built, rollouts and updates; no evaluation:
``eval_episodes=0``, no checkpoint before the end). For every setting it runs: one seed alone
(``rlkit.train``), the population of one (``train_population`` with K = 1: the per-update overhead
of the population's path) and the population of K; the ratio of the population's wall time to the
single seed's is what the issue's targets are written in (10 seeds in <= 2.5x one seed's time on
CartPole; 5 in <= 3x on Hopper). Each member's mean evaluation return (10 episodes, afterwards) is
printed to show the members learn.

    python benchmarks/population.py                           # CartPole 100k x 10 seeds, Hopper 100k x 5
    python benchmarks/population.py --settings cartpole-vector --write ""
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

SETTINGS = {
    "cartpole": dict(preset="cartpole", env="CartPole-v1", steps=100_000, k=10, backend="gymnasium"),
    "cartpole-vector": dict(preset="cartpole", env="CartPole-v1", steps=100_000, k=10, backend="vector"),
    "hopper": dict(preset="mujoco", env="Hopper-v5", steps=100_000, k=5, backend="gymnasium"),
}


def worker(name: str, k: int, steps: int) -> dict:
    import torch._dynamo  # noqa: F401  (torch.optim imports it on the first optimizer; outside the timed span)

    import rlkit
    from rlkit.gym.population_start import train_population

    s = SETTINGS[name]
    cfg = rlkit.preset(s["preset"], env=s["env"], env_backend=s["backend"], total_steps=steps, eval_episodes=0,
                       checkpoint_every=10**9, progress=False, logdir="/tmp/rlkit-bench-population",
                       run_name=f"{name}-{k}-{time.time_ns()}")
    start = time.perf_counter()
    if k == 0:  # one seed, the single-run trainer
        results = [rlkit.train(cfg)]
    else:
        outcomes = train_population(cfg, list(range(1, k + 1)))
        results = [o.result for o in outcomes]
    seconds = time.perf_counter() - start
    returns = [r.agent.evaluate(cfg.env, 10, seed=10_000).mean for r in results]
    return {"seconds": seconds, "steps": sum(r.total_steps for r in results), "returns": returns}


def run_worker(name: str, k: int, steps: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--worker", str(k), "--settings", name, "--steps", str(steps)],
                         capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{name} K={k} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--steps", type=int, default=None, help="override the per-seed step budget")
    parser.add_argument("--write", default="benchmarks/RESULTS.md", help="append a section here ('' to skip)")
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        print(json.dumps(worker(args.settings[0], args.worker, args.steps)))
        return
    lines = [f"\n### Many seeds in one process (population) — {time.strftime('%Y-%m-%d %H:%M')}",
             f"Command: `python benchmarks/population.py {' '.join(sys.argv[1:])}`  ",
             f"Machine: {platform.node()}, {platform.machine()}, {os.cpu_count()} cores, Python "
             f"{platform.python_version()}, 1 torch thread, runs one at a time\n",
             "| setting | steps/seed | run | wall s | × one seed | aggregate steps/s | members' eval returns |",
             "|---|---|---|---|---|---|---|"]
    for name in args.settings:
        s = SETTINGS[name]
        steps = args.steps or s["steps"]
        one = run_worker(name, 0, steps)
        for label, k, r in [("one seed alone", 0, one), ("population K=1", 1, run_worker(name, 1, steps)),
                            (f"population K={s['k']}", s["k"], run_worker(name, s["k"], steps))]:
            row = (f"| {name}: {s['env']} ({s['backend']}) | {steps:,} | {label} | {r['seconds']:.1f} | "
                   f"{r['seconds'] / one['seconds']:.2f}× | {r['steps'] / r['seconds']:,.0f} | "
                   f"{', '.join(f'{x:.0f}' for x in r['returns'])} |")
            lines.append(row)
            print(row, flush=True)
    if args.write:
        with open(args.write, "a") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
