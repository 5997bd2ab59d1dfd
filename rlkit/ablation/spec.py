"""Sweep specifications: a TOML file naming environments, seeds and variants (and a grid), expanded
into one run per (variant, env, seed), every run's config validated before any starts.

```toml
name = "outer_ppo_cartpole"
envs = ["CartPole-v1"]
seeds = 10                       # or a list: [1, 2, 3]
preset = "cartpole"              # any TrainConfig field is a default for every run
total_steps = 100_000
eval_every = 10_000

[variants]
ppo = {}
"outer-sigma1.5" = { outer = true, outer_lr = 1.5 }
hp3o = { presets = ["hp3o"] }
"sb3:ppo" = {}                   # reference implementations: sb3:ppo, sb3-contrib:trpo, sb3-contrib:maskable-ppo,
                                 # sb3-contrib:recurrent-ppo (an LSTM of memory_size units)

[grid]                           # optional: crossed with every rlkit variant
outer_momentum = [0.0, 0.5]

[env."Hopper-v5"]                # optional per-env overrides
preset = "mujoco"

[reference."CartPole-v1"]        # optional: scores for min-max normalization in the report
random = 22.0
reference = 500.0

[smoke]                          # --budget smoke: over the top-level keys and the env tables' (seconds)
seeds = 2
total_steps = 1024
```
"""

from __future__ import annotations

import itertools
import json
import math
import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rlkit.errors import ConfigError
from rlkit.gym.config import ENV_PRESETS, PRESETS, TrainConfig, preset
from rlkit.core.composed import flat_field_names
from rlkit.ablation.spec_checks import (fail as _fail, refuse_memory_options_without_memory, refuse_options_left_off,
                                        refuse_variant_options, set_where)

BASELINES = ("sb3:ppo", "sb3-contrib:trpo", "sb3-contrib:maskable-ppo", "sb3-contrib:recurrent-ppo")
"""Reference implementations a variant may name (optional extra ``baselines``)."""
TOP_KEYS = ("name", "envs", "seeds", "preset", "variants", "grid", "env", "smoke", "reference", "baseline")
RUN_FIELDS = tuple(sorted(set(flat_field_names(TrainConfig)) - {"env", "seed", "logdir", "run_name", "resume",
                                                                 "hparams"}))
"""TrainConfig fields a spec may set (the sweep owns env, seed, where runs go and what their hparams show)."""


@dataclass(frozen=True)
class RunSpec:
    """One run of a sweep."""

    variant: str
    env: str
    seed: int
    kind: str
    """``rlkit`` or one of :data:`BASELINES`."""
    config: dict[str, Any]
    """The run's full TrainConfig record (flat), also used to set up a baseline identically."""
    hparams: tuple[str, ...] = ()
    """The config fields its TensorBoard hparams show after its variant: env, seed and those that
    differ between the sweep's rlkit runs (:func:`differing_fields`). Not part of its config: a
    sweep extended with more variants shows more for its new runs, and its earlier runs keep theirs."""

    @property
    def name(self) -> str:
        """The run's folder name (one path component)."""
        return safe_name(f"{self.variant}__{self.env}__s{self.seed}")

    def past_budget(self, result: dict[str, Any], trained: int | None = None) -> str | None:
        """Why a finished run's ``result`` is not this run's, or None when it is: it (or its newest
        checkpoint, ``trained`` env steps) went past the spec's ``total_steps``, i.e. it was extended
        by hand after the sweep. rlkit rounds the budget down to whole rollouts; a baseline (SB3)
        rounds up by at most one."""
        steps = result.get("total_steps")
        steps = max(steps if isinstance(steps, (int, float)) and not isinstance(steps, bool) else 0, trained or 0)
        budget = int(self.config["total_steps"])
        rollout = int(self.config.get("num_envs", 1)) * int(self.config.get("num_steps", 1))
        if steps > budget + (0 if self.kind == "rlkit" else rollout):
            return (f"trained {int(steps)} env steps, past the spec's total_steps={budget} (extended outside the "
                    "sweep): not this sweep's result; move the run out of runs/ to train it again")
        return None


@dataclass(frozen=True)
class SweepSpec:
    name: str
    runs: list[RunSpec]
    variants: list[str]
    envs: list[str]
    seeds: list[int]
    baseline: str
    reference: dict[str, dict[str, float]] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    """The parsed TOML (what identifies the sweep, with the budget)."""

    def env_options(self) -> dict[str, dict[str, Any]]:
        """Per env, the ``gymnasium.make`` keyword arguments its runs use (one set per env)."""
        return {run.env: json.loads(run.config.get("env_kwargs") or "{}") for run in self.runs}

    def env_wrappers(self) -> dict[str, str]:
        """Per env, the wrapper stack its runs use ("" for none)."""
        return {run.env: run.config.get("env_wrappers") or "" for run in self.runs}


PLAIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=,-]*")
"""A sweep name: one folder name on every filesystem (no path separators, not ``.`` or ``..``)."""


def safe_name(text: str) -> str:
    """``text`` as one folder name: every character outside ``A-Za-z0-9._+=,-`` becomes ``-``."""
    return re.sub(r"[^A-Za-z0-9._+=,-]", "-", text)


MAX_RUN_NAME = 200
"""Bytes of a run's folder name (``variant__env__sSEED``): filesystems allow 255 per name, and the
run's status file and temporary files add a suffix to it."""
MAX_SEEDS = 10_000
"""Seeds per run configuration a spec may ask for (a typo such as 10**20 is refused, not expanded)."""


def _refuse_shared_folders(runs: list[RunSpec], file: str) -> None:
    """Two runs whose folder names are equal (or equal but for case, as on macOS and Windows
    filesystems) would train into one folder: refused, naming both."""
    seen: dict[str, RunSpec] = {}
    for run in runs:
        if len(run.name.encode()) > MAX_RUN_NAME:  # its status and temporary files add to the name
            raise _fail(file, f"variants.{run.variant.split('[')[0]}",
                        f"run folder name {run.name[:40]!r}... is {len(run.name.encode())} bytes; at most "
                        f"{MAX_RUN_NAME} (a folder name has at most 255): shorten the variant or env name")
        other = seen.setdefault(run.name.lower(), run)
        if other is not run:
            raise _fail(file, f"variants.{run.variant.split('[')[0]}",
                        f"runs {other.variant!r} and {run.variant!r} ({run.env}, seed {run.seed}) would share the "
                        f"run folder {run.name!r}; rename a variant or remove the repeated value")


def _refuse_mixed_env_kwargs(runs: list[RunSpec], file: str) -> None:
    """Every run of one env makes the same env (variants compare on one task; the report's random
    policy plays it too): env_kwargs and env_wrappers belong at the top, in a preset or in
    ``[env."ENV_ID"]``, not per variant."""
    seen: dict[str, RunSpec] = {}
    for run in runs:
        first = seen.setdefault(run.env, run)
        for name in ("env_kwargs", "env_wrappers"):
            if run.config.get(name, "") != first.config.get(name, ""):
                raise _fail(file, f"variants.{run.variant}", f"{name} differ from variant {first.variant!r}'s on "
                                                            f"{run.env}; set {name} at the top or in [env.\"{run.env}\"]")


def _check_env_tables(data: dict[str, Any], file: str, envs: set[str]) -> None:
    """``[env.X]`` and ``[reference.X]`` tables name envs of the spec (a typo would be ignored)."""
    for key in ("env", "reference"):
        tables = data.get(key, {})
        if not isinstance(tables, dict) or not all(isinstance(t, dict) for t in tables.values()):
            raise _fail(file, key, f"must be tables [{key}.\"ENV_ID\"] (the list of envs is `envs`)")
        unknown = sorted(set(tables) - envs)
        if unknown:
            raise _fail(file, f"{key}.{unknown[0]}", f"not one of the spec's envs ({', '.join(sorted(envs))})")


def load_spec(path: str | Path, budget: str | None = None) -> SweepSpec:
    """Parse, validate and expand ``path``; ``budget="smoke"`` applies its ``[smoke]`` table."""
    file = str(path)
    try:
        data = tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(f"{file}: no such sweep spec") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{file}: not valid TOML: {exc}") from None
    return expand(data, file, budget)


def expand(data: dict[str, Any], file: str = "<spec>", budget: str | None = None) -> SweepSpec:
    """Validate a parsed spec and expand it into runs (every config built and validated)."""
    unknown = set(data) - set(TOP_KEYS) - set(RUN_FIELDS)
    if unknown:
        key = sorted(unknown)[0]
        raise _fail(file, key, f"unknown key; allowed: {', '.join(TOP_KEYS)} or a TrainConfig field")
    for key in ("name", "envs", "seeds", "variants"):
        if key not in data:
            raise _fail(file, key, "required")
    if budget not in (None, "smoke"):
        raise ConfigError(f"--budget must be smoke, got {budget!r}")
    full_envs = data["envs"] if isinstance(data["envs"], list) else []
    if budget == "smoke":
        smoke = data.get("smoke")
        if not isinstance(smoke, dict):
            raise _fail(file, "smoke", "--budget smoke needs a [smoke] table")
        bad = set(smoke) - {"envs", "seeds"} - set(RUN_FIELDS)
        if bad:
            raise _fail(file, f"smoke.{sorted(bad)[0]}", "unknown key; allowed: envs, seeds or a TrainConfig field")
        data = {**data, **smoke}
    budget_fields = {k: v for k, v in data.get("smoke", {}).items() if k in RUN_FIELDS} if budget else {}
    name, envs, seeds = data["name"], data["envs"], _seeds(data["seeds"], file)
    if not isinstance(name, str) or not PLAIN_NAME.fullmatch(name):
        raise _fail(file, "name", f"must be a plain folder name (a letter or digit, then letters, digits, "
                                  f". _ - + = ,), got {name!r}")
    if not isinstance(envs, list) or not envs or not all(isinstance(e, str) and e for e in envs):
        raise _fail(file, "envs", "must be a non-empty list of env ids")
    repeated = next((e for i, e in enumerate(envs) if e in envs[:i]), None)
    if repeated is not None:
        raise _fail(file, "envs", f"{repeated!r} is listed twice (its runs would share one folder)")
    variants = data["variants"]
    if not isinstance(variants, dict) or not variants:
        raise _fail(file, "variants", "must be a non-empty table: name = { presets = [...], field = value }")
    if "" in variants or any(not n.strip() for n in variants):
        raise _fail(file, "variants", "a variant needs a name (letters, digits, . _ - +)")
    odd = next((n for n in variants if not re.match(r"[A-Za-z0-9]", n) and n not in BASELINES), None)
    if odd is not None:  # its runs' folder names must be plain ones (PLAIN_NAME), as the manifest checks
        raise _fail(file, f"variants.{odd}", "a variant's name starts with a letter or digit (it begins its runs' "
                                             "folder names)")
    odd = next((n for n in variants if "," in n or n != n.strip()), None)
    if odd is not None:  # rlkit report --variants a,b names variants separated by commas
        raise _fail(file, f"variants.{odd}", "a variant's name holds no comma and no leading or trailing space (rlkit "
                                             "report --variants separates names by commas)")
    _check_env_tables(data, file, set(envs) | set(full_envs))
    grid = _grid(data.get("grid", {}), file)
    runs = [run for env in envs for run in _env_runs(data, file, env, seeds, variants, grid, budget_fields)]
    _refuse_shared_folders(runs, file)
    _refuse_mixed_env_kwargs(runs, file)
    shown = ("env", "seed", *differing_fields(runs))
    runs = [replace(run, hparams=shown) for run in runs]
    names = list(dict.fromkeys(r.variant for r in runs))
    baseline = data.get("baseline", names[0])
    if baseline not in names:
        raise _fail(file, "baseline", f"{baseline!r} is not a variant; choose from {', '.join(names)}")
    return SweepSpec(name, runs, names, envs, seeds, baseline, _reference(data.get("reference", {}), file), data)


def differing_fields(runs: list[RunSpec]) -> tuple[str, ...]:
    """The config fields whose values are not the same in every rlkit run of ``runs`` (env and
    seed aside), in the config's order."""
    configs = [run.config for run in runs if run.kind == "rlkit"]
    keys = dict.fromkeys(k for config in configs for k in config if k not in ("env", "seed"))
    return tuple(k for k in keys if len({json.dumps(c.get(k), sort_keys=True, default=str) for c in configs}) > 1)


def _seeds(value: Any, file: str) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value <= MAX_SEEDS:
        return list(range(1, value + 1))
    if isinstance(value, list) and 0 < len(value) <= MAX_SEEDS and len(set(value)) == len(value) \
            and all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < 2**32 for s in value):
        return list(value)
    raise _fail(file, "seeds", f"a count in [1, {MAX_SEEDS}] or a list of distinct seeds in [0, 2**32), got "
                f"{str(value)[:60]}")


def _grid(grid: Any, file: str) -> list[dict[str, Any]]:
    if not isinstance(grid, dict):
        raise _fail(file, "grid", "must be a table: field = [values]")
    for key, values in grid.items():
        if key not in RUN_FIELDS:
            raise _fail(file, f"grid.{key}", "not a TrainConfig field")
        if not isinstance(values, list) or not values:
            raise _fail(file, f"grid.{key}", "must be a non-empty list of values")
        labels = [f"{v}" for v in values]
        repeated = next((v for i, v in enumerate(labels) if v in labels[:i]), None)
        if repeated is not None:
            raise _fail(file, f"grid.{key}", f"value {repeated} is listed twice (its runs would share one folder)")
    return grid_points(grid)


def grid_points(grid: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of a (checked) grid's values, its fields in name order; ``[{}]`` for none."""
    keys = sorted(grid)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))] or [{}]


def run_label(variant: str, point: dict[str, Any]) -> str:
    """A run's variant label: the variant, and a grid point's fields in brackets."""
    return variant + ("[" + ",".join(f"{k}={v}" for k, v in point.items()) + "]" if point else "")


def _reference(ref: Any, file: str) -> dict[str, dict[str, float]]:
    if not isinstance(ref, dict):
        raise _fail(file, "reference", "must be a table: [reference.\"ENV\"] random = x, reference = y")
    out = {}
    for env, scores in ref.items():
        if not isinstance(scores, dict) or set(scores) != {"random", "reference"} or \
                not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                        for v in scores.values()) or scores["reference"] == scores["random"]:
            raise _fail(file, f"reference.{env}", "needs two different finite numbers: random and reference")
        out[env] = {k: float(v) for k, v in scores.items()}
    return out


def _fields(table: dict[str, Any], file: str, where: str) -> tuple[list[str], dict[str, Any]]:
    """A table's presets and TrainConfig fields, validated."""
    if not isinstance(table, dict):
        raise _fail(file, where, "must be a table")
    presets = table.get("presets", table.get("preset", []))
    presets = [presets] if isinstance(presets, str) else presets
    if not isinstance(presets, list) or not all(isinstance(p, str) for p in presets):
        raise _fail(file, where, f"presets must be a preset name or a list of them, got {presets!r}")
    for name in presets:
        if name not in PRESETS:
            raise _fail(file, where, f"unknown preset {name!r}; choose from {', '.join(PRESETS)}")
    fields = {k: v for k, v in table.items() if k not in ("presets", "preset")}
    for key in fields:
        if key not in RUN_FIELDS:
            raise _fail(file, f"{where}.{key}", "not a TrainConfig field the spec may set (a plug-in variant's "
                                                "options need its module in RLKIT_VARIANTS)")
    if isinstance(fields.get("env_kwargs"), dict):  # a TOML table: stored as the JSON the CLI takes
        fields["env_kwargs"] = json.dumps(fields["env_kwargs"], sort_keys=True)
    return list(presets), fields


def _env_runs(data: dict[str, Any], file: str, env: str, seeds: list[int], variants: dict[str, Any],
              grid: list[dict[str, Any]], budget_fields: dict[str, Any]) -> list[RunSpec]:
    """One run per (variant, grid point, seed) on ``env``: presets, then the top-level fields, the
    env's table, the budget's (``[smoke]``, which also replaces what the env's table sets), the
    variant's and the grid point's."""
    base_presets, base = _fields({k: v for k, v in data.items() if k in RUN_FIELDS or k == "preset"}, file, "spec")
    env_presets, env_fields = _fields(data.get("env", {}).get(env, {}), file, f"env.{env}")
    runs = []
    for variant, table in variants.items():
        var_presets, var_fields = _fields(table, file, f"variants.{variant}")
        presets = env_presets or base_presets
        if any(p in ENV_PRESETS for p in var_presets):
            raise _fail(file, f"variants.{variant}", f"env presets ({', '.join(ENV_PRESETS)}) belong at the top")
        kind = variant if variant in BASELINES else "rlkit"
        if ":" in variant and kind == "rlkit":
            raise _fail(file, f"variants.{variant}", f"unknown baseline; choose from {', '.join(BASELINES)}")
        for point in ([{}] if kind != "rlkit" else grid):
            label = run_label(variant, point)
            for seed in seeds:
                try:
                    fields = {**base, **env_fields, **budget_fields, **var_fields, **point}
                    cfg = preset(*presets, *var_presets, **fields, env=env, seed=seed)
                except ConfigError as exc:
                    layers = [(None, base), (f"env.{env}", env_fields), ("smoke", budget_fields),
                              (f"variants.{variant}", var_fields), ("grid", point)]
                    where = set_where(str(exc), layers, f"variants.{variant}")
                    raise _fail(file, where, f"{env} seed {seed}: {exc}") from None
                record = cfg.to_dict()
                if kind != "rlkit":
                    refuse_variant_options(record, var_fields, file, variant)
                else:
                    refuse_options_left_off(cfg, var_fields, point, file, variant)
                    refuse_memory_options_without_memory(record, var_fields, point, file, variant)
                runs.append(RunSpec(label, env, seed, kind, record))
    return runs
