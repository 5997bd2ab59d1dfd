"""Running the documentation's recipes as printed: a fenced block marked ``<!-- recipe: NAME -->``
on the line before it is one step of recipe NAME. Shell lines run in bash one after another in a
scratch folder; a line that is a plain ``rlkit ...`` command runs in this process (``rlkit.cli.main``,
the command's own entry, without a second interpreter's start-up); ``tensorboard`` lines are not
started (they serve until stopped): the test checks the folder they would read holds event files.
Smoke budgets are flags appended to a command (the last of a repeated flag wins). A line ending in
a backslash continues on the next."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

ROOT = Path(__file__).parents[2]
MARKED = re.compile(r"<!-- recipe: ([\w-]+) -->\n```(\w+)\n(.*?)^```$", re.S | re.M)
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.S | re.M)


@dataclass(frozen=True)
class Block:
    """One fenced block of a recipe."""

    lang: str
    """``bash``, ``python``, ``toml``..."""
    text: str

    def file_name(self) -> str | None:
        """The file a ``python`` or ``toml`` block names on its first line (``# myvariant.py``)."""
        first = self.text.splitlines()[0] if self.text else ""
        named = re.fullmatch(r"# ([\w.-]+\.(?:py|toml))", first.strip())
        return named.group(1) if named else None


def recipes(text: str) -> dict[str, list[Block]]:
    """Every marked block of a markdown text, by recipe name, in order."""
    found: dict[str, list[Block]] = {}
    for name, lang, body in MARKED.findall(text):
        found.setdefault(name, []).append(Block(lang, body))
    return found


def fenced_blocks(text: str) -> list[Block]:
    """Every fenced code block of a markdown text (marked or not)."""
    return [Block(lang, body) for lang, body in FENCE.findall(text)]


@dataclass
class Shell:
    """A scratch folder in which a recipe's blocks run; ``printed`` collects every command's stdout."""

    folder: Path
    smoke: Mapping[str, Sequence[str]] = field(default_factory=dict)
    """Command prefix (``rlkit train``) -> flags appended to it."""
    printed: list[str] = field(default_factory=list)
    tensorboard: list[Path] = field(default_factory=list)
    """The folders ``tensorboard --logdir`` lines name."""
    env: dict[str, str] = field(default_factory=dict)
    """What ``export NAME=VALUE`` lines set: the commands after them run in bash with it."""

    def run(self, blocks: Sequence[Block]) -> None:
        for block in blocks:
            name = block.file_name()
            if block.lang in ("python", "toml"):
                assert name, f"a {block.lang} block of a recipe names its file on its first line"
                (self.folder / name).write_text(block.text)
            elif block.lang == "bash":
                self.bash(block.text)
            else:
                raise AssertionError(f"a recipe block in {block.lang!r}")

    def bash(self, text: str) -> None:
        """A command at a time (a line, or a here-document with its lines): plain ``rlkit`` lines in
        this process, ``tensorboard`` lines noted, the rest in bash."""
        pending: list[str] = []
        for line in re.sub(r"\\\n", " ", text).splitlines():  # a line continued by a backslash is one
            if pending:  # inside a here-document
                pending.append(line)
            else:
                words = shlex.split(line, comments=True)
                plain = not re.search(r"[|;&<>$`]", line.partition(" #")[0]) and not self.env
                if words[:1] == ["export"]:
                    self.env.update(w.split("=", 1) for w in words[1:])
                elif words[:1] == ["rlkit"] and plain:
                    self.rlkit(words[1:])
                elif words[:1] == ["tensorboard"]:
                    self.tensorboard.append(self.folder / words[words.index("--logdir") + 1])
                elif words:
                    pending.append(self.with_smoke(line))
            if pending and not pending_heredoc(pending):
                self.shell("\n".join(pending))
                pending = []
        assert not pending, f"a here-document never ends: {pending}"

    def flags(self, words: Sequence[str]) -> list[str]:
        """The smoke flags of the longest key the command's words start with (``rlkit train``,
        ``rlkit rlhf --policy``)."""
        if "--help" in words:
            return []
        keys = sorted(self.smoke, key=lambda k: -len(k.split()))
        return next((list(self.smoke[k]) for k in keys if list(words[:len(k.split())]) == k.split()), [])

    def with_smoke(self, line: str) -> str:
        """A shell line with the smoke flags of the rlkit command in its first pipeline segment."""
        code, _, _ = line.partition(" #")
        first, bar, rest = code.partition("|")
        words = shlex.split(first)
        at = next((i for i, w in enumerate(words) if w == "rlkit"), None)
        if at is None:
            return line
        extra = self.flags(words[at:])
        return first.rstrip() + "".join(" " + shlex.quote(f) for f in extra) + (" " + bar + rest if bar else "")

    def rlkit(self, args: list[str]) -> None:
        from rlkit.cli import main

        args = args + self.flags(["rlkit", *args])
        out, err = io.StringIO(), io.StringIO()
        cwd = os.getcwd()
        os.chdir(self.folder)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(args)
        finally:
            os.chdir(cwd)
        assert code == 0, (args, err.getvalue()[-3000:])
        self.printed.append(out.getvalue())

    def shell(self, script: str) -> None:
        if not script.strip():
            return
        env = {**os.environ, **self.env,
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        done = subprocess.run(["bash", "-eo", "pipefail", "-c", script], cwd=self.folder, env=env,
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, (script, done.stdout[-2000:], done.stderr[-3000:])
        self.printed.append(done.stdout)


def pending_heredoc(lines: Sequence[str]) -> bool:
    """Whether ``lines`` open a here-document that has not ended yet."""
    open_tag = None
    for line in lines:
        if open_tag is None:
            tag = re.search(r"<<-?\s*'?(\w+)'?", line)
            open_tag = tag.group(1) if tag else None
        elif line.strip() == open_tag:
            open_tag = None
    return open_tag is not None


def logged(run_dir: Path):
    """The run's TensorBoard events, read whole (``.Tags()``, ``.Scalars(tag)``)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    return events
