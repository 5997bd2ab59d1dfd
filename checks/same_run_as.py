"""Does a run train to the same numbers as at an earlier revision, on this machine? Trains
``rlkit train ARGS`` with the code of REV (a temporary ``git worktree``) and with the current code,
one after the other, and compares the two evaluation histories number for number.

    python checks/same_run_as.py REV -- --preset cartpole --seed 1 --total-steps 100000 --eval-every 10000
    python checks/same_run_as.py --manifest experiments/hp3o/results/manifest.json --run hp3o__CartPole-v1__s1 \
        --recipe experiments/hp3o/cartpole.toml

With ``--manifest``, the run as the sweep's recorded spec builds it becomes ``rlkit train``'s flags
for REV, which defaults to the commit the sweep recorded; ``--recipe`` builds the current code's run
from the recipe as committed now (a recipe pins what a changed default no longer gives), and
``--total-steps N`` shortens both, evaluating at least twice.

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
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAIN = "import sys; from rlkit.cli import main; sys.exit(main(sys.argv[1:]))"
from rlkit.ablation.spec import TOP_KEYS as SPEC_KEYS  # noqa: E402  (a spec's keys that are not run fields)


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


def spec_flags(spec: dict, variant: str, env: str, seed: int, total_steps: int | None) -> list[str]:
    """The train flags of one run of a sweep spec, as the spec builds it: the env's presets (else
    the spec's) and the variant's, then the spec's fields, the env's and the variant's
    (``total_steps`` shortens it, evaluating at least twice)."""
    if variant not in spec["variants"]:
        raise SystemExit(f"same_run_as: error: the spec {spec.get('name')!r} has no variant {variant!r}")
    top_presets, top = _presets({k: v for k, v in spec.items() if k not in SPEC_KEYS or k == "preset"})
    env_presets, env_fields = _presets(spec.get("env", {}).get(env, {}))
    var_presets, var_fields = _presets(spec["variants"][variant])
    fields = {**top, **env_fields, **var_fields, "env": env, "seed": seed}
    if total_steps is not None:
        fields.update(total_steps=total_steps, eval_every=min(fields.get("eval_every", total_steps), total_steps // 2))
    presets = (env_presets or top_presets) + var_presets
    return (["--preset", *presets] if presets else []) + flags(fields)


def from_manifest(path: Path, run: str, total_steps: int | None,
                  recipe: Path | None = None) -> tuple[str, list[str], list[str]]:
    """The commit a sweep recorded, the train flags of its run ``run`` as the recorded spec builds
    it, and as ``recipe`` (the spec's TOML file now) builds it, for the current code."""
    manifest = json.loads(path.read_text())
    if run not in manifest["runs"]:
        raise SystemExit(f"same_run_as: error: {path} has no run {run!r}")
    kind, config = manifest["runs"][run]
    if kind != "rlkit":
        raise SystemExit(f"same_run_as: error: {run} is a {kind} run, not one of rlkit's")
    where = (run.split("__")[0], config["env"], config["seed"], total_steps)
    then = spec_flags(manifest["spec"], *where)
    now = spec_flags(tomllib.loads(recipe.read_text()), *where) if recipe is not None else then
    return manifest["git_commit"], then, now


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
    parser.add_argument("--recipe", type=Path, help="with --manifest: the spec's TOML file as committed now, which "
                        "builds the current code's run (default: the recorded spec)")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    args, train_args = parser.parse_args(argv[:cut]), argv[cut + 1:]
    now_args = train_args
    if args.manifest is not None:
        if not args.run:
            parser.error("--manifest needs --run")
        recorded, train_args, now_args = from_manifest(args.manifest, args.run, args.total_steps, args.recipe)
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
            after = train(ROOT, now_args, Path(tmp) / "runs" / "after")
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True)
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
