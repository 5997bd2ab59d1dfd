"""Environments rlkit provides beyond Gymnasium's own (imported as ``rlkit_envs``).

``rlkit/TokenLM-v0`` is the token-level LLM environment (:class:`TokenEnv`);
``rlkit/InvalidActions-v0`` a task with action masks (:class:`InvalidActions`). Importing this
package registers both with Gymnasium (:func:`register_envs` does the same explicitly), so
``gym.make("rlkit/TokenLM-v0", ...)`` works after ``import rlkit_envs``; rlkit's trainers register
the ``rlkit/`` ids themselves. Environment code
depends on Gymnasium, numpy, torch and :mod:`rlkit.errors` only, never on trainers.
"""

from rlkit_envs.masked import InvalidActions, register_masked_envs
from rlkit_envs.token_env import TokenEnv, TokenScorer, register_token_envs


def register_envs() -> None:
    """Register every ``rlkit/`` env id with Gymnasium."""
    register_token_envs()
    register_masked_envs()


register_envs()

__all__ = ["InvalidActions", "TokenEnv", "TokenScorer", "register_envs"]
