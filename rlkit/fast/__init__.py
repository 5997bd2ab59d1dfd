"""Fused kernels: the math of :mod:`rlkit.core` with fewer per-op costs, each tested against the
plain path (tests/fast). They are on by default for the gym trainer on the CPU, where per-op cost
dominates a PPO step on small minibatches. What each ``kernels`` choice runs:

- ``fast``: the fused PPO loss node (:mod:`rlkit.fast.loss`; for a head declaring
  ``fused_kind="categorical"`` also the fused log-prob/entropy node of
  :mod:`rlkit.fast.categorical`, for ``"autograd"`` the head's own log-prob/entropy, for a head
  declaring neither the plain loss), the direct call of torch's fused Adam kernel
  (:mod:`rlkit.fast.adam`) and, in the gym trainer, the fused actor-critic MLP
  (:mod:`rlkit.fast.mlp`, installed by :meth:`Kernels.prepare`); for ``K`` actor-critics stacked
  on a leading axis, the stacked node (:mod:`rlkit.fast.stacked_mlp`) and, on the CPU with a
  softmax head, the minibatch step without autograd (:mod:`rlkit.fast.stacked_step`). On any device.
- ``auto`` (the default): ``fast`` for the gym trainer on the CPU; ``plain`` for the gym trainer
  on any other device (CUDA) and always for the RLHF trainer.
- ``plain`` (``--kernels plain``): :func:`rlkit.core.loss.ppo_loss`, ``torch.optim.Adam`` and the
  model's modules; nothing from this package runs.
"""

from rlkit.fast.kernels import Kernels, select_kernels

__all__ = ["Kernels", "select_kernels"]
