"""``rlkit train``, ``eval``, ``rlhf`` and ``rm train``: flags are the fields of the configs.

Every user-facing error is an :class:`rlkit.errors.RlkitError`: one line, exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import shlex
import signal
import sys
from pathlib import Path
from typing import Any, NoReturn

from rlkit.cli_flags import (flags_given, merge_repeated, refuse_memory_options_without_memory,
                             refuse_options_left_off, refuse_repeated_lists, refuse_switched_off, refuse_unhonoured,
                             resume_changes, resume_flags)
from rlkit.core.config import deferred_validation
from rlkit.errors import ConfigError, RlkitError
from rlkit.io.signals import StopRequest, stop_on_signals

USAGE = """usage: rlkit train [--preset NAME [NAME ...]] [FLAGS]   (rlkit train --help lists every flag)
       rlkit eval RUN_DIR [--episodes N] [--seed S] [--max-steps N]
       rlkit rlhf --policy MODEL --prompts FILE --reward-model MODEL [FLAGS]
       rlkit rlhf --policy MODEL --prompts FILE --reward module:function [FLAGS]
       rlkit rlhf eval RUN_OR_MODEL --prompts FILE --reward module:function|--reward-model DIR [--samples K] [FLAGS]
       rlkit rlhf tiny-models DIR   (a tiny random policy and reward model, to try the RLHF commands)
       rlkit rm train --backbone MODEL --data PREFS.jsonl --output DIR [FLAGS]
       rlkit sweep SPEC.toml [--out DIR] [--workers N] [--backend local|ray] [--budget smoke] [--dry-run]
       rlkit report SWEEP_DIR [--baseline VARIANT] [--variants A,B,...] [--envs A,B,...]
                    [--metric final|auc|train100] [--normalize minmax|best-mean|none] [--reps N] [--out DIR]
       rlkit report walltime|tags|staleness SWEEP_DIR [FLAGS] | rlkit report scalars RUN_DIR [FLAGS]
       rlkit records keep SWEEP_DIR RECORDS_DIR | rlkit records restore RECORDS_DIR SWEEP_DIR"""


COMMANDS = ("train", "eval", "rlhf", "rm", "sweep", "report", "records")


class Parser(argparse.ArgumentParser):
    """argparse with its errors as one-line :class:`ConfigError` (no usage block)."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        raise ConfigError(f"{message} (see {self.prog} --help)")


def _train(argv: list[str]) -> int:
    from rlkit.cli_tyro import parse_config
    from rlkit.gym.config import TrainConfig, preset

    pre = Parser(prog="rlkit train", add_help=False, allow_abbrev=False)  # --seed is TrainConfig's, not --seeds
    pre.add_argument("--preset", nargs="+", action="extend", default=[])
    pre.add_argument("--seeds", nargs="+", action="extend", type=int, default=None)  # --seeds 1 2 --seeds 3: 1 2 3
    pre.add_argument("--population", type=int, default=None)
    pre.add_argument("--resume", nargs="+", action="extend", default=None)
    known, rest = pre.parse_known_args(argv)
    refuse_unhonoured(rest, TrainConfig)
    refuse_repeated_lists(rest, TrainConfig)
    many = known.seeds is not None or known.population is not None or len(known.resume or []) > 1
    if known.resume and not many:
        rest = [*rest, "--resume", known.resume[0]]
    description = ("Train PPO on a vectorized Gymnasium environment. --resume DIR continues a run with its own config "
                   "(--total-steps extends it); --resume DIR DIR ... continues a population.")
    with deferred_validation():
        default = preset(*known.preset) if known.preset else TrainConfig()
        cfg = parse_config(TrainConfig, default, rest, "rlkit train", description, _train_flags(),
                           hidden=frozenset({"hparams"}))  # set by a sweep or from Python; rlkit train adds its flags
    refuse_switched_off(cfg, rest)
    refuse_options_left_off(cfg, rest)
    refuse_memory_options_without_memory(cfg, rest)
    cfg = cfg if known.resume else cfg.showing(flags_given(rest, TrainConfig))  # a resumed run keeps its hparams
    if many:
        return _train_population(cfg, known, rest)
    from rlkit.gym.trainer import PPOTrainer

    if cfg.resume:
        if known.preset:
            raise ConfigError("--preset cannot be combined with --resume (a resumed run keeps its own config)")
        from rlkit.gym.population import is_member

        if is_member(cfg.resume):  # a population's member continues as a population of one: same numbers
            return _train_population(cfg, argparse.Namespace(**{**vars(known), "resume": [cfg.resume]}), rest)
        trainer = PPOTrainer(TrainConfig(resume=cfg.resume), resume_changes(cfg, rest))
    else:
        cfg.validate()
        trainer = PPOTrainer(cfg)
    result = trainer.train()
    print(json.dumps(result.to_json()))
    print(f"eval return {result.eval_return_mean:.1f} +- {result.eval_return_std:.1f}; "
          f"TensorBoard logs: tensorboard --logdir {shlex.quote(result.run_dir)}", file=sys.stderr)
    return 0


def _train_flags() -> dict[str, Any]:
    """The flags rlkit train reads itself (before its config's), shown in its run group."""
    from rlkit.cli_tyro import Flag, Flags
    from rlkit.gym.config import ENV_PRESETS, PRESETS

    variant_presets = [p for p in PRESETS if p not in ENV_PRESETS]
    return {"run": Flags("Where the run goes and what it keeps (its folder, checkpoints, resume, progress bar), the "
                         "presets it starts from and how many runs this command trains.", [
        Flag("preset", tuple[str, ...], (), f"Named presets applied in order, then the other flags: at most one env "
             f"preset ({', '.join(ENV_PRESETS)}) and variant presets ({', '.join(variant_presets)}), e.g. --preset "
             "mujoco hp3o."),
        Flag("seeds", tuple[int, ...], (), "Train one run per seed, all in this process as one population "
             "(--seeds 1 2 --seeds 3: three runs), each in its own folder (RUN_NAME__s{seed} with --run-name)."),
        Flag("population", int | None, None, "Train K runs with seeds --seed .. --seed+K-1 as one population.")])}


def _train_population(cfg: Any, known: argparse.Namespace, rest: list[str]) -> int:
    """``rlkit train --seeds ...`` / ``--population K`` / ``--resume DIR DIR ...``: one JSON line per
    member; exit 1 when a member failed (the others finished)."""
    from rlkit.gym.population import resume_population, train_population

    if known.resume:
        if known.seeds is not None or known.population is not None or known.preset:
            raise ConfigError("--resume DIR DIR ... continues a population with its own seeds and config; "
                              "drop --seeds, --population and --preset")
        outcomes = resume_population(known.resume, **resume_changes(cfg, rest))
    else:
        if known.seeds is not None and known.population is not None:
            raise ConfigError("give --seeds or --population, not both")
        if known.seeds is not None and any(a == "--seed" or a.startswith("--seed=") for a in rest):
            raise ConfigError("--seeds names every member's seed; drop --seed (--population K starts at --seed)")
        if known.population is not None and known.population < 1:
            raise ConfigError(f"--population must be >= 1, got {known.population}")
        seeds = known.seeds if known.seeds is not None else list(range(cfg.seed, cfg.seed + known.population))
        outcomes = train_population(cfg, seeds)
    for o in outcomes:
        print(json.dumps(o.result.to_json() if o.result else {"seed": o.seed, "run_dir": o.run_dir, "error": o.error}))
    failed = [o for o in outcomes if o.error]
    for o in failed:
        print(f"rlkit: error: population member seed {o.seed} failed ({o.run_dir}): {o.error}", file=sys.stderr)
    print(f"{len(outcomes) - len(failed)} of {len(outcomes)} members finished; TensorBoard logs: tensorboard "
          f"--logdir {shlex.quote(str(Path(outcomes[0].run_dir).parent))}", file=sys.stderr)
    return 1 if failed else 0


def _eval(argv: list[str]) -> int:
    parser = Parser(prog="rlkit eval", description="Evaluate a trained run's latest checkpoint with greedy actions; "
                    "prints one JSON line (eval_steps: the env steps the evaluation took; eval_seed: the first "
                    "episode's seed).")
    parser.add_argument("run_dir", help="a run folder written by rlkit train (its newest checkpoint is evaluated)")
    parser.add_argument("--episodes", type=int, default=10, help="episodes to run (default: 10)")
    parser.add_argument("--seed", type=int, default=10_000, help="seed of the first episode (episode i: seed + i; default: 10,000, the same "
                        "episodes for every run; the run's own evaluations start at its seed + 10,000)")
    parser.add_argument("--max-steps", type=int, default=0,
                        help="cut each episode after this many steps (0: the env's time limit, else 10,000)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar (shown only on a terminal)")
    args = parser.parse_args(argv)
    if not args.run_dir:
        raise ConfigError("the run directory is empty; give a run directory with checkpoints/")
    if args.episodes <= 0 or args.max_steps < 0:
        raise ConfigError(f"--episodes must be positive and --max-steps >= 0, got {args.episodes}, {args.max_steps}")
    from rlkit.core.config import require_seed

    require_seed(args.seed)
    import time

    from rlkit.gym.agent import Agent

    agent, cfg = Agent.load(args.run_dir)
    start = time.perf_counter()
    result = agent.evaluate(cfg.env, args.episodes, seed=args.seed, max_steps=args.max_steps or None,
                            progress=not args.no_progress, env_kwargs=cfg.env_options,
                            wrappers=cfg.env_wrappers)
    seconds = time.perf_counter() - start
    steps = sum(result.lengths)
    print(json.dumps({"env": cfg.env, "run_dir": args.run_dir, "variant": cfg.variant, "eval_seed": args.seed,
                      "episodes": args.episodes, "eval_steps": steps, "eval_steps_per_second": steps / seconds,
                      "eval_return_mean": result.mean, "eval_return_std": result.std,
                      "capped_episodes": result.capped}))
    return 0


def _rlhf(argv: list[str]) -> int:
    if argv[:1] in (["tiny-models"], ["eval"]):
        from rlkit.cli_rlhf import rlhf_eval, tiny_models

        print((tiny_models if argv[0] == "tiny-models" else rlhf_eval)(argv[1:], Parser))
        return 0
    from rlkit.rlhf.config import RLHFConfig

    refuse_unhonoured(argv, RLHFConfig)
    argv = merge_repeated(argv, "--reward")
    refuse_repeated_lists(argv, RLHFConfig)
    from rlkit.cli_tyro import parse_config

    with deferred_validation():
        cfg = parse_config(RLHFConfig, RLHFConfig(), argv, "rlkit rlhf", "RLHF with the PPO core on the token-level LLM "
                           "environment (rlkit rlhf tiny-models DIR writes a tiny policy and reward model to try it).")
    refuse_switched_off(cfg, argv)
    refuse_options_left_off(cfg, argv)
    from rlkit.rlhf.trainer import RLHFTrainer

    if cfg.resume:
        trainer = RLHFTrainer(RLHFConfig(resume=cfg.resume), changes=resume_changes(cfg, argv))
    else:
        trainer = RLHFTrainer(cfg.replace())  # replace() validates
    print(json.dumps(trainer.train().to_json()))
    return 0


def _rm(argv: list[str]) -> int:
    if not argv or argv[0] != "train":
        raise ConfigError("usage: rlkit rm train --backbone MODEL --data PREFS.jsonl --output DIR")
    from rlkit.cli_tyro import parse_config
    from rlkit.rlhf.config import RMConfig

    refuse_repeated_lists(argv[1:], RMConfig)
    cfg = parse_config(RMConfig, RMConfig(), argv[1:], "rlkit rm train",
                       "Train a Bradley-Terry reward model on preference pairs.")
    from rlkit.rlhf.reward_model import train_reward_model

    print(json.dumps(train_reward_model(cfg).to_json()))
    return 0


def _sweep(argv: list[str]) -> int:
    parser = Parser(prog="rlkit sweep", description="Run a sweep spec: variants x envs x seeds "
                                     "(resumable: the same command again finishes what is left).")
    parser.add_argument("spec", help="the sweep's TOML file: variants, envs, seeds and the settings they share "
                        "(docs/ablation.md)")
    parser.add_argument("--out", default=None, help="sweep directory (default: sweeps/<name>)")
    parser.add_argument("--workers", type=int, default=None, help="parallel runs (default: the cores)")
    parser.add_argument("--backend", default="local", choices=["local", "ray"],
                        help="local: worker processes on this machine; ray: Ray tasks (default: local)")
    parser.add_argument("--ray-address", default=None, help="a Ray cluster (default: a local Ray instance)")
    parser.add_argument("--gpus-per-run", type=float, default=0.0, help="Ray: the GPU share each run asks for")
    parser.add_argument("--budget", default=None, choices=["smoke"], help="apply the spec's [smoke] table")
    parser.add_argument("--retry-failed", action="store_true", help="run failed runs again")
    parser.add_argument("--pack", default="auto", help="seeds of one (variant, env) trained in one process as a "
                        "population: auto (all of them, split across the workers), K (at most K), 1 (each alone)")
    parser.add_argument("--dry-run", action="store_true", help="print the runs and their state, run nothing")
    args = parser.parse_args(argv)
    from rlkit.ablation.sweep import check_sweep_flags, plan, run_sweep

    check_sweep_flags(args.workers, args.backend, args.gpus_per_run)
    from rlkit.ablation.packing import check_pack

    check_pack(args.pack)
    if args.dry_run:
        spec, sweep_dir, states = plan(args.spec, args.out, args.budget)
        for run, state in states:
            print(f"{state:8} {run.name}  ({run.kind}, {run.config['total_steps']:,} steps)")
        print(f"{len(states)} runs in {sweep_dir}", file=sys.stderr)
        return 0
    summary = run_sweep(args.spec, args.out, args.workers, args.backend, args.ray_address, args.budget,
                        args.retry_failed, args.gpus_per_run, pack=args.pack)
    print(json.dumps(summary.to_json()))
    if summary.failed:
        print(f"rlkit: {summary.failed} run(s) failed or not counted; runs.csv's error column and logs/ in "
              f"{summary.sweep_dir} say why (--retry-failed runs the failed ones again)", file=sys.stderr)
    if summary.missing:  # a signal to a run's own process stopped it (checkpointed): not a failure, not done
        print(f"rlkit: {summary.missing} run(s) stopped unfinished (a signal to the run's own process); the same "
              "command resumes them", file=sys.stderr)
    return 1 if summary.failed or summary.missing else 0


def _report(argv: list[str]) -> int:
    from rlkit.cli_report import report

    print(report(argv, Parser))
    return 0


def _records(argv: list[str]) -> int:
    parser = Parser(prog="rlkit records", description="A sweep's finished runs as records (its manifest, each "
                    "finished run's result.json and status): keep copies them out of a sweep directory, restore "
                    "into one (rlkit sweep then runs only the rest). Nothing is overwritten. Prints the runs copied, "
                    "those already present and the sweep's runs not finished.")
    parser.add_argument("action", choices=["keep", "restore"], help="keep: copy the records out of a sweep; "
                        "restore: copy them into one")
    parser.add_argument("source", help="keep: the sweep directory; restore: the records directory")
    parser.add_argument("destination", help="keep: the records directory; restore: the sweep directory")
    args = parser.parse_args(argv)
    from rlkit.ablation.records import keep_records, restore_records

    copy = keep_records if args.action == "keep" else restore_records
    print(json.dumps(copy(args.source, args.destination).to_json()))
    return 0


def _raised(exc: BaseException, module: str, name: str) -> bool:
    """Whether ``exc`` is ``module.name`` (none is when that module is not imported: importing it here
    would start what the command never needed, torch included)."""
    found = sys.modules.get(module)
    return found is not None and isinstance(exc, getattr(found, name))


def _interrupted(exc: KeyboardInterrupt, command: str, argv: list[str] | None = None) -> int:
    from rlkit.io.signals import Interrupted

    extension = "".join(" " + shlex.quote(a) for a in resume_flags(argv or []))

    signum = getattr(exc, "signum", signal.SIGINT)
    if _raised(exc, "rlkit.ablation.sweep", "SweepInterrupted"):
        restart = "; a baseline in flight (SB3, sb3-contrib) keeps no checkpoint and starts again" * exc.baselines
        print(f"rlkit: interrupted; no further run started, the rlkit runs in flight checkpointed and stopped"
              f"{restart}; continue with: {exc.command}", file=sys.stderr)
        return 130
    if _raised(exc, "rlkit.gym.population", "PopulationInterrupted"):
        for run_dir, error in exc.failed.items():
            print(f"rlkit: error: population member {run_dir} failed (not resumed): {error}", file=sys.stderr)
        dirs = " ".join(shlex.quote(str(d)) for d in exc.run_dirs)
        print(f"rlkit: {signal.Signals(signum).name}: population {exc.stopped()} (each member alike); continue "
              f"with: rlkit {command} --resume {dirs}{extension}", file=sys.stderr)
        return 128 + signum
    if isinstance(exc, Interrupted):
        print(f"rlkit: {signal.Signals(signum).name}: {exc.stopped()}; continue with: "
              f"rlkit {command} --resume {shlex.quote(str(exc.run_dir))}{extension}", file=sys.stderr)
        return 128 + signum
    if command == "sweep":
        print("rlkit: interrupted; finished runs and checkpoints are kept; run the same command again to continue",
              file=sys.stderr)
    elif command in ("eval", "rlhf eval"):
        print("rlkit: interrupted; nothing was written", file=sys.stderr)
    elif command == "records":
        print("rlkit: interrupted; every file copied so far is whole; run the same command again to finish",
              file=sys.stderr)
    else:
        print("rlkit: interrupted; the newest checkpoint in the run directory (if any) is intact", file=sys.stderr)
    return 128 + signum


def _usage(ok: bool) -> int:
    from rlkit.gym.config import PRESETS

    print(USAGE + f"\npresets: {', '.join(PRESETS)}", file=sys.stdout if ok else sys.stderr)
    return 0 if ok else 2


def needs_torch(argv: list[str]) -> bool:
    """Whether the command line ``argv`` runs a command that imports torch (the ``rlkit`` entry point
    imports it first, with signals held off: see rlkit_launch). None of these does: the usage, a
    command's --help, ``rlkit sweep --dry-run``, ``rlkit records`` and ``rlkit report`` but for its
    ``walltime`` tool (which trains each (variant, env) briefly to measure it)."""
    if not argv or argv[0] not in COMMANDS or "-h" in argv or "--help" in argv:
        return False
    if argv[0] == "report":
        return argv[1:2] == ["walltime"]
    return not (argv[0] == "records" or argv[0] == "sweep" and "--dry-run" in argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    commands = dict(zip(COMMANDS, (_train, _eval, _rlhf, _rm, _sweep, _report, _records)))
    logging.basicConfig(format="rlkit: %(message)s", level=logging.WARNING)
    if argv[:1] in (["-h"], ["--help"]) or not argv or argv[0] not in commands:
        return _usage(ok=argv[:1] in (["-h"], ["--help"]))
    # A run owns SIGINT/SIGTERM from its start-up on (env workers, model loading) until it has
    # reported its outcome (see stop_on_signals); the other commands but sweep (which signals its
    # runs itself) stop at the first signal. A signal while the outcome is reported is ignored.
    owned = stop_on_signals() if argv[0] != "sweep" else contextlib.nullcontext(StopRequest())
    with owned as request:
        request.at_once = argv[0] not in ("train", "rlhf") or argv[1:2] in (["eval"], ["tiny-models"])
        try:
            code = commands[argv[0]](argv[1:])
            request.over = True
            return code
        except RlkitError as exc:
            request.over = True
            again = "".join(" " + shlex.quote(a) for a in resume_flags(argv) if getattr(exc, "resumable", False))
            print(f"rlkit: error: {exc}{again}", file=sys.stderr)
            return 2
        except KeyboardInterrupt as exc:
            request.over = True
            return _interrupted(exc, " ".join(argv[:2]) if argv[:2] == ["rlhf", "eval"] else argv[0], argv)

if __name__ == "__main__":
    sys.exit(main())
