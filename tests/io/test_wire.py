"""Messages between a trainer and its env worker: arrays arrive bit for bit (dtype, shape, bytes)
as writable copies; anything else round-trips through pickle; what is not a message is refused."""

import numpy as np
import pytest

from rlkit.io.wire import pack_arrays, pack_object, unpack


def test_arrays_arrive_bit_for_bit():
    rng = np.random.default_rng(0)
    sent = [rng.standard_normal((3, 1, 11)), rng.standard_normal((3, 2)).astype(np.float32),
            rng.random((3, 4)) < 0.5, rng.integers(-5, 5, (2, 3), dtype=np.int64), np.float64(np.nan) * np.ones(()),
            np.zeros((0, 3), np.uint8), rng.standard_normal((4, 3)).T]  # a 0-d array, an empty one, a strided one
    got = unpack(pack_arrays(sent))
    assert got.value is None and len(got.arrays) == len(sent)
    for a, b in zip(sent, got.arrays):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == np.ascontiguousarray(b).tobytes()
        assert b.flags.writeable
    got.arrays[0][0] = 7.0  # a copy: the sender's array is untouched
    assert not np.any(sent[0][0] == 7.0)


def test_objects_round_trip_and_other_bytes_are_refused():
    value = ("step", [np.ones(2), None, RuntimeError("boom")])
    got = unpack(pack_object(value))
    assert got.arrays is None and got.value[0] == "step" and got.value[1][1] is None
    assert np.array_equal(got.value[1][0], np.ones(2)) and str(got.value[1][2]) == "boom"
    with pytest.raises(ValueError, match="not a message"):
        unpack(b"Xjunk")
