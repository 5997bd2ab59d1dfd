"""Does Stable-Baselines3 learn MiniGrid-DoorKey-5x5-v0 in 100k steps outside rlkit's sweep harness?

The parity sweep (experiments/parity/minigrid.toml) saw SB3's greedy return at 0.0 in every
evaluation of every seed. This script trains SB3 PPO by hand, twice per seed: (a) with the RL
Baselines3 Zoo's own configuration for this task (minigrid's ``FlatObsWrapper`` with the mission,
``VecNormalize``, 8 envs x 128 steps, minibatches of 64, 10 epochs, lr 2.5e-4, no entropy bonus);
(b) as rlkit's sweep builds it from the ``minigrid`` preset (``build_model``). It reports the mean
training (stochastic) return of SB3's last 100 episodes and rlkit's protocol (10 greedy episodes).

    python experiments/parity/minigrid_sb3_check.py              # seed 1, 100k steps
    python experiments/parity/minigrid_sb3_check.py --seeds 1 2 --write NOTES.md   # the table appended there too
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

import numpy as np

from rlkit.ablation.measurements import ExtendList, write_section

ENV = "MiniGrid-DoorKey-5x5-v0"


def zoo(seed: int, steps: int) -> tuple[float, float]:
    from minigrid.wrappers import FlatObsWrapper
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    env = VecNormalize(make_vec_env(ENV, n_envs=8, seed=seed, wrapper_class=FlatObsWrapper), gamma=0.99)
    model = PPO("MlpPolicy", env, n_steps=128, batch_size=64, gae_lambda=0.95, gamma=0.99, n_epochs=10,
                ent_coef=0.0, learning_rate=2.5e-4, clip_range=0.2, seed=seed, device="cpu")
    model.learn(steps)
    return float(np.mean([e["r"] for e in model.ep_info_buffer])), float("nan")


def harness(seed: int, steps: int) -> tuple[float, float]:
    import rlkit
    from rlkit.ablation.baselines import build_model
    from rlkit.gym.agent import run_episodes

    cfg = rlkit.preset("minigrid", seed=seed).to_dict()
    model = build_model("sb3:ppo", cfg)
    model.learn(steps)
    env = model.get_env()

    def act(obs: np.ndarray) -> int:
        return model.predict(env.normalize_obs(obs), deterministic=True)[0].item()

    greedy = run_episodes(act, ENV, 10, 10_000, wrappers="minigrid").mean
    return float(np.mean([e["r"] for e in model.ep_info_buffer])), float(greedy)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", nargs="+", action=ExtendList, type=int, default=[1], help="seeds, each trained twice")
    parser.add_argument("--steps", type=int, default=100_000, help="env steps per training")
    parser.add_argument("--write", default="", metavar="FILE", help="also append the table to FILE (default: print only)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    lines = [f"### SB3 on MiniGrid-DoorKey-5x5 outside the sweep — {time.strftime('%Y-%m-%d %H:%M')}",
             f"Command: `python experiments/parity/minigrid_sb3_check.py {' '.join(sys.argv[1:])}`  ",
             f"Machine: {platform.node()}, {platform.machine()}, {os.cpu_count()} cores, Python "
             f"{platform.python_version()}, 1 torch thread\n",
             "| SB3 set-up | seed | steps | training return (last 100 episodes) | greedy return (10 episodes) |",
             "|---|---|---|---|---|"]
    for seed in args.seeds:
        for name, fn in (("RL Zoo configuration (FlatObsWrapper + VecNormalize)", zoo),
                         ("rlkit's sweep (minigrid preset, build_model)", harness)):
            train, greedy = fn(seed, args.steps)
            row = f"| {name} | {seed} | {args.steps:,} | {train:.3f} | {'—' if np.isnan(greedy) else f'{greedy:.3f}'} |"
            lines.append(row)
            print(row, flush=True)
    if args.write:
        write_section(args.write, "\n".join(lines))


if __name__ == "__main__":
    main()
