"""Arithmetic with a verifiable reward on SmolLM2-135M-Instruct: PPO (value head), RLOO and GRPO at
equal wall time, held-out accuracy over training.

Each (method, seed) trains in segments of ``--segment`` iterations (``rlkit rlhf``, then ``rlkit rlhf
--resume``) until its training wall time reaches ``--minutes``; after each segment ``rlkit rlhf eval``
scores the policy greedily on the held-out problems. The initial model is evaluated the same way.
Wall time is each run's own training seconds (model loading and evaluation excluded); each point
also holds the training process's peak resident memory. Every point goes to ``OUT/curve.jsonl``;
a stopped run of this script continues where it stopped (finished segments are kept, a run is
resumed from its checkpoint). ``trl_grpo.py`` adds TRL's GRPOTrainer to the same curve.

    python experiments/arithmetic/data.py                      # the problems (once)
    python experiments/arithmetic/run.py --out runs/arithmetic   # 3 methods x 3 seeds
    python experiments/arithmetic/run.py --out runs/arith-smoke --methods grpo --seeds 1 --minutes 1 --segment 2
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from rlkit.ablation.measurements import ExtendList

HERE = Path(__file__).parent
GROUP = 4
METHODS = {"ppo": [], "ppo-critic": ["--separate-critic"], "rloo": ["--group-size", str(GROUP), "--no-norm-adv"],
           "grpo": ["--group-size", str(GROUP), "--group-form", "grpo", "--no-norm-adv"]}
"""Each method's flags; every method writes 16 responses of at most 12 tokens per iteration. The
critic-free methods use the group's advantages as they are (GRPO scales them per group; neither
normalizes again per minibatch, as TRL's GRPOTrainer and RLOOTrainer do not); PPO normalizes its
GAE advantages per minibatch, with its value head on the policy's trunk (``ppo``) or on a copy of
it trained on the value loss alone (``ppo-critic``, the value model of InstructGPT and of TRL's
former PPOTrainer)."""
TOKENS_PER_ITERATION = 16 * 12
STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
SETTINGS = ["--num-envs", "16", "--max-new-tokens", "12", "--kl-coef", "0", "--learning-rate", "1e-5",
            "--temperature", "1.0", "--update-epochs", "1", "--num-minibatches", "2", "--torch-threads", "2",
            "--no-progress"]
"""Every method's settings: one epoch of two minibatches per iteration (TRL's GRPOTrainer default,
``num_iterations=1``: an update on a 135M model dominates an iteration on two CPU cores), lr 1e-5
constant, no KL penalty (beta 0, TRL's default: no reference model is loaded)."""


def rlkit(*args: str) -> tuple[dict, float]:
    """Run one rlkit command: its last stdout line as JSON and the process's peak resident memory in
    GB (a failure stops the script with its error). The command runs in a session of its own, and
    SIGINT, SIGTERM or SIGHUP to this script is passed on to it (Ctrl-C, ``kill`` or a closed
    terminal alike; SIGHUP as SIGTERM, and one that comes while it starts, once it has): the run
    checkpoints, and the same script command continues it."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        child: list[int] = []
        early: list[int] = []  # a signal that came before the child was started: passed on once it is

        def forward(signum: int, _: object) -> None:
            signum = signal.SIGTERM if signum == signal.SIGHUP else signum  # (a closed terminal: stop and checkpoint)
            if child:
                os.kill(child[0], signum)
            else:
                early.append(signum)

        handlers = {s: signal.signal(s, forward) for s in STOPS}
        try:
            proc = subprocess.Popen([str(Path(sys.executable).parent / "rlkit"), *args], stdout=out, stderr=err,
                                    text=True, start_new_session=True)
            child.append(proc.pid)
            for signum in early[:1]:
                os.kill(proc.pid, signum)
            _, status, usage = os.wait4(proc.pid, 0)
            child.clear()
        finally:
            for s, handler in handlers.items():
                signal.signal(s, handler)
        returncode = os.waitstatus_to_exitcode(status)
        out.seek(0), err.seek(0)
        stdout, stderr = out.read(), err.read()
    if returncode in [128 + s for s in STOPS]:
        raise SystemExit(f"stopped by a signal ({stderr.strip().splitlines()[-1:]}); run the same command to continue")
    if returncode != 0:
        raise SystemExit(f"rlkit {shlex.join(args)} failed: {stderr.strip().splitlines()[-1:]}")
    return json.loads(stdout.strip().splitlines()[-1]), usage.ru_maxrss / 2**20


def trained_seconds(run: Path) -> float:
    """The run's own training seconds (its newest checkpoint's: model loading and evaluation excluded)."""
    latest = json.loads((run / "checkpoints" / "latest.json").read_text())["checkpoint"]
    return float(json.loads((run / "checkpoints" / latest / "state.json").read_text())["seconds"])


def template(args: argparse.Namespace) -> str:
    return "--chat-template" if args.chat_template else "--no-chat-template"


def points(curve: Path) -> list[dict]:
    """The curve's points; a last line cut off by a kill is dropped (its segment runs again)."""
    lines = curve.read_text().splitlines() if curve.is_file() else []
    out = []
    for i, line in enumerate(lines):
        try:
            out.append(json.loads(line))
        except ValueError:
            if i < len(lines) - 1:
                raise SystemExit(f"{curve}: line {i + 1} is not JSON; fix or remove it") from None
            rewrite(curve, out)
    return out


def rewrite(curve: Path, kept: list[dict]) -> None:
    """``curve`` holding ``kept`` only, replaced at once (a kill meanwhile leaves the old file whole)."""
    tmp = curve.with_name(f".{curve.name}.tmp")
    tmp.write_text("".join(json.dumps(p) + "\n" for p in kept))
    os.replace(tmp, curve)


def check_budget(args: argparse.Namespace) -> None:
    """``--minutes`` and ``--segment`` that can train (a one-line exit otherwise)."""
    if not args.minutes > 0 or args.segment < 1:
        raise SystemExit(f"--minutes must be > 0 and --segment >= 1, got {args.minutes} and {args.segment}")
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise SystemExit(f"--out {args.out} is a file; give a folder")


def evaluate(target: str, args: argparse.Namespace) -> dict:
    result, _ = rlkit("rlhf", "eval", target, "--prompts", args.heldout, "--reward", args.reward, "--max-new-tokens",
                      "12", template(args), "--seed", "1")
    return result["accuracy"]


def train_one(method: str, seed: int, args: argparse.Namespace, curve: Path) -> None:
    """Segments of ``method`` with ``seed`` until its training wall time reaches the budget."""
    run = Path(args.out) / f"{method}__s{seed}"
    done = [p for p in points(curve) if p["method"] == method and p["seed"] == seed]
    seconds, iterations = (done[-1]["train_seconds"], done[-1]["iterations"]) if done else (0.0, 0)
    while seconds < args.minutes * 60:
        iterations += args.segment
        common = ["--iterations", str(iterations), "--checkpoint-every", str(TOKENS_PER_ITERATION * args.segment)]
        if (run / "config.json").is_file():  # started before (a run stopped before its first checkpoint starts again)
            _, peak = rlkit("rlhf", "--resume", str(run), *common)
        else:
            _, peak = rlkit("rlhf", "--policy", args.policy, "--prompts", args.train, "--reward", args.reward,
                            "--seed", str(seed), "--logdir", str(run.parent), "--run-name", run.name,
                            *METHODS[method], *SETTINGS, template(args), *common)
        seconds = trained_seconds(run)
        point = {"method": method, "seed": seed, "iterations": iterations, "train_seconds": seconds,
                 "accuracy": evaluate(str(run), args), "peak_rss_gb": peak}
        with curve.open("a") as f:
            f.write(json.dumps(point) + "\n")


def common_arguments(parser: argparse.ArgumentParser, default_minutes: str) -> None:
    """The options run.py and trl_grpo.py share (their runs go into one curve.jsonl)."""
    parser.add_argument("--out", default="runs/arithmetic", help="folder of the runs and curve.jsonl")
    parser.add_argument("--policy", default=None, help="the model folder (default: SmolLM2, experiments/smollm2.py)")
    parser.add_argument("--train", default=str(HERE / "data" / "train.jsonl"), help="training problems")
    parser.add_argument("--heldout", default=str(HERE / "data" / "heldout.jsonl"), help="held-out problems")
    parser.add_argument("--reward", default="rlkit.rlhf.verifiers:correct_number", help="the reward function")
    parser.add_argument("--minutes", type=float, default=10.0, help=default_minutes)
    parser.add_argument("--segment", type=int, default=15, help="iterations between held-out evaluations")
    parser.add_argument("--chat-template", action=argparse.BooleanOptionalAction, default=True,
                        help="format prompts with the model's chat template (default: on)")


def parse(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """The arguments, checked, with ``--policy`` defaulting to the converted SmolLM2."""
    args = parser.parse_args()
    check_budget(args)
    if args.policy is None:
        sys.path.insert(0, str(HERE.parent))
        from smollm2 import prepare

        args.policy = prepare()
    return args


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_arguments(parser, "training wall time per (method, seed)")
    parser.add_argument("--methods", nargs="+", action=ExtendList, default=["ppo", "rloo", "grpo"],
                        choices=list(METHODS),
                        help="methods to train (repeatable: the lists add up)")
    parser.add_argument("--seeds", nargs="+", action=ExtendList, type=int, default=[1, 2, 3],
                        help="seeds of each method (repeatable: the lists add up)")
    args = parse(parser)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    curve = out / "curve.jsonl"
    if not any(p["method"] == "initial" for p in points(curve)):
        with curve.open("a") as f:
            f.write(json.dumps({"method": "initial", "seed": 0, "iterations": 0, "train_seconds": 0.0,
                                "accuracy": evaluate(args.policy, args)}) + "\n")
    for method in args.methods:
        for seed in args.seeds:
            train_one(method, seed, args, curve)
    print(curve)


if __name__ == "__main__":
    main()
