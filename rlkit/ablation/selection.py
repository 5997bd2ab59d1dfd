"""What a report covers: the variants it shows (``--variants``) and the environments it is
computed over (``--envs``)."""

from __future__ import annotations

import re
from typing import Sequence

import pandas as pd

from rlkit.errors import ConfigError


def chosen(names: Sequence[str] | None, known: Sequence[str], present: Sequence[str], baseline: str) -> list[str]:
    """The variants a report shows: the baseline and ``names`` (all with finished runs when
    None), in the spec's order with the baseline first. A name the spec does not hold, or one
    without finished runs, is a one-line :class:`ConfigError` listing the choices."""
    if names is None:
        return [baseline] + [v for v in present if v != baseline]
    _check_names("--variants", "variant", names, known, present)
    return [baseline] + [v for v in present if v in set(names) and v != baseline]


def split_variants(text: str) -> list[str]:
    """``--variants a,b,c`` as names; a comma inside brackets is part of a grid variant's name
    (``outer[outer_lr=1.5,outer_momentum=0.9]``)."""
    return [name.strip() for name in re.split(r",(?![^\[]*\])", text)]


def only_envs(names: Sequence[str], known: Sequence[str], runs: pd.DataFrame, results: pd.DataFrame
              ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The sweep's runs and evaluations on the environments ``names`` alone (``--envs``): every
    statistic of the report, its references and aggregate included, is then computed over them.
    An empty name, one the sweep does not hold or one without evaluations is a one-line
    :class:`ConfigError` listing the choices."""
    _check_names("--envs", "environment", names, known, [e for e in known if e in set(results["env"])])
    return runs[runs.env.isin(names)], results[results.env.isin(names)]


def _check_names(flag: str, what: str, names: Sequence[str], known: Sequence[str], present: Sequence[str]) -> None:
    """A one-line :class:`ConfigError` for an empty name in ``names``, one not in ``known`` or one
    without finished runs (not in ``present``), listing the choices."""
    if not names or any(not n.strip() for n in names):
        raise ConfigError(f"{flag} must name {what}s separated by commas, got {','.join(names)!r}")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"{flag}: unknown {what}(s) {', '.join(unknown)}; the sweep's {what}s: {', '.join(known)}")
    idle = [n for n in names if n not in present]
    if idle:
        raise ConfigError(f"{flag}: {', '.join(idle)} has no finished runs; {what}s with finished runs: "
                          f"{', '.join(present)}")
