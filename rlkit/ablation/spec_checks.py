"""The spec's refusals of settings a run would record but not honour, each a one-line
:class:`ConfigError` naming the spec key that set it."""

from __future__ import annotations

import re
from typing import Any

from rlkit.errors import ConfigError

RECURRENT_BASELINE = "sb3-contrib:recurrent-ppo"
PPO_SCHEDULES = ("anneal_clip",)
"""Variants the PPO baselines honour (SB3 anneals ``clip_range`` by a schedule as rlkit does); TRPO has no clip."""


def fail(path: str, key: str, message: str) -> ConfigError:
    return ConfigError(f"{path}: {key}: {message}")


def set_where(message: str, layers: list[tuple[str | None, dict[str, Any]]], default: str) -> str:
    """The spec key that set the field a refusal ``message`` names: of ``layers`` (``(where,
    fields)`` in the order they apply, a later one overriding; ``where`` None for the top level,
    whose key is the field itself), the last that sets such a field; ``default`` if none does."""
    found = default
    for where, fields in layers:
        for name in fields:
            if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", message):
                found = where or name
    return found


def refuse_variant_options(record: dict[str, Any], own: dict[str, Any], file: str, variant: str) -> None:
    """A reference implementation runs plain SB3 / sb3-contrib: a variant turned on for it (by a
    preset or a field anywhere in the spec) or a variant option in its own table would be recorded
    but not honoured, so it is refused. (Options at the top level that leave every variant off are
    the rlkit variants' defaults and do not concern it; :data:`PPO_SCHEDULES` the PPO baselines take.)"""
    from rlkit.variants import registered, variant_fields

    refuse_baseline_memory(record, file, variant)
    refuse_memory_options_without_memory(record, own, {}, file, variant)
    honoured = PPO_SCHEDULES if variant != "sb3-contrib:trpo" else ()
    on = next((n for n in registered() if record.get(n) is True and n not in honoured), None)
    on = on or next((n for n in own if n in variant_fields() and n not in honoured), None)
    if on is not None:
        value = record.get(on, own.get(on))
        raise fail(file, f"variants.{variant}", f"a reference implementation cannot honour {on} = {value!r}; "
                                                 "set variant options on rlkit variants only")


def refuse_baseline_memory(record: dict[str, Any], file: str, variant: str) -> None:
    """RecurrentPPO runs an LSTM of ``memory_size`` units over whole episodes' segments (recorded as
    ``memory = "lstm"``); the other baselines run feed-forward policies. A memory setting a
    baseline would not run is refused."""
    memory, where = record.get("memory", ""), f"variants.{variant}"
    if variant == RECURRENT_BASELINE:
        if memory not in ("", "lstm") or record.get("bptt_length", 0):
            what = f"memory = {memory!r}" if memory not in ("", "lstm") else f"bptt_length = {record['bptt_length']}"
            raise fail(file, where, f"RecurrentPPO runs an LSTM over whole episode segments; the spec sets {what} "
                                     "for it")
        record["memory"] = "lstm"
    elif memory:
        raise fail(file, where, f"{variant} runs a feed-forward policy; the spec sets memory = {memory!r} for it")


def refuse_memory_options_without_memory(record: dict[str, Any], own: dict[str, Any], point: dict[str, Any],
                                          file: str, variant: str) -> None:
    """``memory_size`` or ``bptt_length`` named by a variant's table or a grid point for runs with no
    memory would do nothing but label them apart: refused, as ``rlkit train`` refuses the flags."""
    for where, named in ((f"variants.{variant}", own), ("grid", point)):
        given = sorted({"memory_size", "bptt_length"} & set(named))
        if given and not record.get("memory"):
            values = ", ".join(f"{f} = {named[f]!r}" for f in given)
            raise fail(file, where, f"{values}: variant {variant!r} has no memory (memory = \"\"), so this would do "
                                     "nothing; set memory or drop the option")


def refuse_options_left_off(cfg: Any, own: dict[str, Any], point: dict[str, Any], file: str, variant: str) -> None:
    """A variant option that a variant's table or a grid point names while its variant stays off
    (every one of its options at its default) would give runs of plain PPO under that option's
    name: refused, as ``rlkit train`` refuses the flag. (Options at the top level are shared
    settings, for the variants that turn them on.)"""
    from rlkit.variants.left_off import options_left_off

    for where, named in ((f"variants.{variant}", own), ("grid", point)):
        left = options_left_off(cfg, named)
        if left is not None:
            values = ", ".join(f"{f} = {named[f]!r}" for f in left.options)
            turn_on = f"{left.turn_on[2:].replace('-', '_')} = true" if left.turn_on.startswith("--") else left.turn_on
            raise fail(file, where, f"{values}: the {left.variant} variant stays off for variant {variant!r} (its "
                                     f"options are all at their defaults), so its runs would be plain PPO; turn it on "
                                     f"({turn_on}) or drop the option")
