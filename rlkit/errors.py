"""Every error rlkit reports to a user derives from :class:`RlkitError`.

Each one is a one-line message naming what was wrong; the CLI catches ``RlkitError`` alone
and prints ``rlkit: error: <message>`` with exit code 2. The second base keeps the Python
meaning (a bad value is a ``ValueError``, a bad space a ``TypeError``).
"""

from __future__ import annotations


class RlkitError(Exception):
    """Base of rlkit's user-facing errors (one line)."""


class ConfigError(RlkitError, ValueError):
    """A malformed configuration (one line, names the field)."""


class EnvError(RlkitError, RuntimeError):
    """An environment could not be made or failed while stepping (one line, names the env)."""


class NonFiniteError(RlkitError, FloatingPointError):
    """NaN or inf in observations, rewards or the loss."""


class UnsupportedSpaceError(RlkitError, TypeError):
    """A Gymnasium space rlkit has no head (or encoder) for."""


class OutputError(RlkitError, OSError):
    """A record rlkit writes could not be written (one line, names it; the file it would have
    replaced is intact)."""


class CheckpointError(RlkitError, RuntimeError):
    """No readable checkpoint at the given path (one line)."""


class LLMEnvError(RlkitError, ValueError):
    """Bad LLM-environment input (one line): empty dataset, over-long prompt, unknown model, ..."""


class ScoreNormalizationError(RlkitError, ValueError):
    """Bad reward-score calibration input or file (one line)."""


def one_line(exc: BaseException) -> str:
    """The first line of an exception's message (its type name when it has none)."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def unreadable_checkpoint(ckpt: object, exc: BaseException) -> CheckpointError:
    """The one-line error of a checkpoint folder whose files do not read back."""
    return CheckpointError(f"unreadable checkpoint {str(ckpt)!r}: {one_line(exc)}")


class ObservationError(RlkitError, ValueError):
    """An observation an agent cannot act on (wrong shape, not numeric, NaN or inf)."""
