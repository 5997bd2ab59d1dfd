"""Throughput: rlkit PPO vs Stable-Baselines3 PPO throughput at identical settings.

Each (framework, env, seed) trains in its own fresh subprocess, one at a time, with one
torch thread. The timed span is the same for both: building the vectorized envs and the
model, then learning for --steps env steps (imports, torch's lazy first-optimizer import
included, and evaluation are excluded). Both agents
are then evaluated by the same deterministic loop (10 episodes) to check equal learning.

    python benchmarks/throughput.py                      # CartPole (100k) and Hopper (20,480), 3 seeds
    python benchmarks/throughput.py --envs cartpole --seeds 1 --write ""   # a quick look, no figure written

Settings: cartpole preset = 4 envs x 128 steps, 4 epochs x 4 minibatches (128), lr 2.5e-4
annealed, ent 0.01; mujoco preset = 1 env x 2048 steps, 10 epochs x 32 minibatches (64),
lr 3e-4 annealed, obs+reward normalization; both: 64x64 tanh actor and critic, value
clipping 0.2 (SB3 clip_range_vf), grad clip 0.5, Adam eps 1e-5.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time

import numpy as np
from common import README, WRITE_HELP, emit

from rlkit.ablation.measurements import ExtendList, cpu_model

SETTINGS = {
    "cartpole": dict(env="CartPole-v1", preset="cartpole", steps=100_000),
    "hopper": dict(env="Hopper-v5", preset="mujoco", steps=20_480),
}


def evaluate(act, env_id: str, episodes: int = 10, seed: int = 10_000) -> float:
    import gymnasium as gym

    env = gym.make(env_id)
    returns = []
    for i in range(episodes):
        obs, _ = env.reset(seed=seed + i)
        done, total = False, 0.0
        while not done:
            obs, r, term, trunc, _ = env.step(act(obs))
            total += float(r)
            done = term or trunc
        returns.append(total)
    return float(np.mean(returns))


def _import_lazy_torch_modules() -> None:
    """torch.optim imports torch._dynamo (~2 s here) on the first optimizer built; both
    frameworks build one, and imports are outside the timed span for both."""
    import torch._dynamo  # noqa: F401


def worker_rlkit(name: str, seed: int, steps: int, kernels: str = "auto") -> dict:
    import rlkit

    _import_lazy_torch_modules()
    s = SETTINGS[name]
    cfg = rlkit.preset(s["preset"], env=s["env"], seed=seed, total_steps=steps, eval_episodes=0,
                       logdir="/tmp/rlkit-bench", run_name=f"{name}-{seed}-{time.time_ns()}", progress=False,
                       checkpoint_every=10**9, kernels=kernels)
    start = time.perf_counter()
    result = rlkit.train(cfg)
    seconds = time.perf_counter() - start
    return {"steps": result.total_steps, "seconds": seconds, "eval_return": evaluate(result.act, s["env"])}


def worker_sb3(name: str, seed: int, steps: int) -> dict:
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    _import_lazy_torch_modules()
    torch.set_num_threads(1)
    s = SETTINGS[name]
    start = time.perf_counter()
    if name == "cartpole":
        env = make_vec_env(s["env"], n_envs=4, seed=seed)
        hp = dict(n_steps=128, batch_size=128, n_epochs=4, learning_rate=lambda f: 2.5e-4 * f, ent_coef=0.01)
    else:
        env = VecNormalize(make_vec_env(s["env"], n_envs=1, seed=seed), gamma=0.99, clip_obs=10.0)
        hp = dict(n_steps=2048, batch_size=64, n_epochs=10, learning_rate=lambda f: 3e-4 * f, ent_coef=0.0)
    model = PPO("MlpPolicy", env, gamma=0.99, gae_lambda=0.95, clip_range=0.2, clip_range_vf=0.2, vf_coef=0.5,
                max_grad_norm=0.5, seed=seed, device="cpu", verbose=0,
                policy_kwargs=dict(net_arch=dict(pi=[64, 64], vf=[64, 64]), activation_fn=torch.nn.Tanh), **hp)
    model.learn(total_timesteps=steps)
    seconds = time.perf_counter() - start

    def act(obs):
        if isinstance(env, VecNormalize):
            obs = env.normalize_obs(obs)
        action, _ = model.predict(obs, deterministic=True)
        return np.clip(action, env.action_space.low, env.action_space.high) if name == "hopper" else action

    return {"steps": int(model.num_timesteps), "seconds": seconds, "eval_return": evaluate(act, s["env"])}


def run_worker(framework: str, name: str, seed: int, steps: int, kernels: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--worker", framework, "--envs", name, "--seeds", str(seed),
                          "--steps", str(steps), "--kernels", kernels], capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{framework} {name} seed {seed} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", action=ExtendList, default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--seeds", nargs="+", action=ExtendList, type=int, default=[1, 2, 3])
    parser.add_argument("--steps", type=int, default=None, help="override the per-env default step budget")
    parser.add_argument("--frameworks", nargs="+", action=ExtendList, default=["rlkit", "sb3"], choices=["rlkit", "sb3"])
    parser.add_argument("--write", default=README, help=WRITE_HELP)
    parser.add_argument("--kernels", default="auto", choices=["auto", "plain", "fast"],
                        help="rlkit's loss/optimizer implementation (TrainConfig.kernels)")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        if args.worker == "rlkit":
            print(json.dumps(worker_rlkit(args.envs[0], args.seeds[0], args.steps, args.kernels)))
        else:
            print(json.dumps(worker_sb3(args.envs[0], args.seeds[0], args.steps)))
        return

    rows = []
    for name in args.envs:
        steps = args.steps or SETTINGS[name]["steps"]
        res: dict[str, list[dict]] = {f: [] for f in args.frameworks}
        for seed in args.seeds:
            for fw in args.frameworks:  # alternate frameworks so drift in machine load hits both
                r = run_worker(fw, name, seed, steps, args.kernels)
                res[fw].append(r)
                print(f"{name} {fw} seed {seed}: {r['steps'] / r['seconds']:.0f} steps/s, "
                      f"eval {r['eval_return']:.1f}", flush=True)
        sps = {fw: float(np.mean([r["steps"] / r["seconds"] for r in rs])) for fw, rs in res.items()}
        ret = {fw: [r["eval_return"] for r in rs] for fw, rs in res.items()}
        ratio = sps["rlkit"] / sps["sb3"] if {"rlkit", "sb3"} <= set(sps) else float("nan")
        print(f"{name}: " + ", ".join(f"{fw} {v:.0f} steps/s" for fw, v in sps.items()) + f", ratio {ratio:.2f}x")
        rows.append((name, steps, sps, ret, ratio))

    lines = [f"### Throughput vs SB3 — {time.strftime('%Y-%m-%d %H:%M')}",
             f"Command: `python benchmarks/throughput.py {' '.join(sys.argv[1:])}`  ",
             f"Machine: {platform.node()}, {cpu_model()}, {__import__('os').cpu_count()} cores, "
             f"Python {platform.python_version()}, 1 torch thread, runs one at a time, "
             f"rlkit kernels={args.kernels}\n",
             "| env | steps/run | seeds | rlkit steps/s | SB3 steps/s | ratio | rlkit eval returns | SB3 eval returns |",
             "|---|---|---|---|---|---|---|---|"]
    for name, steps, sps, ret, ratio in rows:
        fmt = lambda xs: f"{np.mean(xs):.1f} ± {np.std(xs):.1f} ({', '.join(f'{x:.0f}' for x in xs)})"  # noqa: E731
        lines.append(f"| {SETTINGS[name]['env']} | {steps:,} | {len(args.seeds)} | {sps.get('rlkit', float('nan')):.0f} "
                     f"| {sps.get('sb3', float('nan')):.0f} | {ratio:.2f}× | {fmt(ret.get('rlkit', [np.nan]))} "
                     f"| {fmt(ret.get('sb3', [np.nan]))} |")
    emit(lines, args.write, "throughput")


if __name__ == "__main__":
    main()
