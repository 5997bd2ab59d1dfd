"""Many seeds in one process: a population of independent PPO runs trained as one batched network.

:func:`train_population` and :func:`resume_population` are the entry points
(:mod:`~rlkit.gym.population.start`); the rest is the engine, in the order an update runs:
:mod:`~rlkit.gym.population.engine` (members stepped in lockstep, the run loop for all of them),
:mod:`~rlkit.gym.population.rollout` (one batched rollout step of all members),
:mod:`~rlkit.gym.population.envs` and :mod:`~rlkit.gym.population.host` (their envs stepped as one,
some in a worker process), :mod:`~rlkit.gym.population.network` (every member's actor-critic as one
stacked network, the update) and :mod:`~rlkit.gym.population.eval` (evaluations in lockstep).
The single-run path (:mod:`rlkit.gym.trainer` and the rest of :mod:`rlkit.gym`) never imports this
package (a lint-imports contract).
"""

from rlkit.gym.population.engine import MemberOutcome, PopulationInterrupted
from rlkit.gym.population.start import check_population, is_member, resume_population, train_population

__all__ = ["MemberOutcome", "PopulationInterrupted", "check_population", "is_member", "resume_population",
           "train_population"]
