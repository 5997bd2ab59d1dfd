"""Reward functions for tasks with known answers, ready for ``--reward rlkit.rlhf.verifiers:NAME``.

Each reads the prompt data's ``answer`` column and the completions (see :mod:`rlkit.rlhf.rewards`
for the calling convention). Correctness is parsed tolerantly, since much of an early "gain" on
such tasks is the answer's format rather than its value: :func:`correct_number` takes the last
number in the completion, so "The answer is 12." and "12" both count. :func:`correct_expression`
compares expressions with ``math-verify`` (the optional extra ``rlhf-data`` installs it).
:func:`number_only` is a format reward: 1 when the completion is the number alone.
"""

from __future__ import annotations

import math
import re
from typing import Any, Sequence

NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")
"""A number as people write it: an optional sign, digits with optional thousands commas, a decimal part."""


def last_number(text: str) -> float | None:
    """The last number in ``text`` (``"1,234.5"`` reads as 1234.5), or None when it holds none."""
    found = NUMBER.findall(text)
    if not found:
        return None
    try:
        return float(found[-1].replace(",", ""))
    except ValueError:
        return None


def _same(value: float | None, answer: Any) -> bool:
    if value is None:
        return False
    expected = float(answer)
    return math.isclose(value, expected, rel_tol=1e-9, abs_tol=1e-9)


def correct_number(completions: Sequence[str], answer: Sequence[Any], **kwargs: Any) -> list[float]:
    """1.0 when the last number of the completion equals the row's ``answer``, else 0.0."""
    return [1.0 if _same(last_number(c), a) else 0.0 for c, a in zip(completions, answer)]


def number_only(completions: Sequence[str], **kwargs: Any) -> list[float]:
    """1.0 when the completion is one number and nothing else (spaces and a final period allowed)."""
    return [1.0 if re.fullmatch(r"\s*(?:" + NUMBER.pattern + r")\.?\s*", c) else 0.0 for c in completions]


def correct_expression(completions: Sequence[str], answer: Sequence[Any], **kwargs: Any) -> list[float]:
    """1.0 when ``math-verify`` finds the completion's answer equal to the row's ``answer`` (an
    expression, a fraction, LaTeX), else 0.0."""
    try:
        from math_verify import parse, verify
    except ImportError:
        raise ImportError("correct_expression needs math-verify (pip install 'rlkit[rlhf-data]')") from None
    return [1.0 if verify(parse(str(a)), parse(c)) else 0.0 for c, a in zip(completions, answer)]
