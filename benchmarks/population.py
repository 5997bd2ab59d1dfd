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
    python benchmarks/population.py --settings cartpole-vector --write ""   # a look, no figure written
    python benchmarks/population.py --settings cartpole-vector hopper-async --repeat 3
    python benchmarks/population.py --settings cartpole-fastest --repeat 5  # 10 seeds vs the fastest single seed
    python benchmarks/population.py --settings hopper-hp3o    # HP3O: 10 seeds, each member's own update

With ``--repeat R`` each setting's three runs go round R times, interleaved, and the table gives
each one's median wall time (this machine's speed drifts by several percent from minute to minute).
Each setting's table is its own figure in benchmarks/README.md: running some settings replaces
their figures only.
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

SETTINGS = {
    "cartpole": dict(preset="cartpole", env="CartPole-v1", steps=100_000, k=10, backend="gymnasium"),
    "cartpole-vector": dict(preset="cartpole", env="CartPole-v1", steps=100_000, k=10, backend="vector"),
    # Each side in its fastest form, in one interleaved round: one seed (and the population of one)
    # on Gymnasium's envs (four env objects step faster than one vectorized step of four), the ten
    # on the shared vectorized CartPole.
    "cartpole-fastest": dict(preset="cartpole", env="CartPole-v1", steps=100_000, k=10, backend="vector",
                             small_backend="gymnasium"),
    "hopper": dict(preset="mujoco", env="Hopper-v5", steps=100_000, k=5, backend="gymnasium"),
    # The population of K with --async-envs: the last K // 2 members' envs step in one worker process
    # beside the trainer (the second core). One seed alone and the population of one run in-process,
    # their fastest form with one env.
    "hopper-async": dict(preset="mujoco", env="Hopper-v5", steps=100_000, k=5, backend="gymnasium", async_k=True),
    # HP3O (the authors' sizes, as the HP3O MuJoCo recipe runs it) with the population of ten a
    # sweep packs: the rollout batched, each member's update its single run's own.
    "hopper-hp3o": dict(preset="mujoco", variants=("hp3o",), env="Hopper-v5", steps=100_000, k=10,
                        backend="gymnasium"),
}


def worker(name: str, k: int, steps: int) -> dict:
    import torch._dynamo  # noqa: F401  (torch.optim imports it on the first optimizer; outside the timed span)

    import rlkit
    from rlkit.gym.population import train_population

    s = SETTINGS[name]
    cfg = rlkit.preset(s["preset"], *s.get("variants", ()), env=s["env"], env_backend=_backend(s, k), total_steps=steps, eval_episodes=0,
                       checkpoint_every=10**9, progress=False, logdir="/tmp/rlkit-bench-population",
                       run_name=f"{name}-{k}-{time.time_ns()}", async_envs=bool(s.get("async_k")) and k > 1)
    start = time.perf_counter()
    if k == 0:  # one seed, the single-run trainer
        results = [rlkit.train(cfg)]
    else:
        outcomes = train_population(cfg, list(range(1, k + 1)))
        results = [o.result for o in outcomes]
    seconds = time.perf_counter() - start
    returns = [r.agent.evaluate(cfg.env, 10, seed=10_000).mean for r in results]
    return {"seconds": seconds, "steps": sum(r.total_steps for r in results), "returns": returns}


def _backend(s: dict, k: int) -> str:
    """The env backend of a run of ``k`` members (0: one seed alone)."""
    return s.get("small_backend", s["backend"]) if k <= 1 else s["backend"]


def run_worker(name: str, k: int, steps: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--worker", str(k), "--settings", name, "--steps", str(steps)],
                         capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{name} K={k} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _median(results: list[dict]) -> dict:
    """The run of median wall time (the lower middle one of an even count)."""
    return sorted(results, key=lambda r: r["seconds"])[(len(results) - 1) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", nargs="+", action=ExtendList, default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--steps", type=int, default=None, help="override the per-seed step budget")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of the three runs (medians reported)")
    parser.add_argument("--write", default=README, help=WRITE_HELP)
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        print(json.dumps(worker(args.settings[0], args.worker, args.steps)))
        return
    for name in args.settings:
        rows = setting_rows(name, args.steps, args.repeat)
        head = [f"### Many seeds in one process (population) — {time.strftime('%Y-%m-%d %H:%M')}",
                f"Command: `python benchmarks/population.py {' '.join(sys.argv[1:])}`  ",
                f"Machine: {platform.node()}, {cpu_model()}, {os.cpu_count()} cores, Python "
                f"{platform.python_version()}, 1 torch thread, runs one at a time\n",
                "| setting | steps/seed | run | wall s, median (each round) | × one seed | aggregate steps/s | "
                "members' eval returns |", "|---|---|---|---|---|---|---|"]
        emit(head + rows, args.write, f"population:{name}")


def setting_rows(name: str, steps: int | None, repeat: int) -> list[str]:
    """One setting's table rows: one seed alone, the population of one and of K, ``repeat`` rounds."""
    s = SETTINGS[name]
    steps = steps or s["steps"]
    runs = [(0, "one seed alone"), (1, "population K=1"), (s["k"], f"population K={s['k']}")]
    rounds = [[run_worker(name, k, steps) for k, _ in runs] for _ in range(max(repeat, 1))]
    medians = [_median([r[i] for r in rounds]) for i in range(len(runs))]
    rows = []
    for i, ((k, label), r) in enumerate(zip(runs, medians)):
        walls = ", ".join(f"{x[i]['seconds']:.1f}" for x in rounds)
        row = (f"| {name}: {''.join(v + ' ' for v in s.get('variants', ()))}{s['env']} ({_backend(s, k)}{', async envs' if s.get('async_k') and k > 1 else ''}) | "
               f"{steps:,} | {label} | {r['seconds']:.1f} ({walls}) | {r['seconds'] / medians[0]['seconds']:.2f}× | "
               f"{r['steps'] / r['seconds']:,.0f} | {', '.join(f'{x:.0f}' for x in r['returns'])} |")
        rows.append(row)
        print(row, flush=True)
    return rows


if __name__ == "__main__":
    main()
