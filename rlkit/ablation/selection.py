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
    if not names or any(not n.strip() for n in names):
        raise ConfigError(f"--variants must name variants separated by commas, got {','.join(names)!r}")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"--variants: unknown variant(s) {', '.join(unknown)}; the sweep's variants: "
                          f"{', '.join(known)}")
    idle = [n for n in names if n not in present]
    if idle:
        raise ConfigError(f"--variants: {', '.join(idle)} has no finished runs; variants with finished runs: "
                          f"{', '.join(present)}")
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
    if not names or any(not n.strip() for n in names):
        raise ConfigError(f"--envs must name environments separated by commas, got {','.join(names)!r}")
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ConfigError(f"--envs: unknown environment(s) {', '.join(unknown)}; the sweep's environments: "
                          f"{', '.join(known)}")
    idle = [n for n in names if n not in set(results["env"])]
    if idle:
        raise ConfigError(f"--envs: {', '.join(idle)} has no finished runs; environments with finished runs: "
                          f"{', '.join(e for e in known if e in set(results['env']))}")
    return runs[runs.env.isin(names)], results[results.env.isin(names)]
