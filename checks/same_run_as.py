"""Does a run train to the same numbers as at an earlier revision, on this machine? Trains
``rlkit train ARGS`` with the code of REV (a temporary ``git worktree``) and with the current code,
one after the other, and compares the two evaluation histories number for number.

    python checks/same_run_as.py REV -- --preset cartpole --seed 1 --total-steps 100000 --eval-every 10000
    python checks/same_run_as.py --manifest experiments/hp3o/results/manifest.json --run hp3o__CartPole-v1__s1

With ``--manifest``, the run's config as the sweep recorded it becomes ``rlkit train``'s flags, and
REV defaults to the commit the sweep recorded (``--total-steps N`` shortens the run, evaluating at
least twice).

A committed report made on another machine differs from a rerun here in its digits (floats round
differently between CPU kinds); this check tells that apart from a change of the code: equal
histories here mean REV's code and the current code compute the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAIN = "import sys; from rlkit.cli import main; sys.exit(main(sys.argv[1:]))"
SPEC_KEYS = ("name", "envs", "seeds", "preset", "variants", "grid", "env", "smoke", "reference", "baseline")
"""A sweep spec's keys that are not a run's fields."""


def flags(fields: dict) -> list[str]:
    """``rlkit train`` flags that set ``fields`` (run config fields, by name)."""
    out: list[str] = []
    for key, value in fields.items():
        name = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            out.append(name if value else "--no-" + key.replace("_", "-"))
        elif isinstance(value, list):
            out += [name, *map(str, value)]
        else:
            out += [name, str(value)]
    return out


def _presets(table: dict) -> tuple[list[str], dict]:
    presets = table.get("presets", table.get("preset", []))
    return ([presets] if isinstance(presets, str) else list(presets)), {
        k: v for k, v in table.items() if k not in ("presets", "preset")}


def from_manifest(path: Path, run: str, total_steps: int | None) -> tuple[str, list[str]]:
    """The commit a sweep recorded and the train flags of its run ``run``, as its spec builds it:
    the env's presets (else the spec's) and the variant's, then the spec's fields, the env's and the
    variant's (``total_steps`` shortens it, evaluating at least twice)."""
    manifest = json.loads(path.read_text())
    if run not in manifest["runs"]:
        raise SystemExit(f"same_run_as: error: {path} has no run {run!r}")
    kind, config = manifest["runs"][run]
    spec, variant = manifest["spec"], run.split("__")[0]
    if kind != "rlkit" or variant not in spec["variants"]:
        raise SystemExit(f"same_run_as: error: {run} is not a plain rlkit variant's run (a {kind} run or a grid "
                         "point)")
    top_presets, top = _presets({k: v for k, v in spec.items() if k not in SPEC_KEYS or k == "preset"})
    env_presets, env_fields = _presets(spec.get("env", {}).get(config["env"], {}))
    var_presets, var_fields = _presets(spec["variants"][variant])
    fields = {**top, **env_fields, **var_fields, "env": config["env"], "seed": config["seed"]}
    if total_steps is not None:
        fields.update(total_steps=total_steps, eval_every=min(fields.get("eval_every", total_steps), total_steps // 2))
    presets = (env_presets or top_presets) + var_presets
    return manifest["git_commit"], (["--preset", *presets] if presets else []) + flags(fields)


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
        raise SystemExit(f"same_run_as: error: rlkit train at {code} failed: {done.stderr.strip()[-600:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["eval_history"]


def differences(before: list[list[float]], after: list[list[float]]) -> list[str]:
    """The evaluations (by step) whose numbers differ, or that one history has and the other not."""
    a, b = ({row[0]: row[1:] for row in h} for h in (before, after))
    return [f"step {s}: {a.get(s)} -> {b.get(s)}" for s in sorted(set(a) | set(b)) if a.get(s) != b.get(s)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rev", nargs="?", action="store", help="the earlier revision (a commit, tag or branch); "
                        "after it, -- and rlkit train's arguments")
    parser.add_argument("--manifest", type=Path, help="a sweep's manifest.json: train its run --run")
    parser.add_argument("--run", help="the run's name in the manifest (e.g. ppo__CartPole-v1__s1)")
    parser.add_argument("--total-steps", type=int, help="with --manifest: a shorter run")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args, train_args = parser.parse_args(argv[:cut]), argv[cut + 1:]
    if args.manifest is not None:
        if not args.run:
            parser.error("--manifest needs --run")
        recorded, train_args = from_manifest(args.manifest, args.run, args.total_steps)
        args.rev = args.rev or recorded
    elif not args.rev:
        parser.error("give REV -- TRAIN_ARGS, or --manifest M --run NAME")
    with tempfile.TemporaryDirectory(prefix="same-run-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), args.rev], check=True,
                       capture_output=True)
        try:
            (Path(tmp) / "runs").mkdir()
            before = train(tree, train_args, Path(tmp) / "runs" / "before")
            after = train(ROOT, train_args, Path(tmp) / "runs" / "after")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)
    diff = differences(before, after)
    print(json.dumps({"rev": args.rev, "args": train_args, "evaluations": len(after), "same": not diff,
                      "final": {"rev": before[-1][1:] if before else None, "current": after[-1][1:] if after else None}}))
    for line in diff:
        print(line)
    return 0 if not diff else 1


if __name__ == "__main__":
    raise SystemExit(main())
