"""Env backends side by side: `--env-backend gymnasium` vs `vector` vs `envpool`, whole training runs.

Each (env, backend, seed) trains in its own fresh subprocess, one at a time, with one torch thread;
the timed span is ``rlkit.train`` (envs and model built, rollouts and updates; no evaluation:
``eval_episodes=0``). Evaluation returns afterwards (Gymnasium's env, 10 episodes) check that the
backends learn alike.

    python benchmarks/env_backends.py                          # CartPole 100k (3 backends), Pong 20k (2), 2 seeds
    python benchmarks/env_backends.py --envs cartpole --seeds 1 --write ""   # a look, no figure written

CartPole: the cartpole preset (4 envs x 128 steps), and with 64 envs x 8 steps (the same batch
of 512 in 4 minibatches), where one vectorized step serves many envs. Pong: the atari preset on ALE/Pong-v5 at 8 envs
x 128 steps (a training budget far below learning; the steps/s is what is measured).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np
from common import README, WRITE_HELP, emit

from rlkit.ablation.measurements import ExtendList

SETTINGS = {
    "cartpole": dict(preset="cartpole", env="CartPole-v1", steps=100_000, backends=("gymnasium", "vector", "envpool")),
    "cartpole-64": dict(preset="cartpole", env="CartPole-v1", steps=100_000, backends=("gymnasium", "vector", "envpool"),
                        num_envs=64, num_steps=8),
    "pong": dict(preset="atari", env="ALE/Pong-v5", steps=20_480, backends=("gymnasium", "envpool")),
}


def worker(name: str, backend: str, seed: int, steps: int) -> dict:
    import torch._dynamo  # noqa: F401  (torch.optim imports it on the first optimizer; outside the timed span)

    import rlkit

    s = SETTINGS[name]
    sizes = {k: s[k] for k in ("num_envs", "num_steps") if k in s}
    cfg = rlkit.preset(s["preset"], env=s["env"], env_backend=backend, seed=seed, total_steps=steps, eval_episodes=0,
                       **sizes,
                       checkpoint_every=10**9, progress=False, logdir="/tmp/rlkit-bench-backends",
                       run_name=f"{name}-{backend}-{seed}-{time.time_ns()}")
    start = time.perf_counter()
    result = rlkit.train(cfg)
    seconds = time.perf_counter() - start
    atari = name == "pong"
    evaluation = result.agent.evaluate(cfg.env, 1 if atari else 10, seed=10_000, max_steps=2000 if atari else None,
                                       wrappers=cfg.env_wrappers)
    return {"steps": result.total_steps, "seconds": seconds, "eval_return": evaluation.mean}


def run_worker(name: str, backend: str, seed: int, steps: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--worker", backend, "--envs", name, "--seeds", str(seed),
                          "--steps", str(steps)], capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{name} {backend} seed {seed} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", action=ExtendList, default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--seeds", nargs="+", action=ExtendList, type=int, default=[1, 2])
    parser.add_argument("--steps", type=int, default=None, help="override the per-env step budget")
    parser.add_argument("--write", default=README, help=WRITE_HELP)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.envs[0], args.worker, args.seeds[0], args.steps)))
        return
    rows = []
    for name in args.envs:
        steps, backends = args.steps or SETTINGS[name]["steps"], SETTINGS[name]["backends"]
        res: dict[str, list[dict]] = {b: [] for b in backends}
        for seed in args.seeds:
            for backend in backends:  # alternated, so drift in machine load hits every backend
                r = run_worker(name, backend, seed, steps)
                res[backend].append(r)
                print(f"{name} {backend} seed {seed}: {r['steps'] / r['seconds']:.0f} steps/s, "
                      f"eval {r['eval_return']:.1f}", flush=True)
        sps = {b: float(np.mean([r["steps"] / r["seconds"] for r in rs])) for b, rs in res.items()}
        rows.append((name, steps, sps, {b: [r["eval_return"] for r in rs] for b, rs in res.items()}))
    lines = [f"### Env backends — {time.strftime('%Y-%m-%d %H:%M')}",
             f"Command: `python benchmarks/env_backends.py {' '.join(sys.argv[1:])}`  ",
             f"Machine: {platform.node()}, {platform.machine()}, {os.cpu_count()} cores, Python "
             f"{platform.python_version()}, 1 torch thread, runs one at a time\n",
             "| env | steps/run | seeds | backend | steps/s | × gymnasium | eval returns |", "|---|---|---|---|---|---|---|"]
    for name, steps, sps, ret in rows:
        for backend, v in sps.items():
            lines.append(f"| {name}: {SETTINGS[name]['env']} | {steps:,} | {len(args.seeds)} | {backend} | {v:.0f} | "
                         f"{v / sps['gymnasium']:.2f}× | {', '.join(f'{x:.0f}' for x in ret[backend])} |")
    emit(lines, args.write, "env_backends")


if __name__ == "__main__":
    main()
