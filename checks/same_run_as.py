"""Does a run train to the same numbers as at an earlier revision, on this machine? Trains
``rlkit train ARGS`` with the code of REV (a temporary ``git worktree``) and with the current code,
one after the other, and compares the two evaluation histories number for number.

    python checks/same_run_as.py REV -- --preset cartpole --seed 1 --total-steps 100000 --eval-every 10000
    python checks/same_run_as.py --manifest experiments/hp3o/results/manifest.json --run hp3o__CartPole-v1__s1 \
        --recipe experiments/hp3o/cartpole.toml

With ``--manifest``, the run as the sweep's recorded spec builds it becomes ``rlkit train``'s flags
for REV, which defaults to the commit the sweep recorded; ``--recipe`` builds the current code's run
from the recipe as committed now (a recipe pins what a changed default no longer gives), and
``--total-steps N`` shortens both (its evaluations every N/2 steps, rounded to whole rollouts). The
run is found by its folder name among the spec's variants and grid points; a sweep run at a budget
(``--budget smoke``) is built with that budget's table, from the recipe too.

Exit codes: 0 the same numbers, 1 numbers that differ, 2 an error (one line on stderr). A signal
(Ctrl-C, SIGTERM) stops the training in flight and removes the temporary worktree.

A committed report made on another machine differs from a rerun here in its digits (floats round
differently between CPU kinds); this check tells that apart from a change of the code: equal
histories here mean REV's code and the current code compute the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAIN = "import sys; from rlkit.cli import main; sys.exit(main(sys.argv[1:]))"
from rlkit.ablation.spec import TOP_KEYS as SPEC_KEYS, grid_points, run_label, safe_name  # noqa: E402


class Refused(SystemExit):
    """A one-line error: ``main`` prints it and exits 2."""


def flags(fields: dict) -> list[str]:
    """``rlkit train`` flags that set ``fields`` (run config fields, by name)."""
    out: list[str] = []
    for key, value in fields.items():
        name = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            out.append(name if value else "--no-" + key.replace("_", "-"))
        elif isinstance(value, dict):  # a TOML table (env_kwargs): the JSON the flag takes
            out += [name, json.dumps(value, sort_keys=True)]
        elif isinstance(value, list):
            out += [name, *map(str, value)]
        else:
            out += [name, str(value)]
    return out


def _presets(table: dict) -> tuple[list[str], dict]:
    presets = table.get("presets", table.get("preset", []))
    return ([presets] if isinstance(presets, str) else list(presets)), {
        k: v for k, v in table.items() if k not in ("presets", "preset")}


def locate(spec: dict, run: str, env: str, seed: int) -> tuple[str, dict]:
    """The variant and grid point of the spec whose run folder is ``run``."""
    for variant in spec.get("variants", {}):
        for point in grid_points(spec.get("grid", {})):
            if f"{safe_name(run_label(variant, point))}__{safe_name(env)}__s{seed}" == run:
                return variant, point
    raise Refused(f"same_run_as: error: no variant of the spec {spec.get('name')!r} names run {run!r}")


def spec_flags(spec: dict, where: tuple, total_steps: int | None, budget: str | None = None) -> list[str]:
    """The train flags of one run of a sweep spec (``where``: variant, grid point, env, seed), as
    the spec builds it: the env's presets (else the spec's) and the variant's, then the spec's
    fields, the env's, the budget's table, the variant's and the grid point's (``total_steps``
    shortens it, evaluating every half of it)."""
    variant, point, env, seed = where
    if variant not in spec.get("variants", {}):
        raise Refused(f"same_run_as: error: the spec {spec.get('name')!r} has no variant {variant!r}")
    top_presets, top = _presets({k: v for k, v in spec.items() if k not in SPEC_KEYS or k == "preset"})
    env_presets, env_fields = _presets(spec.get("env", {}).get(env, {}))
    var_presets, var_fields = _presets(spec["variants"][variant])
    budget_fields = {k: v for k, v in spec.get(budget, {}).items() if k not in ("envs", "seeds")} if budget else {}
    fields = {**top, **env_fields, **budget_fields, **var_fields, **point, "env": env, "seed": seed}
    if total_steps is not None:
        fields.update(total_steps=total_steps, eval_every=min(fields.get("eval_every", total_steps), total_steps // 2))
    presets = (env_presets or top_presets) + var_presets
    return (["--preset", *presets] if presets else []) + flags(fields)


def from_manifest(path: Path, run: str, total_steps: int | None,
                  recipe: Path | None = None) -> tuple[str, list[str], list[str]]:
    """The commit a sweep recorded, the train flags of its run ``run`` as the recorded spec builds
    it, and as ``recipe`` (the spec's TOML file now) builds it, for the current code."""
    manifest = _read(path, json.loads)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("runs"), dict) \
            or not isinstance(manifest.get("spec"), dict):
        raise Refused(f"same_run_as: error: {path} is not a sweep's manifest (no spec and runs)")
    if run not in manifest["runs"]:
        raise Refused(f"same_run_as: error: {path} has no run {run!r}")
    kind, config = manifest["runs"][run]
    if kind != "rlkit":
        raise Refused(f"same_run_as: error: {run} is a {kind} run, not one of rlkit's")
    if not isinstance(manifest.get("git_commit"), str):
        raise Refused(f"same_run_as: error: {path} records no commit; give the revision: REV --manifest ...")
    variant, point = locate(manifest["spec"], run, config["env"], config["seed"])
    where, budget = (variant, point, config["env"], config["seed"]), manifest.get("budget")
    then = spec_flags(manifest["spec"], where, total_steps, budget)
    now = then
    if recipe is not None:
        spec = _read(recipe, tomllib.loads)
        if spec.get("name") != manifest["spec"].get("name"):
            raise Refused(f"same_run_as: error: {recipe} is the recipe of {spec.get('name')!r}, the manifest's "
                          f"sweep is {manifest['spec'].get('name')!r}")
        now = spec_flags(spec, where, total_steps, budget)
    return manifest["git_commit"], then, now


def _read(path: Path, parse) -> dict:  # type: ignore[no-untyped-def]
    try:
        return parse(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # JSON and TOML errors are ValueErrors
        raise Refused(f"same_run_as: error: cannot read {path}: {exc}") from None


def run_code(code: Path, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``rlkit ARGS`` with the package at ``code``, from ``cwd`` (a folder outside any checkout, so
    that no other rlkit is imported)."""
    env = {**os.environ, "PYTHONPATH": str(code), "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-c", TRAIN, *args], cwd=cwd, env=env, capture_output=True, text=True)


def train(code: Path, args: list[str], logdir: Path) -> list[list[float]]:
    """The evaluation history ``[[step, mean, std], ...]`` of ``rlkit train ARGS`` run with the
    package at ``code``."""
    done = run_code(code, ["train", *args, "--logdir", str(logdir)], logdir.parent)
    if done.returncode != 0:
        raise Refused(f"same_run_as: error: rlkit train at {code} failed: {done.stderr.strip()[-600:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["eval_history"]


def differences(before: list[list[float]], after: list[list[float]]) -> list[str]:
    """The evaluations (by step) whose numbers differ, or that one history has and the other not."""
    a, b = ({row[0]: row[1:] for row in h} for h in (before, after))
    return [f"step {s}: {a.get(s)} -> {b.get(s)}" for s in sorted(set(a) | set(b)) if a.get(s) != b.get(s)]


def _stop(signum: int, frame: object) -> None:
    """SIGTERM ends the check as Ctrl-C does: the training in flight is killed (subprocess.run
    kills its child on any exception) and the worktree removed on the way out."""
    raise KeyboardInterrupt


def compare(rev: str, train_args: list[str], now_args: list[str]) -> tuple[list, list]:
    """The evaluation histories of the run at ``rev`` (a temporary worktree) and with the current code."""
    with tempfile.TemporaryDirectory(prefix="same-run-") as tmp:
        tree = Path(tmp) / "tree"
        added = subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev],
                               capture_output=True, text=True)
        if added.returncode != 0:
            why = (added.stderr.strip().splitlines() or ["git worktree add failed"])[-1]
            raise Refused(f"same_run_as: error: cannot check out {rev!r}: {why}")
        try:
            (Path(tmp) / "runs").mkdir()
            before = train(tree, train_args, Path(tmp) / "runs" / "before")
            after = train(ROOT, now_args, Path(tmp) / "runs" / "after")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)
            subprocess.run(["git", "-C", str(ROOT), "worktree", "prune"], capture_output=True)
    return before, after


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str], list[str]]:
    """The options, REV's train arguments and the current code's."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rev", nargs="?", action="store", help="the earlier revision (a commit, tag or branch); "
                        "after it, -- and rlkit train's arguments")
    parser.add_argument("--manifest", type=Path, help="a sweep's manifest.json: train its run --run")
    parser.add_argument("--run", help="the run's name in the manifest (e.g. ppo__CartPole-v1__s1)")
    parser.add_argument("--total-steps", type=int, help="with --manifest: a shorter run")
    parser.add_argument("--recipe", type=Path, help="with --manifest: the spec's TOML file as committed now, which "
                        "builds the current code's run (default: the recorded spec)")
    cut = argv.index("--") if "--" in argv else len(argv)
    args, train_args = parser.parse_args(argv[:cut]), argv[cut + 1:]
    if args.manifest is None:
        if not args.rev or "--" not in argv:
            raise Refused("same_run_as: error: give REV -- TRAIN_ARGS, or --manifest M --run NAME")
        if args.run or args.total_steps is not None or args.recipe is not None:
            raise Refused("same_run_as: error: --run, --total-steps and --recipe go with --manifest")
        return args, train_args, train_args
    if not args.run or train_args:
        raise Refused("same_run_as: error: --manifest takes --run NAME and no train arguments")
    if args.total_steps is not None and args.total_steps < 2:
        raise Refused(f"same_run_as: error: --total-steps must be 2 or more, got {args.total_steps}")
    recorded, train_args, now_args = from_manifest(args.manifest, args.run, args.total_steps, args.recipe)
    args.rev = args.rev or recorded
    return args, train_args, now_args


def main() -> int:
    signal.signal(signal.SIGTERM, _stop)
    try:
        args, train_args, now_args = parse(sys.argv[1:])
        before, after = compare(args.rev, train_args, now_args)
    except Refused as exc:
        print(exc, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("same_run_as: stopped; its worktree is removed", file=sys.stderr)
        return 130
    diff = differences(before, after)
    named = {"manifest": str(args.manifest), "run": args.run} if args.manifest is not None else {}
    print(json.dumps({**named, "rev": args.rev, "args": train_args, **({"args_now": now_args} if now_args != train_args else {}),
                      "evaluations": len(after), "same": not diff,
                      "final": {"rev": before[-1][1:] if before else None, "current": after[-1][1:] if after else None}}))
    for line in diff:
        print(line)
    return 0 if not diff else 1


if __name__ == "__main__":
    raise SystemExit(main())
