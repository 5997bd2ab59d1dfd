"""Recurrent PPO speed: rlkit's ``--memory lstm`` against sb3-contrib's RecurrentPPO at equal
settings, and against rlkit's own MLP policy on the same partially observed env.

Each (implementation, env, seed) trains in its own fresh subprocess, one at a time, with one torch
thread; the timed span is building the envs and the model, then learning for --steps env steps
(imports and evaluation excluded). Both recurrent agents are then evaluated the same way (10
greedy episodes, the state carried through each) as a check that they learn alike.

    python benchmarks/recurrent.py                      # CartPoleNoVel and PendulumNoVel, one seed
    python benchmarks/recurrent.py --envs cartpole --steps 20480 --write ""   # a quick look

Settings (the same for every implementation): 8 envs x 128 steps, 4 epochs of 4 minibatches
(256 steps: 2 whole env sequences each), LSTM of 64 units before each of actor and critic, 64x64
tanh MLPs, lr 3e-4, gamma 0.99, lambda 0.95, clip 0.2, ent 0.0, grad clip 0.5; the observation
without its velocities (``--env-wrappers no-velocity``).
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

from rlkit.ablation.measurements import ExtendList, cpu_model

ENVS = {"cartpole": "CartPole-v1", "pendulum": "Pendulum-v1"}
SETTINGS = dict(num_envs=8, num_steps=128, update_epochs=4, num_minibatches=4, learning_rate=3e-4, gamma=0.99,
                gae_lambda=0.95, clip_coef=0.2, ent_coef=0.0, max_grad_norm=0.5, memory_size=64,
                hidden_sizes=(64, 64), anneal_lr=False, env_wrappers="no-velocity")
IMPLEMENTATIONS = ("rlkit-lstm", "recurrent-ppo", "rlkit-mlp")


def config(name: str, env: str, seed: int, steps: int):  # type: ignore[no-untyped-def]
    import rlkit

    memory = "" if name == "rlkit-mlp" else "lstm"
    return rlkit.TrainConfig(env=ENVS[env], seed=seed, total_steps=steps, memory=memory, eval_episodes=10,
                             progress=False, logdir="/tmp/rlkit-bench", run_name=f"{name}-{env}-{time.time_ns()}",
                             checkpoint_every=10**9, **SETTINGS)


def worker(name: str, env: str, seed: int, steps: int) -> dict:
    import torch._dynamo  # noqa: F401  (torch.optim imports it with the first optimizer: outside the span)

    import rlkit

    cfg = config(name, env, seed, steps)
    if name.startswith("rlkit"):
        start = time.perf_counter()
        result = rlkit.train(cfg.replace(eval_episodes=0))
        seconds = time.perf_counter() - start
        evaluation = result.agent.evaluate(cfg.env, 10, seed=10_000, wrappers=cfg.env_wrappers)
        return {"steps": result.total_steps, "seconds": seconds, "eval_return": evaluation.mean}
    import torch

    from rlkit.ablation.baselines import _greedy, build_model
    from rlkit.gym.evaluation import run_episodes

    torch.set_num_threads(1)
    start = time.perf_counter()
    model = build_model("sb3-contrib:recurrent-ppo", cfg.to_dict())
    model.learn(total_timesteps=steps)
    seconds = time.perf_counter() - start
    act, start_episode = _greedy(model, "sb3-contrib:recurrent-ppo")
    evaluation = run_episodes(act, cfg.env, 10, 10_000, wrappers=cfg.env_wrappers, start_episode=start_episode)
    return {"steps": int(model.num_timesteps), "seconds": seconds, "eval_return": evaluation.mean}


def run_worker(name: str, env: str, seed: int, steps: int) -> dict:
    out = subprocess.run([sys.executable, __file__, "--worker", name, "--envs", env, "--seeds", str(seed),
                          "--steps", str(steps)], capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{name} {env} seed {seed} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", action=ExtendList, default=list(ENVS), choices=list(ENVS))
    parser.add_argument("--seeds", nargs="+", action=ExtendList, type=int, default=[1])
    parser.add_argument("--steps", type=int, default=51_200, help="env steps per run (whole rollouts of 1,024)")
    parser.add_argument("--write", default=README, help=WRITE_HELP)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.envs[0], args.seeds[0], args.steps)))
        return
    rows = []
    for env in args.envs:
        res: dict[str, list[dict]] = {n: [] for n in IMPLEMENTATIONS}
        for seed in args.seeds:
            for name in IMPLEMENTATIONS:
                r = run_worker(name, env, seed, args.steps)
                res[name].append(r)
                print(f"{env} {name} seed {seed}: {r['steps'] / r['seconds']:.0f} steps/s, "
                      f"eval {r['eval_return']:.1f}", flush=True)
        sps = {n: float(np.mean([r["steps"] / r["seconds"] for r in rs])) for n, rs in res.items()}
        ret = {n: float(np.mean([r["eval_return"] for r in rs])) for n, rs in res.items()}
        rows.append((env, sps, ret))
    lines = [f"### Recurrent PPO vs RecurrentPPO — {time.strftime('%Y-%m-%d %H:%M')}",
             f"Command: `python benchmarks/recurrent.py {' '.join(sys.argv[1:])}`  ",
             f"Machine: {platform.node()}, {cpu_model()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
             f"1 torch thread, runs one at a time, {args.steps:,} steps per run, seeds {args.seeds}\n",
             "| env (no velocities) | rlkit LSTM steps/s | RecurrentPPO steps/s | ratio | rlkit MLP steps/s | "
             "LSTM cost vs MLP | eval: rlkit LSTM / RecurrentPPO / rlkit MLP |",
             "|---|---|---|---|---|---|---|"]
    for env, sps, ret in rows:
        lines.append(f"| {ENVS[env]} | {sps['rlkit-lstm']:.0f} | {sps['recurrent-ppo']:.0f} | "
                     f"{sps['rlkit-lstm'] / sps['recurrent-ppo']:.2f}× | {sps['rlkit-mlp']:.0f} | "
                     f"{sps['rlkit-mlp'] / sps['rlkit-lstm']:.2f}× slower | {ret['rlkit-lstm']:.1f} / "
                     f"{ret['recurrent-ppo']:.1f} / {ret['rlkit-mlp']:.1f} |")
    emit(lines, args.write, "recurrent")


if __name__ == "__main__":
    main()
