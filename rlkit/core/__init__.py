"""The PPO core, in reading order: :mod:`~rlkit.core.buffer` (a rollout), :mod:`~rlkit.core.gae`
(advantages), :mod:`~rlkit.core.update` (epochs of minibatches), :mod:`~rlkit.core.loss` (the
formula), with :mod:`~rlkit.core.heads` and :mod:`~rlkit.core.multi_heads` (action distributions),
:mod:`~rlkit.core.encoders` (observation spaces to vectors), :mod:`~rlkit.core.optim` (flat
parameters, Adam), :mod:`~rlkit.core.normalization`, :mod:`~rlkit.core.config` (the shared PPO
hyperparameters) and :mod:`~rlkit.core.loop` (the update loop both trainers use)."""
