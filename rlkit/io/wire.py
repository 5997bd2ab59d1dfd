"""Messages between a process and its worker process over a pipe: numpy arrays as their raw bytes
behind a small header, anything else pickled.

Arrays cross as bytes because that costs a fraction of pickling them, which counts where messages
go each way at every environment step. Arrays arrive bit for bit as sent (dtype, shape and bytes),
as writable copies.
"""

from __future__ import annotations

import math
import pickle
from typing import Any, NamedTuple, Sequence

import numpy as np

ARRAYS, OBJECT = b"A", b"P"


class Message(NamedTuple):
    """What :func:`unpack` found: ``arrays`` (a list of arrays) or else ``value``."""

    arrays: list[np.ndarray] | None
    value: Any


def pack_arrays(arrays: Sequence[np.ndarray]) -> bytes:
    """``arrays`` (numeric or bool, any shape) as one message."""
    header = pickle.dumps([(a.dtype.str, a.shape) for a in arrays])
    return b"".join([ARRAYS, len(header).to_bytes(4, "little"), header]
                    + [np.ascontiguousarray(a).tobytes() for a in arrays])


def pack_object(value: Any) -> bytes:
    """Any picklable ``value`` as one message."""
    return OBJECT + pickle.dumps(value)


def unpack(data: bytes) -> Message:
    """A message made by :func:`pack_arrays` or :func:`pack_object`."""
    tag = data[:1]
    if tag == OBJECT:
        return Message(None, pickle.loads(data[1:]))
    if tag != ARRAYS:
        raise ValueError(f"not a message: it starts with {tag!r}")
    size = int.from_bytes(data[1:5], "little")
    offset = 5 + size
    arrays = []
    for dtype, shape in pickle.loads(data[5:offset]):
        count = math.prod(shape)
        array = np.frombuffer(data, dtype, count=count, offset=offset).reshape(shape).copy()
        offset += array.nbytes
        arrays.append(array)
    return Message(arrays, None)
