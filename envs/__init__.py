"""rlkit environments beyond Gymnasium's own: the token-level LLM environment (issue #4)."""

from envs.score_norm import ScoreNormalization
from envs.token_env import LLMEnvError, RewardModelScorer, TokenEnv, load_model, register

register()

__all__ = ["LLMEnvError", "RewardModelScorer", "ScoreNormalization", "TokenEnv", "load_model", "register"]
