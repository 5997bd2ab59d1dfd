"""A run's threads and seeds: torch's global seed and intra-op threads, and numpy's BLAS limited
to one thread while a run trains."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

import torch
from threadpoolctl import threadpool_limits


def seed_and_threads(seed: int, threads: int) -> None:
    """Torch's global seed and intra-op thread count for this run."""
    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    # cuDNN times candidate convolution algorithms (benchmark mode) and some accumulate with atomics:
    # fixed, deterministic choices keep a resumed CUDA run's numbers those of an uninterrupted one.
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True


class _BlasLimit:
    """The process's one BLAS limit, shared by the runs that want it (in threads of one process,
    runs may overlap): the first to enter sets it, the last to leave restores what was before."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.holders = 0
        self.limiter: Any = None

    def enter(self, limit: int) -> None:
        with self.lock:
            if self.holders == 0:
                self.limiter = threadpool_limits(limit, user_api="blas")
            self.holders += 1

    def leave(self) -> None:
        with self.lock:
            self.holders -= 1
            if self.holders == 0:
                self.limiter.restore_original_limits()
                self.limiter = None


_BLAS = _BlasLimit()


@contextlib.contextmanager
def blas_threads(limit: int) -> Iterator[None]:
    """Numpy's BLAS limited to ``limit`` threads inside the block, restored when the last block that
    limits it ends. Every run limits it to one, for two reasons. Its bits: on some CPUs OpenBLAS's
    multi-threaded GEMM rounds otherwise than its single-threaded one, so a run's numbers would
    depend on the thread count it happens to get (in-process envs or env workers, one run in a
    process or several). Its speed: OpenBLAS's threads spin-wait, so beside a busy process (an env
    worker, another run) they slow a PPO update's small products down instead of sharing them,
    while a run alone gains little from them."""
    _BLAS.enter(limit)
    try:
        yield
    finally:
        _BLAS.leave()
