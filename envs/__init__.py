"""rlkit environments beyond Gymnasium's own: the token-level LLM environment (issue #4)."""

from envs.token_env import LLMEnvError, RewardModelScorer, TokenEnv, load_model, register

register()

__all__ = ["LLMEnvError", "RewardModelScorer", "TokenEnv", "load_model", "register"]
