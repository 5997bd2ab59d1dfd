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
record, and a file in the destination that differs from the one it would get (nothing is
overwritten; an identical file is left as it is). Every file is written atomically.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rlkit.ablation.results import LOCK, config_difference, stored_runs
from rlkit.errors import ConfigError
from rlkit.io.files import read_json, write_atomic
from rlkit.io.lock import FolderLock

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


def _manifest(folder: Path, what: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A manifest and its runs' ``[kind, config]`` by name; a one-line error if missing or damaged."""
    stored = read_json(folder / "manifest.json")
    runs = stored_runs(stored) if stored is not None and isinstance(stored.get("spec"), dict) else None
    if runs is None:
        state = "has no manifest.json" if not (folder / "manifest.json").exists() else "has a damaged manifest.json"
        raise ConfigError(f"{folder} {state}, so it is not {what}")
    return stored, runs


def _check_same_sweep(source: Path, source_runs: dict[str, Any], dest: Path, dest_runs: dict[str, Any]) -> None:
    """Every run the source names is a run of the destination's sweep, with the same config."""
    for name in sorted(source_runs):
        if name not in dest_runs:
            raise ConfigError(f"{source} holds run {name}, which the sweep of {dest} does not: records of another "
                              "sweep; choose another destination")
        if diff := config_difference(dest_runs[name], source_runs[name]):
            raise ConfigError(f"{source} and {dest} disagree on run {name} ({diff}): records of another sweep; "
                              "choose another destination")


def _finished(folder: Path, name: str) -> dict[str, str] | None:
    """The run's result and status texts when both are whole and the status says done, else None."""
    result, status = folder / "runs" / name / "result.json", folder / "status" / f"{name}.json"
    if read_json(result) is None or (read_json(status) or {}).get("status") != "done":
        return None
    return {f"runs/{name}/result.json": result.read_text(), f"status/{name}.json": status.read_text()}


def _plan_copy(source: Path, runs: list[str], dest: Path, damaged: str | None
               ) -> tuple[dict[str, str], RecordsSummary]:
    """The files to write (relative path -> text) and the runs' counts. ``damaged`` (the advice
    for records) makes a record that is there but not whole an error."""
    files: dict[str, str] = {}
    copied = present = unfinished = 0
    for name in runs:
        record = _finished(source, name)
        if record is None:
            if damaged and ((source / "runs" / name).exists() or (source / "status" / f"{name}.json").exists()):
                raise ConfigError(f"{source}: the record of run {name} is damaged or not finished ({damaged})")
            unfinished += 1
            continue
        there = {rel: (dest / rel).read_text() for rel in record if (dest / rel).is_file()}
        for rel, text in there.items():
            if text != record[rel]:
                raise ConfigError(f"{dest / rel} differs from {source / rel}; nothing was written (move one of "
                                  "them aside to choose)")
        if len(there) == len(record):
            present += 1
        else:
            copied += 1
            files.update({rel: text for rel, text in record.items() if rel not in there})
    return files, RecordsSummary(copied, present, unfinished)


def _write(dest: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        write_atomic(dest / rel, text)


def keep_records(sweep_dir: str | Path, records_dir: str | Path) -> RecordsSummary:
    """Copy the finished runs' records of ``sweep_dir`` (a sweep running there or not) into
    ``records_dir``; the records' manifest becomes the sweep's (the same runs, or an extension)."""
    sweep, records = Path(sweep_dir), Path(records_dir)
    stored, runs = _manifest(sweep, "a sweep directory")
    if records.exists() and not records.is_dir():
        raise ConfigError(f"{records} is a file, not a records directory")
    records.mkdir(parents=True, exist_ok=True)
    with FolderLock(records, RECORDS_LOCK, "rlkit records keep", "run this command again"):
        if (records / "manifest.json").exists():
            _check_same_sweep(records, _manifest(records, "a records directory")[1], sweep, runs)
        files, summary = _plan_copy(sweep, list(runs), records, damaged=None)
        manifest = (sweep / "manifest.json").read_text()
        if not (records / "manifest.json").is_file() or (records / "manifest.json").read_text() != manifest:
            files["manifest.json"] = manifest
        _write(records, files)
    return summary


def restore_records(records_dir: str | Path, sweep_dir: str | Path) -> RecordsSummary:
    """Copy the records of ``records_dir`` into ``sweep_dir`` (created with the records' manifest
    if it is not a sweep directory yet), which no sweep may be running in."""
    from rlkit.ablation.sweep import sweep_lock

    records, sweep = Path(records_dir), Path(sweep_dir)
    if not records.is_dir():
        raise ConfigError(f"{records} is not a records directory")
    _, runs = _manifest(records, "a records directory")
    if sweep.exists() and not sweep.is_dir():
        raise ConfigError(f"{sweep} is a file, not a sweep directory")
    with sweep_lock(sweep):
        if (sweep / "manifest.json").exists():
            _check_same_sweep(records, runs, sweep, _manifest(sweep, "a sweep directory")[1])
        elif any(p.name != LOCK for p in sweep.iterdir()):
            raise ConfigError(f"{sweep} exists and is not a sweep directory; choose another destination")
        files, summary = _plan_copy(records, list(runs), sweep, damaged="restore it from git")
        if not (sweep / "manifest.json").exists():
            files["manifest.json"] = (records / "manifest.json").read_text()
        for sub in ("runs", "logs", "status"):
            (sweep / sub).mkdir(exist_ok=True)
        _write(sweep, files)
    return summary
