"""The PPO core, in reading order: :mod:`~rlkit.core.buffer` (a rollout), :mod:`~rlkit.core.gae`
(advantages), :mod:`~rlkit.core.update` (epochs of minibatches), :mod:`~rlkit.core.loss` (the
formula), with :mod:`~rlkit.core.heads` (action distributions), :mod:`~rlkit.core.optim` (flat
parameters, Adam), :mod:`~rlkit.core.normalization`, :mod:`~rlkit.core.config` (the shared PPO
hyperparameters) and :mod:`~rlkit.core.loop` (the run loop both trainers use)."""
