"""Prompt data as people keep it: a .txt file (one prompt per line), a .jsonl file whose rows hold
a ``prompt`` and any other columns (``answer``, ``difficulty``, ...), or a Hugging Face ``datasets``
folder written by ``save_to_disk`` (the optional ``datasets`` package). The other columns reach
the reward functions as keyword arguments (:mod:`rlkit.rlhf.rewards`), as TRL's GRPOTrainer
passes a dataset's columns.

A prompt is a string or a conversation (a list of ``{"role", "content"}`` messages). With
``chat_template`` the tokenizer's own chat template turns it into the model's input, the
generation prompt appended and an optional system message first; a conversation always needs it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from rlkit.errors import ConfigError, one_line
from rlkit.io.files import read_lines

RESERVED_COLUMNS = ("prompts", "completions")
"""Keyword names the reward functions receive from rlkit itself; a column may not take them."""


@dataclass(frozen=True)
class PromptData:
    """The prompts of a run and the other columns of their rows."""

    prompts: list[Any]
    """``[P]`` each row's prompt: a string or a list of chat messages."""
    columns: dict[str, list[Any]]
    """Column name -> ``[P]`` its value in each row (every row has every column)."""

    def rows(self, indices: Sequence[int]) -> dict[str, list[Any]]:
        """The columns of the rows ``indices``, each a list aligned with them."""
        return {name: [values[i] for i in indices] for name, values in self.columns.items()}


def read_prompt_data(path: str) -> PromptData:
    """The prompt data at ``path`` (see the module docstring); anything malformed is one line."""
    if Path(path).is_dir():
        return _from_rows(_dataset_rows(path), path)
    lines = read_lines(path, "prompt file")
    if not lines:
        raise ConfigError(f"prompt file {path!r} is empty")
    suffix = Path(path).suffix.lower()
    if suffix == ".json":
        raise ConfigError(f"prompt file {path!r}: give prompt rows as .jsonl (one JSON object per line) or a datasets "
                          "folder; a .json file is not read")
    if suffix == ".jsonl":
        return _from_rows([(f"{path}:{number}", _json_row(path, number, line)) for number, line in lines], path)
    return PromptData([text for _, text in lines], {})


def prompt_texts(data: PromptData, tokenizer: Any, chat_template: bool, system_prompt: str | None) -> list[str]:
    """``[P]`` the model's input text of each prompt: as written, or through the tokenizer's chat
    template (generation prompt appended; ``system_prompt`` as a first system message)."""
    if not chat_template:
        if system_prompt is not None:
            raise ConfigError("system_prompt needs chat_template (the system message goes through the chat template)")
        if any(not isinstance(p, str) for p in data.prompts):
            raise ConfigError("the prompts are conversations (lists of messages): set chat_template to format them")
        return list(data.prompts)
    if not getattr(tokenizer, "chat_template", None):
        raise ConfigError("chat_template: the policy's tokenizer has no chat template")
    system = [{"role": "system", "content": system_prompt}] if system_prompt is not None else []
    texts = []
    for i, prompt in enumerate(data.prompts):
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
        try:
            texts.append(tokenizer.apply_chat_template(system + messages, tokenize=False, add_generation_prompt=True))
        except Exception as exc:  # noqa: BLE001 - a template's own error (jinja, a bad message) is one line
            raise ConfigError(f"prompt {i}: the chat template failed: {type(exc).__name__}: {one_line(exc)}") from None
    return texts


def _json_row(path: str, number: int, line: str) -> dict[str, Any]:
    try:
        row = json.loads(line)
    except ValueError as exc:
        raise ConfigError(f"{path}:{number}: not JSON ({exc})") from None
    if not isinstance(row, dict):
        raise ConfigError(f"{path}:{number}: expected an object with a \"prompt\" field")
    return row


def _dataset_rows(path: str) -> list[tuple[str, dict[str, Any]]]:
    """The rows of a ``datasets`` folder (a DatasetDict's ``train`` split)."""
    try:
        import datasets
    except ImportError:
        raise ConfigError(f"prompts {path!r} is a folder: reading a datasets folder needs the datasets package "
                          "(pip install 'rlkit[rlhf-data]')") from None
    try:
        loaded = datasets.load_from_disk(path)
    except Exception as exc:  # noqa: BLE001 - datasets raises many kinds (an empty saved Dataset: IndexError)
        raise ConfigError(f"prompts {path!r} is a folder, not a file, nor a datasets folder written by save_to_disk "
                          f"({one_line(exc)})") from None
    if isinstance(loaded, datasets.DatasetDict):
        if "train" not in loaded:
            raise ConfigError(f"prompts {path!r}: a DatasetDict without a 'train' split (it has {sorted(loaded)})")
        loaded = loaded["train"]
    return [(f"{path} row {i}", dict(row)) for i, row in enumerate(loaded)]


def _from_rows(rows: list[tuple[str, dict[str, Any]]], path: str) -> PromptData:
    if not rows:
        raise ConfigError(f"prompts {path!r} hold no rows")
    names = sorted(set(rows[0][1]) - {"prompt"})
    for where, row in rows:
        prompt = row.get("prompt")
        if not (isinstance(prompt, str) or _is_conversation(prompt)):
            raise ConfigError(f"{where}: expected a string \"prompt\" field or a list of chat messages "
                              "({\"role\": ..., \"content\": ...})")
        if sorted(set(row) - {"prompt"}) != names:
            raise ConfigError(f"{where}: its columns {sorted(set(row) - {'prompt'})} differ from the first row's {names}")
    taken = [name for name in names if name in RESERVED_COLUMNS]
    if taken:
        raise ConfigError(f"prompts {path!r}: the column {taken[0]!r} would shadow what reward functions receive "
                          f"from rlkit ({', '.join(RESERVED_COLUMNS)}); rename it")
    return PromptData([row["prompt"] for _, row in rows], {name: [row[name] for _, row in rows] for name in names})


def _is_conversation(prompt: Any) -> bool:
    return (isinstance(prompt, list) and bool(prompt)
            and all(isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                    for m in prompt))
