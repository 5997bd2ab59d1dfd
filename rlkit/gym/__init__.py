"""PPO on vectorized Gymnasium environments: :mod:`~rlkit.gym.trainer` (env -> buffer ->
advantages -> update), :mod:`~rlkit.gym.policies` (MLP actor-critic, numpy acting),
:mod:`~rlkit.gym.agent` (a trained agent), :mod:`~rlkit.gym.config` (config and presets),
:mod:`~rlkit.gym.envs` (vector envs with clear errors), and :mod:`~rlkit.gym.population` (many
seeds in one process, which nothing else here imports)."""
