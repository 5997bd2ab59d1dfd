"""``blas_threads``: numpy's BLAS limited inside the block, as it was afterwards."""

from __future__ import annotations

import pytest
from threadpoolctl import threadpool_info

from rlkit.io.threads import blas_threads


def _blas_threads() -> list[int]:
    return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]


pytestmark = pytest.mark.skipif(not _blas_threads(), reason="numpy's BLAS is not one threadpoolctl can see here")


def test_blas_limited_inside_and_restored_after() -> None:
    before = _blas_threads()
    with blas_threads(1):
        assert _blas_threads() == [1] * len(before)
    assert _blas_threads() == before


def test_none_leaves_blas_as_it_is() -> None:
    before = _blas_threads()
    with blas_threads(None):
        assert _blas_threads() == before


def test_restored_when_the_block_raises() -> None:
    before = _blas_threads()
    try:
        with blas_threads(1):
            raise KeyError("x")
    except KeyError:
        pass
    assert _blas_threads() == before


def test_overlapping_blocks_restore_when_the_last_one_ends() -> None:
    """Two runs overlapping (in threads of one process, the first ends while the second trains):
    the limit holds until both end, then it is restored."""
    before = _blas_threads()
    first, second = blas_threads(1), blas_threads(1)
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert _blas_threads() == [1] * len(before)
    second.__exit__(None, None, None)
    assert _blas_threads() == before
