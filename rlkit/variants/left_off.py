"""Variant options that would not take effect: named by the user while their variant stays off."""

from __future__ import annotations

from typing import Any, Iterable, NamedTuple

from rlkit.variants.registry import registered


class LeftOff(NamedTuple):
    variant: str
    """The registered variant that stays off."""
    options: list[str]
    """Its options that were named (in its options' field order)."""
    turn_on: str
    """How that variant is turned on: its switch flag, or its options away from their defaults."""


def options_left_off(cfg: Any, named: Iterable[str], skip: Iterable[str] = ()) -> LeftOff | None:
    """The first registered variant (but those in ``skip``) that stays off in ``cfg`` although
    ``named`` names some of its options (every one at its default then: an option away from its
    default turns its variant on or is refused by the config); None when there is none."""
    named, skip = set(named), set(skip)
    for name in sorted(set(registered()) - skip):
        options = getattr(cfg.variants, name, None)
        if options is None or options.enabled:
            continue
        fields = [f for f in options.__dataclass_fields__ if f in named]
        if fields:
            turn_on = getattr(options, "turn_on", None) or (f"--{name.replace('_', '-')}" if name in
                                                             options.__dataclass_fields__ else
                                                             "an option away from its default")
            return LeftOff(name, fields, turn_on)
    return None
