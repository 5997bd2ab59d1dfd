"""Reward functions for tasks with known answers, ready for ``--reward rlkit.rlhf.verifiers:NAME``.

Each reads the prompt data's ``answer`` column and the completions (see :mod:`rlkit.rlhf.rewards`
for the calling convention). Correctness is parsed tolerantly, since much of an early "gain" on
such tasks is the answer's format rather than its value: :func:`correct_number` takes the last
number in the completion, so "The answer is 12." and "12" both count. :func:`correct_expression`
compares expressions with ``math-verify`` (the optional extra ``rlhf-data`` installs it).
:func:`number_only` is a format reward: 1 when the completion is the number alone.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any, Sequence

NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")
"""A number as people write it: an optional sign, digits with optional thousands commas, a decimal part."""


def last_number(text: str) -> float | None:
    """The last number in ``text`` (``"1,234.5"`` reads as 1234.5), or None when it holds none."""
    found = _last_exact(text)
    return None if found is None else float(found)


def _last_exact(text: str) -> Decimal | None:
    found = NUMBER.findall(text)
    if not found:
        return None
    try:
        return Decimal(found[-1].replace(",", ""))
    except InvalidOperation:
        return None


def _same(value: Decimal | None, answer: Any) -> bool:
    """Exact equality (2000000001 is not 2e9; "3.50" is 3.5); an answer that is no number is an error
    naming it (a data problem, not the completion's)."""
    if isinstance(answer, bool) or not isinstance(answer, (int, float, str, Decimal)):
        raise ValueError(f"the answer {answer!r} is not a number")
    try:
        expected = Decimal(str(answer).strip())
    except InvalidOperation:
        raise ValueError(f"the answer {answer!r} is not a number") from None
    return value is not None and value == expected


def correct_number(completions: Sequence[str], answer: Sequence[Any], **kwargs: Any) -> list[float]:
    """1.0 when the last number of the completion equals the row's ``answer``, else 0.0."""
    return [1.0 if _same(_last_exact(c), a) else 0.0 for c, a in zip(completions, answer)]


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
