"""Large populations with the network on a GPU and the environments on the CPU: aggregate steps/s.

Each measurement trains in its own fresh subprocess (one torch thread, ``eval_episodes=0``, no
checkpoint before the end), one at a time. For every setting it runs the population sizes given
(``--sizes``) with ``device=cuda``, and one seed with ``device=cpu`` as the CPU baseline on the
same machine. Reported: the wall time of the whole call (members built, trained, written), the
aggregate env steps per second over it, and over the training loop alone (the members' own
``steps_per_second`` times K: the loop steps every member at once). A run that outlives
``--timeout`` seconds is reported as such. Each setting's table is its own figure in
benchmarks/README.md.

    python benchmarks/population_gpu.py
    python benchmarks/population_gpu.py --settings cartpole --sizes 1 64 256 --steps 20000
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

from rlkit.ablation.measurements import ExtendList

SETTINGS = {
    "cartpole": dict(preset="cartpole", env="CartPole-v1", backend="vector", steps=20_000, sizes=(1, 64, 256)),
    "hopper": dict(preset="mujoco", env="Hopper-v5", backend="gymnasium", steps=4096, sizes=(1, 16, 64)),
}


def worker(name: str, k: int, steps: int, device: str) -> dict:
    import torch._dynamo  # noqa: F401  (outside the timed span, as in benchmarks/population.py)

    import rlkit
    from rlkit.gym.population import train_population

    s = SETTINGS[name]
    cfg = rlkit.preset(s["preset"], env=s["env"], env_backend=s["backend"], total_steps=steps, eval_episodes=0,
                       checkpoint_every=10**9, progress=False, device=device, logdir="/tmp/rlkit-bench-population-gpu",
                       run_name=f"{name}-{k}-{device}-{time.time_ns()}")
    start = time.perf_counter()
    outcomes = train_population(cfg, list(range(1, k + 1)))
    seconds = time.perf_counter() - start
    results = [o.result for o in outcomes if o.result is not None]
    return {"seconds": seconds, "steps": sum(r.total_steps for r in results), "failed": k - len(results),
            "loop_steps_per_second": sum(r.steps_per_second for r in results)}


def measure(name: str, k: int, steps: int, device: str, timeout: float) -> dict | None:
    try:
        out = subprocess.run([sys.executable, __file__, "--worker", str(k), "--settings", name, "--steps", str(steps),
                              "--device", device], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    if out.returncode:
        print(f"{name} K={k} on {device} failed:\n{out.stderr[-3000:]}", flush=True)
        return {"error": (out.stderr.strip().splitlines() or ["no output"])[-1][:200]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def gpu_name() -> str:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no CUDA device"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", nargs="+", action=ExtendList, default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--sizes", nargs="+", action=ExtendList, type=int, default=None, help="population sizes (default: per setting)")
    parser.add_argument("--steps", type=int, default=None, help="steps per member (default: per setting)")
    parser.add_argument("--timeout", type=float, default=240.0, help="seconds one run may take")
    parser.add_argument("--write", default=README, help=WRITE_HELP)
    parser.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        print(json.dumps(worker(args.settings[0], args.worker, args.steps, args.device)))
        return
    for name in args.settings:
        rows = setting_rows(name, args)
        emit([f"### Populations with the network on the GPU — {time.strftime('%Y-%m-%d %H:%M')}",
              f"Command: `python benchmarks/population_gpu.py {' '.join(sys.argv[1:])}`  ",
              f"Machine: {platform.node()}, {platform.machine()}, {os.cpu_count()} cores, {gpu_name()}, Python "
              f"{platform.python_version()}, 1 torch thread, runs one at a time\n",
              "| setting | steps/member | network on | K | wall s | aggregate steps/s (wall) | aggregate steps/s (loop) |",
              "|---|---|---|---|---|---|---|"] + rows, args.write, f"population_gpu:{name}")


def setting_rows(name: str, args: argparse.Namespace) -> list[str]:
    """One setting's table rows: one seed with the network on the CPU, then each population size on CUDA."""
    s = SETTINGS[name]
    steps = args.steps or s["steps"]
    rows = []
    for device, k in [("cpu", 1)] + [("cuda", k) for k in (args.sizes or s["sizes"])]:
        r = measure(name, k, steps, device, args.timeout)
        label = f"{name}: {s['env']} ({s['backend']})"
        if r is None:
            row = f"| {label} | {steps:,} | {device} | {k} | > {args.timeout:.0f} (stopped) | – | – |"
        elif "error" in r:
            row = f"| {label} | {steps:,} | {device} | {k} | failed: {r['error']} | – | – |"
        else:
            failed = f" ({r['failed']} failed)" if r["failed"] else ""
            row = (f"| {label} | {steps:,} | {device} | {k}{failed} | {r['seconds']:.1f} | "
                   f"{r['steps'] / r['seconds']:,.0f} | {r['loop_steps_per_second']:,.0f} |")
        print(row, flush=True)
        rows.append(row)
    return rows


if __name__ == "__main__":
    main()
