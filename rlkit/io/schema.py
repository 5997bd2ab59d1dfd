"""The shapes of the JSON records rlkit reads back: a run's ``result.json`` and a sweep's status
files (a sweep's manifest: :func:`rlkit.ablation.results.read_manifest`).

A record that parses as JSON but has another shape (edited by hand, written by another tool, or
another run's) is treated by its readers as a damaged one: a result as no result (the run resumes
from its checkpoints), a status file as none. These functions say in a few words what is wrong
with a record, or return None when it has the shape its readers rely on.
"""

from __future__ import annotations

from typing import Any


def is_count(value: object) -> bool:
    """An integer >= 0 (not a bool)."""
    return type(value) is int and value >= 0


def is_number(value: object) -> bool:
    """An int or a float (not a bool); NaN and inf included (a run's return may be either)."""
    return type(value) in (int, float)


def _number_or_null(value: object) -> bool:
    return value is None or is_number(value)


def _history_problem(history: object) -> str | None:
    if not isinstance(history, list) or not all(
            isinstance(e, list) and len(e) == 3 and is_count(e[0]) and _number_or_null(e[1]) and _number_or_null(e[2])
            for e in history):
        return "eval_history is not a list of [env steps, return mean, return std]"
    return None


def result_problem(result: Any, env: str | None = None, seed: int | None = None) -> str | None:
    """Why ``result`` is not a finished run's ``result.json`` (of the run of ``env`` and ``seed``,
    when given), or None. Read: ``total_steps`` (a count), ``eval_history`` (``[env steps, mean,
    std]`` triples), ``eval_seconds`` (one number or null per evaluation), ``eval_return_mean``,
    ``eval_return_std``, ``train_return_last100`` (numbers or null) and ``steps_per_second`` (a
    number >= 0); each but the first two may be missing."""
    if not isinstance(result, dict):
        return "not a JSON object"
    if not is_count(result.get("total_steps")):
        return "total_steps is not a count of env steps"
    problem = _history_problem(result.get("eval_history"))
    if problem:
        return problem
    seconds = result.get("eval_seconds")
    if seconds is not None and not (isinstance(seconds, list) and len(seconds) == len(result["eval_history"])
                                    and all(_number_or_null(s) for s in seconds)):
        return "eval_seconds is not one number per evaluation"
    for key in ("eval_return_mean", "eval_return_std", "train_return_last100"):
        if not _number_or_null(result.get(key)):
            return f"{key} is not a number"
    sps = result.get("steps_per_second")
    if sps is not None and not (is_number(sps) and 0 <= sps < float("inf")):
        return "steps_per_second is not a number >= 0"
    if env is not None and "env" in result and result["env"] != env:
        return f"it is the result of env {str(result['env'])[:80]!r}, not {env!r}"
    if seed is not None and "seed" in result and result["seed"] != seed:
        return f"it is the result of seed {str(result['seed'])[:20]}, not {seed}"
    return None


def status_problem(status: Any) -> str | None:
    """Why ``status`` is not a sweep's status file of a run (``{"status": "done", "seconds": s}``
    or ``{"status": "failed", "error": "..."}``, with ``"pack": [names]`` for a packed run), or None."""
    if not isinstance(status, dict) or status.get("status") not in ("done", "failed"):
        return "not a status of done or failed"
    if status["status"] == "done" and not (status.get("seconds") is None or
                                           (is_number(status["seconds"]) and 0 <= status["seconds"] < float("inf"))):
        return "seconds is not a number >= 0"
    if status["status"] == "failed" and not isinstance(status.get("error", ""), str):
        return "error is not a line of text"
    pack = status.get("pack")
    if pack is not None and not (isinstance(pack, list) and pack and all(isinstance(n, str) for n in pack)):
        return "pack is not a list of run names"
    return None
