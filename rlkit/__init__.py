"""rlkit: one PPO core for classic control, MuJoCo and (later) token-level LLM environments."""

from rlkit.agent import Agent, load_agent
from rlkit.buffer import Batch, RolloutBuffer
from rlkit.config import PRESETS, ConfigError, TrainConfig, preset
from rlkit.distributions import CategoricalHead, DiagGaussianHead, UnsupportedSpaceError, make_head
from rlkit.envs import EnvError, NonFiniteError
from rlkit.gae import GAEResult, compute_gae
from rlkit.loss import LossOutput, clipped_surrogate, ppo_loss
from rlkit.trainer import PPOTrainer, TrainResult, train

__version__ = "0.1.0"

__all__ = [
    "Agent", "Batch", "CategoricalHead", "ConfigError", "DiagGaussianHead", "EnvError", "GAEResult",
    "LossOutput", "NonFiniteError", "PPOTrainer", "PRESETS", "RolloutBuffer", "TrainConfig", "TrainResult",
    "UnsupportedSpaceError", "clipped_surrogate", "compute_gae", "load_agent", "make_head", "ppo_loss",
    "preset", "train",
]
