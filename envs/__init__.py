"""Environments rlkit provides beyond Gymnasium's own (imported as ``rlkit_envs``).

``rlkit/TokenLM-v0`` is the token-level LLM environment (:class:`TokenEnv`). Importing this
package registers it with Gymnasium (:func:`register_envs` does the same explicitly), so
``gym.make("rlkit/TokenLM-v0", ...)`` works after ``import rlkit_envs``. Environment code
depends on Gymnasium, numpy, torch and :mod:`rlkit.errors` only, never on trainers.
"""

from rlkit_envs.token_env import TokenEnv, TokenScorer, register_envs

register_envs()

__all__ = ["TokenEnv", "TokenScorer", "register_envs"]
