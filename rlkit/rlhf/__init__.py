"""RLHF on language models with the same PPO core: :mod:`~rlkit.rlhf.trainer` (rollout on the
token-level env, KL-shaped rewards, the shared update), :mod:`~rlkit.rlhf.policy` (LM
actor-critic), :mod:`~rlkit.rlhf.token_grid` (the ``[T, N]`` token grid, HP3O's response
adapter), :mod:`~rlkit.rlhf.kl`, :mod:`~rlkit.rlhf.reward_model` (Bradley-Terry training and
scoring), :mod:`~rlkit.rlhf.score_norm`, :mod:`~rlkit.rlhf.config`, :mod:`~rlkit.rlhf.checkpoint`,
:mod:`~rlkit.rlhf.build` and :mod:`~rlkit.rlhf.models`."""
