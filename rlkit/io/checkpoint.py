"""Checkpoints: safetensors for tensors, JSON for everything else; never pickle.

Layout: ``RUN_DIR/checkpoints/update-000123/{tensors.safetensors,state.json}`` and
``RUN_DIR/checkpoints/latest.json`` pointing at the newest complete one. A checkpoint is
written to a temporary folder and renamed, then the pointer is replaced atomically, so a
kill at any moment leaves the previous checkpoint intact.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

from rlkit.errors import CheckpointError, ConfigError, one_line, unreadable_checkpoint
from rlkit.io.files import is_partial, mode_as_created, read_json, write_json

if TYPE_CHECKING:  # torch starts where tensors are read or written, not where checkpoints are only looked at
    import torch

log = logging.getLogger("rlkit")

LATEST = "latest.json"
EXACT = "resumes_exactly"
"""``state.json`` key, False on a checkpoint whose continuation is not the uninterrupted run's (a
Gymnasium run stopped by a signal between two scheduled checkpoints: its envs were mid-episode).
A resume that promises the same numbers starts from the newest checkpoint without it."""


def save_file(tensors: dict[str, torch.Tensor], path: str) -> None:
    """safetensors' ``save_file``, imported at the first write (looking at checkpoints starts no torch)."""
    from safetensors.torch import save_file as write

    write(tensors, path)
    mode_as_created(path)


def load_file(path: str) -> dict[str, torch.Tensor]:
    """safetensors' ``load_file``, imported at the first read. The bytes are read into the tensors
    (``pread``), not mapped: a mapped file stays mapped while any tensor made from it lives, so the
    pages of a tensor copied elsewhere and dropped (a resume's parameters) stayed resident beside
    the ones kept (Adam's moments), and the tensors never depend on the file afterwards."""
    from safetensors.torch import load_file as read

    return read(path, backend="pread")


def save_checkpoint(run_dir: str | Path, name: str, tensors: dict[str, torch.Tensor], state: dict[str, Any],
                    keep: int = 2) -> Path:
    """Write checkpoint ``name`` atomically (a hidden temporary folder renamed into place, then the
    ``latest.json`` pointer replaced), keep the ``keep`` newest. A failure (a full disk) leaves the
    previous checkpoint as the latest and is a one-line :class:`CheckpointError`."""
    root = Path(run_dir) / "checkpoints"
    final = root / name
    tmp = root / f".{name}.tmp"
    try:
        root.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()}, str(tmp / "tensors.safetensors"))
        (tmp / "state.json").write_text(json.dumps(state, indent=1))
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)
        write_json(root / LATEST, {"checkpoint": name}, indent=None)
    except Exception as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else one_line(exc)
        raise CheckpointError(f"could not write checkpoint {name} in {str(root)!r}: {reason}; "
                              "the previous checkpoint (if any) is intact") from None
    # Only checkpoints are pruned ("update-0000097", "iteration-000012"): other folders a user keeps there stay.
    old = sorted(p for p in root.iterdir()
                 if p.is_dir() and re.fullmatch(r"[a-z]+-\d+", p.name) and _holds_checkpoint(p))
    for stale in old[:-keep] if keep > 0 else []:
        if stale != final:
            shutil.rmtree(stale, ignore_errors=True)
    # A killed writer's leftovers (the run's lock makes this process the only writer).
    for leftover in [p for p in root.iterdir() if is_partial(p.name)]:
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            leftover.unlink(missing_ok=True)
    return final


def check_run_name(name: str) -> None:
    """A run name is one path component: not empty, not ``.`` or ``..``, no separator, <= 255 bytes."""
    if not name or name in (".", "..") or "/" in name or os.sep in name or "\0" in name:
        raise ConfigError(f"run name {name!r} must be one folder name (no '/', not '.' or '..')")
    if len(name.encode()) > 255:
        raise ConfigError(f"run name is {len(name.encode())} bytes long; at most 255")


def new_run_dir(logdir: str | Path, name: str, numbered: bool = False) -> Path:
    """Create ``logdir/name`` for a new run with one atomic, exclusive ``mkdir``: two runs never
    share a directory and nothing already written is overwritten. An existing name is refused,
    or with ``numbered`` the next free ``name-2``, ``name-3``, ... is taken (default names)."""
    check_run_name(name)
    root = Path(logdir)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create logdir {str(root)!r}: {exc.strerror or exc}") from None
    for i in itertools.count(1):
        run_dir = root / (name if i == 1 else f"{name}-{i}")
        try:
            run_dir.mkdir()
            return run_dir
        except FileExistsError:
            if numbered:
                continue
            what = "has checkpoints" if (run_dir / "checkpoints").exists() else "exists"
            raise ConfigError(f"run directory {str(run_dir)!r} already {what}; "
                              "pass --resume it or choose another --run-name") from None
        except OSError as exc:
            raise ConfigError(f"cannot create run directory {str(run_dir)!r}: {exc.strerror or exc}") from None
    raise AssertionError("unreachable")


POPULATION_MARKER = "population.json"
"""In a run directory trained as a member of a population: that population's seeds and run directories."""


def discard_unused(run_dir: Path) -> None:
    """Remove ``run_dir`` if it holds nothing but its lock file and half-written files (a writer's
    ``.NAME.PID.tmp``, left by a kill before its rename): a new run whose start-up failed before it
    wrote anything (so its name can be used again)."""
    from rlkit.io.lock import RUN_LOCK

    try:
        names = {p.name for p in run_dir.iterdir()}
        partial = {n for n in names if is_partial(n)}
        if names - partial <= {RUN_LOCK}:
            for name in partial | {RUN_LOCK}:
                (run_dir / name).unlink(missing_ok=True)
            run_dir.rmdir()
    except OSError:
        pass  # written meanwhile, or not ours to remove: it stays


def run_dir_of(path: str | Path) -> Path:
    """``RUN_DIR`` from a run directory, its ``checkpoints`` folder or one checkpoint folder (a path
    that does not resolve, e.g. a symlink loop, is a one-line :class:`CheckpointError`)."""
    try:
        run_dir = Path(path).resolve()
    except (OSError, RuntimeError) as exc:
        raise CheckpointError(f"cannot resume {str(path)!r}: {one_line(exc)}") from None
    while run_dir.name == "checkpoints" or (run_dir / "state.json").is_file():
        run_dir = run_dir.parent
    return run_dir


def checkpoint_candidates(path: str | Path) -> list[Path]:
    """Checkpoint folders at ``path`` (a run directory, its ``checkpoints`` folder or one
    checkpoint), newest first: the one ``latest.json`` names, then the others by name."""
    path = Path(path)
    if (path / "state.json").is_file():
        return [path]
    root = path / "checkpoints" if (path / "checkpoints").is_dir() else path
    if not root.is_dir():
        return []
    pointed = _pointed(root)  # None: no pointer, or a garbled one: fall back to the folders themselves
    named = [root / pointed] if pointed else []
    others = sorted((p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")), reverse=True)
    return [p for p in dict.fromkeys(named + others) if _holds_checkpoint(p)]


def _holds_checkpoint(folder: Path) -> bool:
    """A checkpoint folder holds its state or its tensors (either may be damaged)."""
    return (folder / "state.json").is_file() or (folder / "tensors.safetensors").is_file()


def _pointed(root: Path) -> str | None:
    """The checkpoint name ``root/latest.json`` holds (None: no pointer, or a damaged one, e.g. a
    path leading out of ``root``)."""
    name = (read_json(root / LATEST) or {}).get("checkpoint")
    plain = isinstance(name, str) and name not in ("", ".", "..") and "/" not in name and "\\" not in name \
        and len(name.encode("utf-8", "replace")) <= 255
    return name if plain else None


def newest_checkpoint_steps(run_dir: str | Path) -> int | None:
    """Env steps of the checkpoint ``latest.json`` names (None: none, or unreadable)."""
    name = _pointed(Path(run_dir) / "checkpoints")
    state = read_json(Path(run_dir) / "checkpoints" / name / "state.json") if name else None
    steps = state.get("env_steps") if state else None
    return steps if isinstance(steps, int) and not isinstance(steps, bool) else None


def newest_config(path: str | Path) -> dict[str, Any] | None:
    """The config stored in the newest checkpoint at ``path`` (None: none, or unreadable). A
    checkpoint written at an interrupt holds the settings the run last ran with (an extension's
    ``total_steps``) even when a resume continues from an older, scheduled one."""
    candidates = checkpoint_candidates(path)
    state = read_json(candidates[0] / "state.json") if candidates else None
    config = state.get("config") if isinstance(state, dict) else None
    return config if isinstance(config, dict) else None


def no_checkpoint_error(path: str | Path) -> CheckpointError:
    """The one-line error for a ``path`` with no checkpoint, saying what the folder is instead:
    a sweep directory, a folder of runs, an RLHF run's final policy or nothing at all."""
    folder = Path(path)
    runs = _runs_in(folder)
    if (folder / "manifest.json").is_file() and (folder / "runs").is_dir():
        why = f"it is a sweep directory; give one of its runs: {folder / 'runs' / '<run>'}"
    elif runs:
        why = f"it holds {len(runs)} run(s), e.g. {folder / runs[0]}"
    elif (folder / "policy.safetensors").is_file():
        why = "it is an RLHF run without checkpoints (its final policy is policy.safetensors)"
    elif folder.is_file():
        why = "it is a file, not a run directory"
    elif not folder.exists():
        why = "no such folder"
    elif not os.access(folder, os.R_OK | os.X_OK):
        why = "permission denied"
    else:
        why = "expected a run directory with checkpoints/"
    return CheckpointError(f"no checkpoint found at {str(path)!r}: {why}")


def _runs_in(folder: Path) -> list[str]:
    """Names of the run directories (see :func:`is_run_dir`) directly in ``folder``."""
    try:
        return sorted(p.name for p in folder.iterdir() if is_run_dir(p))
    except OSError:
        return []


def is_run_dir(path: str | Path) -> bool:
    """Whether ``path`` holds an rlkit run: a checkpoint, or the ``config.json`` a run writes when
    it starts (a flat record with its seed and its length), not any folder's ``config.json``."""
    if checkpoint_candidates(path):
        return True
    record = read_json(Path(path) / "config.json")
    return record is not None and "seed" in record and ("total_steps" in record or "iterations" in record)


def resolve_checkpoint(path: str | Path) -> Path:
    """The newest checkpoint folder at ``path`` (not verified; :func:`load_checkpoint` verifies)."""
    candidates = checkpoint_candidates(path)
    if not candidates:
        raise no_checkpoint_error(path)
    return candidates[0]


def read_checkpoint(ckpt: Path, required: tuple[str, ...] = ()) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """Tensors and JSON state of one checkpoint folder, verified to parse and to hold ``required`` keys."""
    try:
        tensors = load_file(str(ckpt / "tensors.safetensors"))
        state = json.loads((ckpt / "state.json").read_text())
    except Exception as exc:  # safetensors raises its own error type on a truncated file
        raise unreadable_checkpoint(ckpt, exc) from None
    missing = [k for k in required if not isinstance(state, dict) or k not in state]
    if missing:
        raise CheckpointError(f"checkpoint {str(ckpt)!r} lacks {', '.join(missing)} in state.json")
    return tensors, state


@contextlib.contextmanager
def checkpoint_tensors(ckpt: Path) -> Iterator[Callable[[Callable[[str], bool]], dict[str, torch.Tensor]]]:
    """``read(keep)``: the tensors of checkpoint folder ``ckpt`` whose names ``keep`` accepts, each
    read on its own (``pread``) from one open file. A trainer restoring a checkpoint in parts (the
    parameters, then Adam's moments) holds only the part in hand beside its model, and every part
    comes from the same file, even one replaced meanwhile. Unreadable: a one-line :class:`CheckpointError`."""
    from safetensors import safe_open

    try:
        handle = safe_open(str(ckpt / "tensors.safetensors"), framework="pt", device="cpu", backend="pread")
    except Exception as exc:  # safetensors raises its own error type on a truncated file
        raise unreadable_checkpoint(ckpt, exc) from None

    def read(keep: Callable[[str], bool]) -> dict[str, torch.Tensor]:
        try:
            return {k: handle.get_tensor(k) for k in handle.keys() if keep(k)}
        except Exception as exc:
            raise unreadable_checkpoint(ckpt, exc) from None

    with handle:
        yield read


def load_checkpoint(path: str | Path, required: tuple[str, ...] = ("config",)
                    ) -> tuple[dict[str, torch.Tensor], dict[str, Any], Path]:
    """The newest checkpoint at ``path`` that reads back whole; an older one when the newest is
    damaged (logged as a warning), a one-line :class:`CheckpointError` when none is."""
    candidates = checkpoint_candidates(path)
    if not candidates:
        raise no_checkpoint_error(path)
    return _first_readable(candidates, required)


def _first_readable(candidates: list[Path], required: tuple[str, ...]
                    ) -> tuple[dict[str, torch.Tensor], dict[str, Any], Path]:
    errors = []
    for ckpt in candidates:
        try:
            tensors, state = read_checkpoint(ckpt, required)
        except CheckpointError as exc:
            errors.append(str(exc))
            continue
        if errors:
            log.warning("%s; using the older checkpoint %s", errors[0], ckpt.name)
        return tensors, state, ckpt
    more = f" (and {len(errors) - 1} older checkpoint(s) unreadable too)" if len(errors) > 1 else ""
    raise CheckpointError(errors[0] + more)


def resumes_exactly(ckpt: Path) -> bool:
    """Whether resuming from ``ckpt`` continues as the uninterrupted run (see :data:`EXACT`; an
    unreadable ``state.json`` counts as exact here, and is refused or skipped when it is read)."""
    state = read_json(ckpt / "state.json")
    return not (isinstance(state, dict) and state.get(EXACT) is False)


def find_resume_point(path: str | Path, required: tuple[str, ...], exact: bool = False
                      ) -> tuple[dict[str, torch.Tensor], dict, Path] | None:
    """The checkpoint to resume from (tensors, state, folder), or None for a run that starts again from its ``config.json``:
    it never completed a checkpoint (e.g. the disk filled during the first one), or, with
    ``exact``, its only checkpoints were written off its cadence (see :data:`EXACT`)."""
    candidates = checkpoint_candidates(path)
    if len(candidates) == 1 and (Path(path) / "state.json").is_file() and not resumes_exactly(candidates[0]):
        # one checkpoint named, written at an interrupt: its run's scheduled ones up to it stand in
        candidates += [c for c in checkpoint_candidates(run_dir_of(path)) if c.name < candidates[0].name]
    fresh = (run_dir_of(path) / "config.json").is_file()
    if not candidates and fresh:  # (the caller says so once it has checked the run's config)
        return None
    usable = [c for c in candidates if resumes_exactly(c)] if exact else candidates
    if candidates and not usable and fresh:
        log.warning("%s was stopped before its first scheduled checkpoint: it starts again from its beginning "
                    "and recomputes the same numbers as an uninterrupted run", run_dir_of(path))
        return None
    if usable and usable[0] != candidates[0]:
        log.warning("%s was written at an interrupt; resuming from %s, the newest scheduled checkpoint, to the "
                    "same numbers as an uninterrupted run", candidates[0].name, usable[0].name)
    if not candidates:
        raise no_checkpoint_error(path)
    return _first_readable(usable or candidates, required)


# ------------------------------------------------------------- what every trainer's resume shares
def refuse_changes(changes: Mapping[str, object], resumable: tuple[str, ...]) -> None:
    """A resumed run keeps its own config: a one-line :class:`ConfigError` naming any change
    outside ``resumable``."""
    refused = sorted(set(changes) - set(resumable))
    if refused:
        raise ConfigError(f"a resumed run keeps its own config; cannot change {', '.join(refused)} "
                          f"(may change: {', '.join(resumable)})")


def require_state(path: str, state: Mapping[str, Any], required: tuple[str, ...]) -> None:
    """A one-line :class:`CheckpointError` naming the keys a checkpoint's state lacks."""
    missing = [k for k in required if k not in state]
    if missing:
        raise CheckpointError(f"checkpoint at {path!r} lacks {', '.join(missing)} in state.json")


@contextlib.contextmanager
def restoring(run_dir: str | Path) -> Iterator[None]:
    """Restoring a checkpoint into a built run: a checkpoint that does not fit it (missing keys,
    wrong shapes or types) is a one-line :class:`CheckpointError`."""
    try:
        yield
    except (KeyError, RuntimeError, ValueError, TypeError, OverflowError) as exc:
        raise CheckpointError(f"checkpoint in {str(run_dir)!r} does not fit this run: "
                              f"{type(exc).__name__}: {one_line(exc)}") from None


def restore_weights(module: torch.nn.Module, tensors: Mapping[str, torch.Tensor]) -> None:
    """Copy ``tensors`` into ``module``'s parameters and buffers in place (views into them stay
    valid); a missing key, another dtype or shape, or a non-finite weight is a ``ValueError``
    naming it (inside :func:`restoring`, a one-line :class:`CheckpointError`)."""
    import torch

    with torch.no_grad():
        for k, v in module.state_dict().items():
            if k not in tensors:
                raise ValueError(f"the checkpoint lacks model.{k}")
            t = tensors[k]
            if t.dtype != v.dtype or t.shape != v.shape:
                raise ValueError(f"model.{k} is {t.dtype} of shape {list(t.shape)}; the run's is {v.dtype} of "
                                 f"shape {list(v.shape)}")
            if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                raise ValueError(f"model.{k} holds non-finite values")
            v.copy_(t)


def prefixed(prefix: str, tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``{prefix.key: tensor}``: one part's tensors in a checkpoint's single safetensors file."""
    return {f"{prefix}.{k}": v for k, v in tensors.items()}


def unprefixed(prefix: str, tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Inverse of :func:`prefixed`: the tensors under ``prefix.``, keys without it."""
    return {k[len(prefix) + 1:]: v for k, v in tensors.items() if k.startswith(prefix + ".")}
