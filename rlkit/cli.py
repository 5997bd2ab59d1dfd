"""``rlkit train``, ``eval``, ``rlhf`` and ``rm train``: flags are the fields of the configs.

Every user-facing error is an :class:`rlkit.errors.RlkitError`: one line, exit code 2.
"""

from __future__ import annotations

import argparse
import json
import sys

import tyro

from rlkit.core.config import deferred_validation
from rlkit.errors import ConfigError, RlkitError
from rlkit.gym.config import PRESETS, TrainConfig, preset

TYRO_CONFIG = (tyro.conf.OmitArgPrefixes,)
"""Flags stay flat (``--clip-coef``) although the PPO and variant fields are composed sub-configs."""

USAGE = """usage: rlkit train [--preset NAME [NAME ...]] [FLAGS]   (rlkit train --help lists every flag)
       rlkit eval RUN_DIR [--episodes N] [--seed S]
       rlkit rlhf --policy MODEL --prompts FILE --reward-model MODEL [FLAGS]
       rlkit rm train --backbone MODEL --data PREFS.jsonl --output DIR [FLAGS]"""


def _train(argv: list[str]) -> int:
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--preset", nargs="+", default=[])
    known, rest = pre.parse_known_args(argv)
    default = preset(*known.preset) if known.preset else TrainConfig()
    description = ("Train PPO on a vectorized Gymnasium environment. --preset NAME [NAME ...] starts from "
                   f"named presets applied in order ({', '.join(PRESETS)}), e.g. --preset mujoco hp3o; "
                   "other flags override their fields.")
    with deferred_validation():
        cfg = tyro.cli(TrainConfig, default=default, args=rest, prog="rlkit train", description=description,
                       config=TYRO_CONFIG)
    cfg.validate()
    from rlkit.gym.trainer import train

    result = train(cfg)
    print(json.dumps(result.to_json()))
    print(f"eval return {result.eval_return_mean:.1f} +- {result.eval_return_std:.1f}; "
          f"TensorBoard logs: tensorboard --logdir {result.run_dir}", file=sys.stderr)
    return 0


def _eval(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="rlkit eval", description="Evaluate a trained run's latest checkpoint.")
    parser.add_argument("run_dir")
    parser.add_argument("--episodes", type=int, default=10)
    parser.add_argument("--seed", type=int, default=10_000)
    args = parser.parse_args(argv)
    if args.episodes <= 0:
        raise ConfigError(f"--episodes must be positive, got {args.episodes}")
    import time

    from rlkit.gym.agent import Agent

    agent, cfg = Agent.load(args.run_dir)
    start = time.perf_counter()
    result = agent.evaluate(cfg.env, args.episodes, seed=args.seed)
    seconds = time.perf_counter() - start
    print(json.dumps({"env": cfg.env, "seed": args.seed, "total_steps": sum(result.lengths),
                      "steps_per_second": sum(result.lengths) / seconds, "eval_return_mean": result.mean,
                      "eval_return_std": result.std, "run_dir": args.run_dir, "variant": cfg.variant,
                      "episodes": args.episodes}))
    return 0


def _rlhf(argv: list[str]) -> int:
    from rlkit.rlhf.config import RLHFConfig
    from rlkit.rlhf.trainer import train_rlhf

    with deferred_validation():
        cfg = tyro.cli(RLHFConfig, args=argv, prog="rlkit rlhf", config=TYRO_CONFIG,
                       description="RLHF with the PPO core on the token-level LLM environment.")
    cfg = cfg.replace()  # validates
    result = train_rlhf(cfg)
    print(json.dumps(result.to_json()))
    return 0


def _rm(argv: list[str]) -> int:
    if not argv or argv[0] != "train":
        raise ConfigError("usage: rlkit rm train --backbone MODEL --data PREFS.jsonl --output DIR")
    from rlkit.rlhf.reward_model import RMConfig, train_reward_model

    cfg = tyro.cli(RMConfig, args=argv[1:], prog="rlkit rm train",
                   description="Train a Bradley-Terry reward model on preference pairs.")
    print(json.dumps(train_reward_model(cfg).to_json()))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = {"train": _train, "eval": _eval, "rlhf": _rlhf, "rm": _rm}
    if not argv or argv[0] not in commands:
        print(USAGE + f"\npresets: {', '.join(PRESETS)}", file=sys.stderr)
        return 2
    try:
        return commands[argv[0]](argv[1:])
    except RlkitError as exc:
        print(f"rlkit: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("rlkit: interrupted; resume from the last checkpoint with --resume RUN_DIR", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
