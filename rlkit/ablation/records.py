"""A sweep's finished runs as records: its manifest and each finished run's ``result.json`` and
status file, which is all that ``results.csv``, ``runs.csv`` and ``rlkit report`` read.

``keep`` copies the records of a sweep directory into a records directory (to commit, or to carry
to another machine); ``restore`` copies them into a sweep directory, after which ``rlkit sweep``
counts those runs done and runs the rest. A long sweep on a machine whose disk does not outlive
the session so loses only its runs in flight. TensorBoard events and checkpoints are not records:
a restored run is reported, not evaluated or resumed.

Layout of a records directory::

    manifest.json          the sweep's manifest (its spec and every run's config)
    runs/<run>/result.json each finished run's result
    status/<run>.json      its status file ("done" and the seconds it ran)

Both check everything before writing anything, and refuse in one line: records of another sweep (a
run both name with another config, or a run the destination's sweep does not hold), a damaged
record (a result that is not its run's finished result: another seed's, past the budget, not a
result at all), and a file in the destination that differs from the one it would get. No record
is overwritten (an identical file is left as it is); the one file replaced is the records'
manifest, by the sweep's when that holds the same runs or extends them. Every file is written
atomically, the manifest first, so a copy stopped half-way is finished by the same command.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlkit.ablation.results import LOCK, config_difference, manifest_problem, stored_runs
from rlkit.ablation.spec import RunSpec
from rlkit.errors import ConfigError
from rlkit.io.files import read_json, write_atomic
from rlkit.io.lock import FolderLock
from rlkit.io.schema import result_problem, status_problem

RECORDS_LOCK = ".rlkit-records.lock"
"""The file ``keep`` holds locked in a records directory while it writes there."""


@dataclass(frozen=True)
class RecordsSummary:
    """What one ``keep`` or ``restore`` did."""

    copied: int
    """Runs whose records were written to the destination."""
    present: int
    """Runs whose records the destination held already (identical)."""
    unfinished: int
    """Runs of the source's sweep without a finished record (in flight, failed or not started)."""

    def to_json(self) -> dict[str, int]:
        return dict(self.__dict__)


def _manifest(folder: Path, what: str) -> dict[str, Any]:
    """A manifest's runs' ``[kind, config]`` by name; a one-line error if missing, damaged or of
    another shape (:func:`rlkit.ablation.results.manifest_problem`)."""
    stored = read_json(folder / "manifest.json")
    problem = manifest_problem(stored)
    runs = stored_runs(stored) if problem is None else None  # type: ignore[arg-type]
    if runs is None:
        state = "has no manifest.json" if not (folder / "manifest.json").exists() else \
            f"has a damaged manifest.json ({problem or 'its spec does not expand'})"
        raise ConfigError(f"{folder} {state}, so it is not {what}")
    return runs


def _check_same_sweep(source: Path, source_runs: dict[str, Any], dest: Path, dest_runs: dict[str, Any]) -> None:
    """Every run the source names is a run of the destination's sweep, with the same config."""
    for name in sorted(source_runs):
        if name not in dest_runs:
            raise ConfigError(f"{source} holds run {name}, which the sweep of {dest} does not: records of another "
                              "sweep (choose another destination) or of this sweep extended (run rlkit sweep with "
                              "the extended spec there first)")
        if diff := config_difference(dest_runs[name], source_runs[name]):
            raise ConfigError(f"{source} and {dest} disagree on run {name} ({diff}): records of another sweep; "
                              "choose another destination")


def _not_its_result(result: dict[str, Any], entry: list[Any]) -> str | None:
    """Why ``result`` is not a finished result of the run ``entry`` (``[kind, config]``), or None."""
    kind, config = entry
    if result_problem(result):
        return "not a finished run's result"
    if (result.get("env"), result.get("seed")) != (config.get("env"), config.get("seed")):
        return f"the result of {result.get('env')} seed {result.get('seed')}"
    return RunSpec("", str(config.get("env")), 0, kind, config).past_budget(result)


@dataclass(frozen=True)
class _RunRecord:
    """What a folder holds of one run."""

    files: dict[str, str] | None
    """The run's result and status texts by relative path when both are whole, the result is the
    run's own and the status says done; else None."""
    damaged: bool
    """A file of the run is there but not so. The run's own result without a status is not damaged:
    a keep stopped between the two."""


def _finished(folder: Path, name: str, entry: list[Any]) -> _RunRecord:
    """The record ``folder`` holds of run ``name`` (``entry``: its manifest ``[kind, config]``)."""
    result, status = folder / "runs" / name / "result.json", folder / "status" / f"{name}.json"
    value = read_json(result)
    own = value is not None and not _not_its_result(value, entry)
    recorded = read_json(status)
    if own and status_problem(recorded) is None and recorded["status"] == "done":  # type: ignore[index]
        texts = {f"runs/{name}/result.json": result.read_text(), f"status/{name}.json": status.read_text()}
        return _RunRecord(texts, damaged=False)
    return _RunRecord(None, damaged=status.exists() or (result.exists() and not own))


@dataclass(frozen=True)
class _CopyPlan:
    """What a copy from one folder to another writes, and what it found."""

    files: dict[str, str]
    """The texts to write by relative path (the runs' files that the destination lacks)."""
    summary: RecordsSummary
    """The runs copied, already present and not finished."""


def _text(path: Path) -> str | None:
    """The text of ``path`` (None: there is none); a folder or an unreadable file is a one-line error."""
    if not path.exists() and not path.is_symlink():
        return None
    if not path.is_file():
        raise ConfigError(f"{path} is in the way (not a file); nothing was written (move it aside)")
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path} ({exc}); nothing was written (move it aside)") from None


def _plan_copy(source: Path, runs: dict[str, Any], dest: Path, damaged: str | None
               ) -> _CopyPlan:
    """The files to write and the runs' counts. ``damaged`` (the advice for records) makes a record
    that is there but not whole an error."""
    files: dict[str, str] = {}
    copied = present = unfinished = 0
    for name in runs:
        record = _finished(source, name, runs[name])
        if record.files is None:
            if damaged and record.damaged:
                raise ConfigError(f"{source}: the record of run {name} is damaged or not finished ({damaged})")
            unfinished += 1
            continue
        there = {rel: text for rel in record.files if (text := _text(dest / rel)) is not None}
        for rel, text in there.items():
            if text != record.files[rel]:
                raise ConfigError(f"{dest / rel} differs from {source / rel}; nothing was written (move one of "
                                  "them aside to choose)")
        if len(there) == len(record.files):
            present += 1
        else:
            copied += 1
            files.update({rel: text for rel, text in record.files.items() if rel not in there})
    return _CopyPlan(files, RecordsSummary(copied, present, unfinished))


def _write(dest: Path, files: dict[str, str]) -> None:
    """The manifest first: a copy stopped half-way leaves a sweep (records) directory that the same
    command (or ``rlkit sweep``) takes up again."""
    try:
        for rel in sorted(files, key=lambda rel: rel != "manifest.json"):
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            write_atomic(dest / rel, files[rel])
    except OSError as exc:
        raise ConfigError(f"cannot write in {dest}: {exc.strerror or exc}; run the same command again once it "
                          "can (every file written is whole)") from None


def _mkdir(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot use {folder}: {exc.strerror or exc}") from None


def _check_two_folders(source: Path, dest: Path) -> None:
    if source.resolve() == dest.resolve():
        raise ConfigError(f"{source} is both the source and the destination; name two directories")


ORIGIN = ("created", "git_commit", "machine")
"""A sweep directory's manifest fields that no resume or extension changes: where its runs came from."""


def _check_same_origin(records: Path, sweep: Path) -> None:
    """The records' manifest names the sweep directory they were kept from (or restored into):
    another one's, even of the same spec, would replace the commit and machine the records ran on."""
    held, given = (read_json(folder / "manifest.json") for folder in (records, sweep))
    differ = [k for k in ORIGIN if held.get(k) != given.get(k)]
    if differ:
        k = differ[0]
        raise ConfigError(f"{records} holds the records of another sweep directory ({k} {held.get(k)!r}, the "
                          f"sweep's {given.get(k)!r}); keeping would replace their provenance: choose another "
                          "destination")


def keep_records(sweep_dir: str | Path, records_dir: str | Path) -> RecordsSummary:
    """Copy the finished runs' records of ``sweep_dir`` (a sweep running there or not) into
    ``records_dir``; the records' manifest becomes the sweep's (the same runs, or an extension)."""
    sweep, records = Path(sweep_dir), Path(records_dir)
    _check_two_folders(sweep, records)
    runs = _manifest(sweep, "a sweep directory")
    if records.exists() and not records.is_dir():
        raise ConfigError(f"{records} is a file, not a records directory")
    if records.is_dir() and not (records / "manifest.json").exists() and any(
            p.name != RECORDS_LOCK and p.name not in ("runs", "status") for p in records.iterdir()):
        raise ConfigError(f"{records} exists and is not a records directory; choose another destination")
    _mkdir(records)
    with contextlib.ExitStack() as held:
        held.enter_context(FolderLock(records, RECORDS_LOCK, "rlkit records keep", "run this command again"))
        if (records / LOCK).exists():  # a sweep directory (restored into): never while a sweep runs there
            held.enter_context(FolderLock(records, LOCK, "rlkit sweep", "run this command again"))
        if (records / "manifest.json").exists():
            _check_same_sweep(records, _manifest(records, "a records directory"), sweep, runs)
            _check_same_origin(records, sweep)
        plan = _plan_copy(sweep, runs, records, damaged=None)
        manifest = (sweep / "manifest.json").read_text()
        if not (records / "manifest.json").is_file() or (records / "manifest.json").read_text() != manifest:
            plan.files["manifest.json"] = manifest
        _write(records, plan.files)
    return plan.summary


def restore_records(records_dir: str | Path, sweep_dir: str | Path) -> RecordsSummary:
    """Copy the records of ``records_dir`` into ``sweep_dir`` (created with the records' manifest
    if it is not a sweep directory yet), which no sweep may be running in."""
    from rlkit.ablation.sweep import sweep_lock

    records, sweep = Path(records_dir), Path(sweep_dir)
    _check_two_folders(records, sweep)
    if not records.is_dir():
        raise ConfigError(f"{records} is not a records directory")
    runs = _manifest(records, "a records directory")
    if sweep.exists() and not sweep.is_dir():
        raise ConfigError(f"{sweep} is a file, not a sweep directory")
    if not sweep.exists():  # the records checked before the destination is made
        _plan_copy(records, runs, sweep, damaged="restore it from git")
    with sweep_lock(sweep):
        if (sweep / "manifest.json").exists():
            _check_same_sweep(records, runs, sweep, _manifest(sweep, "a sweep directory"))
        elif any(p.name != LOCK for p in sweep.iterdir()):
            raise ConfigError(f"{sweep} exists and is not a sweep directory; choose another destination")
        plan = _plan_copy(records, runs, sweep, damaged="restore it from git")
        if not (sweep / "manifest.json").exists():
            plan.files["manifest.json"] = (records / "manifest.json").read_text()
        for sub in ("runs", "logs", "status"):
            (sweep / sub).mkdir(exist_ok=True)
        _write(sweep, plan.files)
    return plan.summary
