"""What the command line's flags must mean before a run starts: each flag named takes effect or is
refused in one line (an option the trainer does not honour, a list flag given twice, a variant
switched off while its options stay set, a variant option named while its variant stays off),
and a resume's changes are the flags given."""

from __future__ import annotations

import types
import typing
from typing import Any

from rlkit.core.composed import flat_field_names, leaf_hint, refused_fields
from rlkit.errors import ConfigError


def flags_given(argv: list[str], cls: type) -> set[str]:
    """Config fields named on the command line (``--no-x`` names ``x``)."""
    names = flat_field_names(cls)
    given = set()
    for token in argv:
        if token.startswith("--"):
            name = token[2:].split("=", 1)[0].replace("-", "_")
            name = name[3:] if name.startswith("no_") and name[3:] in names else name
            if name in names:
                given.add(name)
    return given


def refuse_unhonoured(argv: list[str], cls: type) -> None:
    """A flag of an option the command's trainer does not honour (``rlkit train --group-size 4``:
    the group variant is the RLHF trainer's) is refused in one line saying why, rather than as an
    unknown flag."""
    refused = refused_fields(cls)
    for token in argv:
        name = token[2:].split("=", 1)[0].replace("-", "_") if token.startswith("--") else ""
        name = name[3:] if name.startswith("no_") and name[3:] in refused else name
        if name in refused:
            raise ConfigError(f"{token.split('=', 1)[0]} is refused: {refused[name].reason}")


def merge_repeated(argv: list[str], flag: str) -> list[str]:
    """``argv`` with every ``flag`` (``--reward a --reward b c``, ``--reward=d``) merged into one
    ``flag a b c d`` where the first stood: a flag that may be repeated and extends."""
    out: list[str] = []
    values: list[str] = []
    at, i = None, 0
    while i < len(argv):
        token = argv[i]
        if token == flag or token.startswith(flag + "="):
            at = len(out) if at is None else at
            if "=" in token:
                values.append(token.split("=", 1)[1])
            i += 1
            while i < len(argv) and not argv[i].startswith("--"):
                values.append(argv[i])
                i += 1
            continue
        out.append(token)
        i += 1
    return out if at is None else out[:at] + [flag, *values] + out[at:]


def refuse_repeated_lists(argv: list[str], cls: type) -> None:
    """A list flag (``--hidden-sizes 64 64``) given twice would keep only its last values: refused
    in one line (``--seeds``, ``--resume`` and ``--preset`` extend instead)."""
    names = flat_field_names(cls)
    for name in sorted(n for n in names if _is_list(leaf_hint(cls, n))):
        flag = "--" + name.replace("_", "-")
        if sum(t == flag or t.startswith(flag + "=") for t in argv) > 1:
            raise ConfigError(f"{flag} is given more than once and would keep only its last values; give all of "
                              f"them after one {flag}")


def _is_list(hint: Any) -> bool:
    """Whether a field's annotation is a list of values (``tuple[X, ...]``, optionally None)."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_is_list(h) for h in typing.get_args(hint))
    return typing.get_origin(hint) in (tuple, list)


def refuse_switched_off(cfg: Any, argv: list[str]) -> None:
    """``--no-hp3o --hp3o-plus`` (or ``--no-X`` after a preset that sets X's options): any option of
    a variant turns it on, so a variant switched off by name while its options stay set is refused
    in one line rather than silently left on."""
    from rlkit.variants.registry import registered

    off = {t[5:].replace("-", "_") for t in argv if t.startswith("--no-")}
    for name in sorted(off & set(registered())):
        options = getattr(cfg.variants, name, None)
        if options is None or not options.enabled:
            continue
        fields = options.__dataclass_fields__
        still = [f for f in fields if f != name and getattr(options, f) != fields[f].default]
        raise ConfigError(f"--no-{name.replace('_', '-')} is refused: {', '.join(still) or name} still turn(s) "
                          f"{name} on (any of its options does); drop them or the --no- flag")


def refuse_options_left_off(cfg: Any, argv: list[str]) -> None:
    """A variant option named on the command line takes effect or is refused: one at its default
    while its variant stays off (``--group-form rloo`` or ``--group-size 1`` alone: every group
    option at its default) would run plain PPO without a word. ``--no-`` flags ask for an option's
    absence, which an off variant honours; a resumed run checks its flags against its own config."""
    from rlkit.variants.left_off import options_left_off

    if cfg.resume:
        return
    given = flags_given([t for t in argv if not t.startswith("--no-")], type(cfg))
    off = {t[5:].replace("-", "_") for t in argv if t.startswith("--no-")}
    left = options_left_off(cfg, given, skip=off)
    if left is not None:
        flags = ", ".join(f"--{f.replace('_', '-')} {getattr(getattr(cfg.variants, left.variant), f)}"
                          for f in left.options)
        raise ConfigError(f"{flags}: the {left.variant} variant stays off (its options are all at their defaults), "
                          f"so this would run plain PPO; turn it on ({left.turn_on}) or drop the flag")


def refuse_memory_options_without_memory(cfg: Any, argv: list[str]) -> None:
    """``--memory-size`` or ``--bptt-length`` without ``--memory``: a feed-forward policy has no
    memory torso to size or replay, so the flag is refused rather than ignored."""
    given = flags_given(argv, type(cfg)) & {"memory_size", "bptt_length"}
    if cfg.resume or cfg.memory or not given:
        return
    flags = ", ".join(f"--{f.replace('_', '-')} {getattr(cfg, f)}" for f in sorted(given))
    raise ConfigError(f"{flags}: the policy has no memory (--memory is not set), so this would do nothing; add "
                      "--memory lstm or --memory gru, or drop the flag")


def resume_changes(cfg: Any, argv: list[str]) -> dict[str, Any]:
    """On ``--resume``, the other fields the command line sets (the trainer refuses those a
    resumed run may not change, naming them)."""
    return {name: getattr(cfg, name) for name in flags_given(argv, type(cfg)) - {"resume"}}


def resume_flags(argv: list[str]) -> list[str]:
    """On ``--resume``, every flag given beside it, as given (``argv`` starts with the command's
    words): a run stopped before its next checkpoint holds in none of them what the resume changed
    (a longer ``--total-steps`` / ``--iterations``, a moved ``--policy`` or ``--prompts``, a fixed
    ``--reward``), so the command that continues it repeats them."""
    if not any(a == "--resume" or a.startswith("--resume=") for a in argv):
        return []
    kept, skipping = [], True  # the command's words, then --resume's folders, are not repeated
    for token in argv:
        if token.startswith("-") and not _number(token):
            skipping = token == "--resume"
            if skipping or token.startswith("--resume="):
                continue
        if not skipping:
            kept.append(token)
    return kept


def _number(token: str) -> bool:
    try:
        float(token)
        return True
    except ValueError:
        return False
