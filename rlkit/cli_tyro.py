"""The trainer commands' flags, read by tyro from the configs: ``rlkit train``, ``rlkit rlhf`` and
``rlkit rm train`` parse into :class:`~rlkit.gym.config.TrainConfig`,
:class:`~rlkit.rlhf.config.RLHFConfig` and :class:`~rlkit.rlhf.config.RMConfig`.

tyro parses a *command class* made from a config (:func:`command_class`): the same nested groups
(``--help`` shows each as a group) and flat flags, the given config's values as the defaults,
each field's docstring as its help on one line, fields a user has no reason to set left out, and
the flags the command reads itself added to the group they belong to. The parsed command is
read back as the flat record of the config (:func:`parse_config`). tyro's error box is one line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import sys
from dataclasses import dataclass, field
from typing import Annotated, Any, Mapping, Sequence

import tyro
from typing_extensions import Doc

from rlkit.core.composed import composed_from_dict, composed_to_dict, sub_configs
from rlkit.core.config import field_docs, field_hints
from rlkit.errors import ConfigError

TYRO_CONFIG = (tyro.conf.OmitArgPrefixes,)
"""Flags stay flat (``--clip-coef``) although the fields are composed groups."""


@dataclass(frozen=True)
class Flag:
    """A flag the command reads itself (before tyro), shown in a group of its ``--help``."""

    name: str
    type: Any
    default: Any
    help: str


@dataclass(frozen=True)
class Flags:
    """The flags a command adds to one group of its config, and the group's description with them."""

    about: str
    flags: Sequence[Flag]


def command_class(cfg: Any, extra: Mapping[str, Flags] | None = None, hidden: frozenset[str] = frozenset(),
                  added: Flags | None = None) -> type:
    """The class tyro parses for a config like ``cfg`` (whose values are the defaults): its groups
    and fields, each with its one-line help; ``hidden`` fields suppressed; ``extra`` flags added
    to the named groups (``added``: those of this one)."""
    cls, extra = type(cfg), extra or {}
    hints, docs, subs = field_hints(cls), field_docs(cls), sub_configs(cls)
    fields: list[tuple[str, Any, Any]] = []
    for f in dataclasses.fields(cls):
        value = getattr(cfg, f.name)
        if subs.get(f.name) is not None:
            group = command_class(value, extra, hidden, extra.get(f.name))
            kind, default = group, field(default_factory=group)
        else:
            kind, default = hints[f.name], field(default=value)
        if f.name in hidden:
            kind = Annotated[kind, tyro.conf.Suppress]
        if docs.get(f.name):
            kind = Annotated[kind, Doc(docs[f.name])]
        fields.append((f.name, kind, default))
    for flag in added.flags if added else ():
        fields.append((flag.name, Annotated[flag.type, Doc(flag.help)], field(default=flag.default)))
    about = added.about if added else " ".join((cls.__doc__ or "").split())
    return dataclasses.make_dataclass(cls.__name__, fields, frozen=True, namespace={"__doc__": about})


def parse_config(cls: type, default: Any, args: list[str], prog: str, description: str,
                 extra: Mapping[str, Flags] | None = None, hidden: frozenset[str] = frozenset()) -> Any:
    """``args`` parsed into a ``cls`` (``--help`` prints and exits); the extra flags are left out."""
    parsed = tyro_cli(command_class(default, extra, hidden), args=args, prog=prog, description=description)
    own = {flag.name for group in (extra or {}).values() for flag in group.flags}
    return composed_from_dict(cls, {k: v for k, v in composed_to_dict(parsed).items() if k not in own})


def tyro_cli(cls: type, **kwargs: Any) -> Any:
    """``tyro.cli`` with its error box turned into a one-line :class:`ConfigError` (``--help``
    prints as tyro writes it)."""
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            return tyro.cli(cls, config=TYRO_CONFIG, **kwargs)
    except SystemExit as exc:
        if exc.code in (0, None):
            sys.stderr.write(captured.getvalue())
            raise
        message = _box_message(captured.getvalue())
        if message.startswith("Unrecognized option"):  # a plug-in's flag exists only with its module loaded
            words = message.partition(": ")[2].split(", ")
            flags = [w for w in words if w.startswith("-")] or words  # tyro lists the flags' values too
            other = _other_trainers(flags, kwargs.get("prog", ""))
            message = (f"unrecognized option{'s' if len(flags) > 1 else ''}: {', '.join(flags)}; " + (
                f"{other[0]} is an option of {other[1]}, not of this command" if other else
                "a plug-in variant's flags need its module in RLKIT_VARIANTS"))
        raise ConfigError(f"{message} (see {kwargs.get('prog', 'rlkit')} --help)") from None


def _other_trainers(flags: list[str], prog: str) -> tuple[str, str] | None:
    """The first of ``flags`` that the other trainer (rlkit train / rlkit rlhf) takes, and its command."""
    from rlkit.core.composed import flat_field_names

    if prog == "rlkit train":
        from rlkit.rlhf.config import RLHFConfig as Other
        command = "rlkit rlhf"
    elif prog == "rlkit rlhf":
        from rlkit.gym.config import TrainConfig as Other
        command = "rlkit train"
    else:
        return None
    fields = set(flat_field_names(Other))
    for flag in flags:
        name = flag.lstrip("-").split("=")[0].replace("-", "_")
        if name in fields or (name.startswith("no_") and name[3:] in fields):
            return flag, command
    return None


def _box_message(text: str) -> str:
    """The message of a tyro error box: its first paragraph, on one line."""
    words: list[str] = []
    ruled = False
    for line in text.splitlines():
        inner = line.strip().strip("│").strip()
        if line.strip().startswith(("╭", "╰")) or not inner:
            continue
        if len(inner) > 3 and set(inner) <= {"-"} and not ruled:  # ASCII: the rule under the box's title
            words, ruled = [], True
            continue
        if set(inner) <= {"─", "-"}:  # the rule after the message
            break
        words.append(inner)
    return " ".join(words) or "invalid arguments"
