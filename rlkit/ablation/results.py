"""A sweep's tables and manifest, rebuilt from its runs' own files (so they never drift from them).

``results.csv``: one tidy row per evaluation — variant, env, seed, kind, step, wall_s (training
seconds before that evaluation, evaluation excluded), eval_return_mean, eval_return_std.
``runs.csv``: one row per run — variant, env, seed, kind, status (done / failed / missing), error,
final_return, train_return_last100 (the mean return of its last 100 training episodes),
total_steps, steps_per_second, train_seconds, run_seconds (the run's wall time in
its worker: env creation, training, evaluation, files), pack_size, pack_steps_per_second,
pack_train_seconds, run_dir. A run trained alone is a pack of one. The seeds of a pack train in
one process, so its seconds are the pack's: ``pack_train_seconds`` is the pack's training time
(rollouts and updates of every member) and ``pack_steps_per_second`` its env steps (all members)
per second of it; ``train_seconds`` and ``run_seconds`` are the run's share (the pack's divided
by ``pack_size``) and ``steps_per_second`` its steps per second of that share (its pack's rate).
A pack's members are named in their status files; where a status names no pack, the members of
a (variant, env) that share their status file's seconds (a pack writes the same number to each)
count as one pack.
"""

from __future__ import annotations

import csv
import io
import json
import platform
import subprocess
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from rlkit.ablation.spec import MAX_RUN_NAME, PLAIN_NAME, RunSpec, SweepSpec, expand
from rlkit.errors import ConfigError
from rlkit.io.checkpoint import newest_checkpoint_steps
from rlkit.io.files import check_writable, read_json, write_atomic, write_json
from rlkit.io.schema import result_problem, status_problem
from rlkit.gym.config import TrainConfig
from rlkit.variants.migrate import migrate_config

RESULT_COLUMNS = ["variant", "env", "seed", "kind", "step", "wall_s", "eval_return_mean", "eval_return_std"]
RUN_COLUMNS = ["variant", "env", "seed", "kind", "status", "error", "final_return", "train_return_last100", "total_steps",
               "steps_per_second", "train_seconds", "run_seconds", "pack_size", "pack_steps_per_second",
               "pack_train_seconds", "run_dir"]
COST_COLUMNS = ("steps_per_second", "train_seconds", "run_seconds", "pack_size", "pack_steps_per_second",
                "pack_train_seconds")
"""What a run cost (runs.csv): its own share and, for a packed run, its pack's."""
LOCK = ".rlkit-sweep.lock"
"""The file a running sweep holds locked in its directory (see ``sweep.sweep_lock``)."""
PACKAGES = ("rlkit", "torch", "numpy", "gymnasium", "mujoco", "stable-baselines3", "sb3-contrib", "ray", "rliable")


def _git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                             cwd=Path(__file__).parent)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def claim_sweep_dir(sweep_dir: Path, spec: SweepSpec, budget: str | None, write: bool = True) -> None:
    """Create the sweep directory with its manifest (the spec, and every run's full config), or
    check that an existing one holds the same runs. A spec that keeps every stored run unchanged
    and adds runs (more variants, envs or seeds) extends the sweep: the manifest records the earlier
    spec. A run whose config would differ (another spec, or a preset redefined since the sweep
    started) is refused: nothing is overwritten and no stale result is mixed in. ``write=False``
    only checks (``--dry-run``)."""
    identity = {"spec": spec.data, "budget": budget}
    runs = _json({run.name: [run.kind, run.config] for run in spec.runs})
    manifest = sweep_dir / "manifest.json"
    if manifest.is_file():
        stored = read_manifest(sweep_dir)
        if stored.get("budget") != budget:
            raise ConfigError(f"{sweep_dir} holds a sweep of budget {stored.get('budget')!r}, not {budget!r}; "
                              "choose another --out")
        before = stored_runs(stored)
        same = {"spec": stored.get("spec"), "budget": stored.get("budget")} == _json(identity)
        changed = {name: diff for name in sorted(before or {}) if name in runs
                   and (diff := config_difference(before[name], runs[name]))}  # type: ignore[index]
        if changed:
            name, diff = next(iter(changed.items()))
            why = ("a preset changed since the sweep started" if same else
                   "a different spec; one that only adds variants, envs or seeds extends a sweep")
            raise ConfigError(f"{sweep_dir}: run {name} would now run with another config ({diff}: {why}); "
                              "choose another --out")
        if not same and (before is None or not set(before) <= set(runs)):
            raise ConfigError(f"{sweep_dir} holds a sweep of a different spec or budget; resume it with the same "
                              "spec (or one that only adds variants, envs or seeds), or choose another --out")
        if not write:
            return
        _make_folders(sweep_dir)  # a restored sweep (rlkit.ablation.records) or a deleted logs/ lacks some
        if not same:
            stored["extended_from"] = stored.get("extended_from", []) + [
                {"spec": stored["spec"], "until": time.strftime("%Y-%m-%d %H:%M:%S")}]
        if not same or "runs" not in stored:
            stored.update(spec=_json(spec.data), runs=runs)
            write_json(manifest, stored)
        return
    if sweep_dir.exists() and any(p.name != LOCK for p in sweep_dir.iterdir()):
        raise ConfigError(f"{sweep_dir} exists and is not a sweep directory; choose another --out")
    if not write:
        return
    _make_folders(sweep_dir)
    write_json(manifest, {**identity, "name": spec.name, "created": time.strftime("%Y-%m-%d %H:%M:%S"),
                          "git_commit": _git_commit(), "python": platform.python_version(),
                          "machine": f"{platform.node()} {platform.machine()}", "packages": _versions(),
                          "runs": runs})


def _make_folders(sweep_dir: Path) -> None:
    """The sweep's folders, each checked writable (an immutable ``status/`` would otherwise fail the
    first run to finish, in its worker)."""
    for sub in ("runs", "logs", "status"):
        try:
            (sweep_dir / sub).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"cannot write in {sweep_dir}: {exc.strerror or exc}") from None
        check_writable(sweep_dir / sub)


def read_manifest(sweep_dir: Path) -> dict[str, Any]:
    """The sweep's manifest; a one-line :class:`ConfigError` when there is none or it is damaged or
    of another shape (rlkit writes it atomically, so only an outside edit or copy damages it)."""
    manifest = sweep_dir / "manifest.json"
    if not manifest.is_file():
        smoke = Path(f"{sweep_dir}-smoke")
        hint = (f"; {smoke} holds the sweep run with --budget smoke" if (smoke / "manifest.json").is_file() else
                "; run rlkit sweep first")
        raise ConfigError(f"{sweep_dir} is not a sweep directory (no manifest.json){hint}")
    stored = read_json(manifest)
    problem = manifest_problem(stored)
    if problem:
        raise ConfigError(f"{manifest} is damaged ({problem}); restore it from a copy, or run the spec into "
                          "another --out (nothing here is changed)")
    return stored  # type: ignore[return-value]


def manifest_problem(stored: Any) -> str | None:
    """Why ``stored`` is not a sweep's manifest, or None: a JSON object with the sweep's ``spec`` (an
    object), its ``budget`` (a name or null), and, where present, its ``runs`` (run name -> ``[kind,
    config]``, each name one plain folder name) and ``extended_from`` (a list)."""
    if not isinstance(stored, dict) or not isinstance(stored.get("spec"), dict):
        return "not a JSON object with the sweep's spec"
    if not isinstance(stored.get("budget"), (str, type(None))):
        return "its budget is not a name or null"
    if not isinstance(stored.get("extended_from", []), list):
        return "its extended_from is not a list"
    runs = stored.get("runs", {})
    if not isinstance(runs, dict):
        return "its runs are not an object of run names"
    for name, entry in runs.items():  # names become paths: one plain folder name each
        if not (PLAIN_NAME.fullmatch(name) and len(name.encode()) <= MAX_RUN_NAME and isinstance(entry, list)
                and len(entry) == 2 and isinstance(entry[0], str) and isinstance(entry[1], dict)):
            return f"run {name[:80]!r} is not [kind, config] under a plain folder name"
    return None


def read_result(run_dir: Path, run: RunSpec) -> tuple[dict[str, Any] | None, str | None]:
    """``run``'s finished result (None: none yet, or damaged) and why it is damaged (None: it is not):
    a ``result.json`` that does not parse, or parses into another shape or another run's result
    (:func:`rlkit.io.schema.result_problem`), counts as no result."""
    path = run_dir / "result.json"
    value = read_json(path)
    if value is None:
        return None, "does not read as a JSON object" if path.exists() else None
    problem = result_problem(value, run.env, run.seed)
    return (None, problem) if problem else (value, None)


def read_status(sweep_dir: Path, run: RunSpec) -> dict[str, Any] | None:
    """``run``'s status file (None: none, or of another shape: counted as none)."""
    status = read_json(sweep_dir / "status" / f"{run.name}.json")
    return None if status_problem(status) else status


def status_damage(sweep_dir: Path, run: RunSpec, runs: list[RunSpec]) -> str | None:
    """What is wrong with ``run``'s status file where one exists but is of another shape, or names
    a pack that cannot be its own (None: it is whole, or there is none). A pack names ``run`` once,
    and otherwise only runs of ``runs`` of the same variant and env."""
    path = sweep_dir / "status" / f"{run.name}.json"
    if not path.exists():
        return None
    status = read_json(path)
    problem = "is not a JSON object" if status is None else status_problem(status)
    if problem or status.get("pack") is None:  # type: ignore[union-attr]
        return problem
    pack, mates = status["pack"], {r.name for r in runs if (r.variant, r.env) == (run.variant, run.env)}  # type: ignore[index]
    if len(set(pack)) != len(pack) or run.name not in pack:
        return "names a pack that lists a run twice or not this run"
    stranger = next((name for name in pack if name not in mates), None)
    return f"names a pack with {stranger}, not a run of this variant and env" if stranger else None


def _json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def stored_runs(stored: dict[str, Any]) -> dict[str, Any] | None:
    """The stored runs' ``[kind, config]`` by name: from the manifest, or (a manifest without
    ``runs``) the stored spec expanded with the current presets; None if that fails."""
    if isinstance(stored.get("runs"), dict):
        return stored["runs"]
    try:
        before = expand(stored["spec"], "manifest.json", stored.get("budget"))
    except (ConfigError, KeyError, TypeError):
        return None
    return _json({run.name: [run.kind, run.config] for run in before.runs})


def config_difference(old: list[Any], new: list[Any]) -> str | None:
    """The first difference between two runs' ``[kind, config]`` (None: the same run). A field
    one side lacks counts as its default, so a field added to rlkit since a sweep started (with a
    default that keeps the old behaviour) does not stop the sweep from resuming; where a default
    changed, the stored run reads as :func:`migrate_config` says it ran."""
    if old[0] != new[0]:
        return f"kind {old[0]} -> {new[0]}"
    before, after = {**_DEFAULTS, **migrate_config(old[1], "gym")}, {**_DEFAULTS, **new[1]}
    key = next((k for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)), None)
    return None if key is None else f"{key} {before.get(key)!r} -> {after.get(key)!r}"


_DEFAULTS: dict[str, Any] = json.loads(json.dumps(TrainConfig().to_dict()))
"""A run config's defaults, as a manifest stores them (JSON)."""


def write_tables(sweep_dir: Path, spec: SweepSpec, keep_finished: bool = False) -> tuple[int, int, int]:
    """Rebuild results.csv and runs.csv (each replaced whole, so a report reading them while a
    sweep rewrites them never sees half a table); returns (done, failed, missing) run counts.
    ``keep_finished``: refuse (one-line :class:`ConfigError`, nothing written) a rebuild that would
    drop a run the present runs.csv lists as done and whose folder is gone, as in a folder of tables
    without its runs (a run folder without its result is the run's own state: it counts)."""
    counts = {"done": 0, "failed": 0, "missing": 0}
    rf, uf = io.StringIO(newline=""), io.StringIO(newline="")
    results, runs = csv.DictWriter(rf, RESULT_COLUMNS), csv.DictWriter(uf, RUN_COLUMNS)
    results.writeheader()
    runs.writeheader()
    damages = {run.name: status_damage(sweep_dir, run, spec.runs) for run in spec.runs}
    statuses = {run.name: {k: v for k, v in (read_status(sweep_dir, run) or {}).items()  # a damaged one's cost unread
                           if not (damages[run.name] and k in ("pack", "seconds"))} for run in spec.runs}
    sizes = pack_sizes(spec.runs, statuses)
    for run in spec.runs:
        row, evaluations = _run_row(sweep_dir, run, statuses[run.name], sizes[run.name])
        damage = damages[run.name] if row["status"] == "done" else None
        if damage:  # how long it trained, alone or in a pack, is unknown: no cost is shown rather than a wrong one
            row.update({k: None for k in COST_COLUMNS},
                       error=f"status/{run.name}.json {damage}: its cost columns are left empty")
        counts[row["status"]] += 1
        runs.writerow(row)
        results.writerows(evaluations)
    if keep_finished:
        _refuse_dropping(sweep_dir, uf.getvalue())
    write_atomic(sweep_dir / "results.csv", rf.getvalue())
    write_atomic(sweep_dir / "runs.csv", uf.getvalue())
    return counts["done"], counts["failed"], counts["missing"]


def _done_runs(text: str) -> set[str]:
    """The run folders a runs.csv text lists as done."""
    return {row.get("run_dir") or "" for row in csv.DictReader(io.StringIO(text)) if row.get("status") == "done"}


def _refuse_dropping(sweep_dir: Path, rebuilt: str) -> None:
    try:
        present = (sweep_dir / "runs.csv").read_text()
    except (OSError, UnicodeDecodeError):
        return
    lost = sorted(r for r in _done_runs(present) - _done_runs(rebuilt) if not (sweep_dir / r).exists())
    if lost:
        raise ConfigError(f"{sweep_dir}: runs.csv lists {len(lost)} finished run(s) whose folders are gone "
                          f"(first: {lost[0]}); rebuilding the tables would drop them, so nothing was written "
                          "(restore the runs, e.g. with rlkit records restore)")


def pack_sizes(runs: list[Any], statuses: dict[str, dict[str, Any]]) -> dict[str, int]:
    """Per run: how many runs trained in its pack (1: alone), from its status file's ``pack``, or
    (a status that names no pack) the runs of its (variant, env) whose status
    holds the same ``seconds``, which a pack writes to each of its members."""
    shared: dict[tuple[str, str, float], int] = {}
    for run in runs:
        seconds = statuses[run.name].get("seconds")
        if isinstance(seconds, float):
            key = (run.variant, run.env, seconds)
            shared[key] = shared.get(key, 0) + 1
    sizes = {}
    for run in runs:
        status = statuses[run.name]
        if isinstance(status.get("pack"), list) and status["pack"]:
            sizes[run.name] = len(status["pack"])
        else:
            sizes[run.name] = shared.get((run.variant, run.env, status.get("seconds")), 1)  # type: ignore[arg-type]
    return sizes


def _run_row(sweep_dir: Path, run: Any, recorded: dict[str, Any],
             pack: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    run_dir = sweep_dir / "runs" / run.name
    row: dict[str, Any] = {"variant": run.variant, "env": run.env, "seed": run.seed, "kind": run.kind,
                           "status": "missing", "error": "", "run_dir": str(run_dir.relative_to(sweep_dir))}
    res, damaged = read_result(run_dir, run)
    past = run.past_budget(res, newest_checkpoint_steps(run_dir)) if res is not None else None
    if past:
        row.update(status="failed", error=past)
        return row, []
    if damaged:  # not counted: the sweep resumes the run from its checkpoints
        row.update(error=f"result.json {damaged}: not counted; the next rlkit sweep resumes the run")
    if res is not None:
        sps = res.get("steps_per_second") or 0.0  # its steps per second of its process's (its pack's) training
        seconds = (res.get("total_steps") or 0) / sps if sps else None
        run_seconds = recorded.get("seconds")
        row.update(status="done", final_return=res.get("eval_return_mean"), total_steps=res.get("total_steps"),
                   train_return_last100=res.get("train_return_last100"),
                   steps_per_second=sps * pack, train_seconds=seconds / pack if seconds is not None else None,
                   run_seconds=run_seconds / pack if isinstance(run_seconds, (int, float)) else None,
                   pack_size=pack, pack_steps_per_second=sps * pack, pack_train_seconds=seconds)
        seconds = res.get("eval_seconds") or [None] * len(res.get("eval_history", []))
        evaluations = [{"variant": run.variant, "env": run.env, "seed": run.seed, "kind": run.kind, "step": step,
                        "wall_s": wall, "eval_return_mean": mean, "eval_return_std": std}
                       for (step, mean, std), wall in zip(res.get("eval_history", []), seconds)]
        return row, evaluations
    if recorded.get("status") == "failed":
        row.update(status="failed", error=recorded.get("error", ""))
    return row, []
