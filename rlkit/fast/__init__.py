"""Opt-in kernels: the same math as :mod:`rlkit.core` with fewer per-op costs, each tested
equal to the plain path. ``kernels="auto"`` picks them for small float32 MLPs on the CPU,
where a PPO step is dominated by per-op cost rather than arithmetic."""

from rlkit.fast.kernels import Kernels, select_kernels

__all__ = ["Kernels", "select_kernels"]
