"""rlkit: one PPO core for classic control, MuJoCo and token-level LLM environments.

Packages, from the bottom up: :mod:`rlkit.errors` and :mod:`rlkit.io` (checkpoints, logging),
:mod:`rlkit.core` (the PPO algorithm), :mod:`rlkit.fast` (fused kernels, on by default for
the gym trainer on the CPU) and
:mod:`rlkit.variants` (Outer-PPO, HP3O), then the two trainers :mod:`rlkit.gym` and
:mod:`rlkit.rlhf`, and :mod:`rlkit.cli`.
"""

from rlkit.core.buffer import Batch, RolloutBuffer
from rlkit.core.config import PPOConfig
from rlkit.core.gae import GAEResult, compute_gae
from rlkit.core.heads import CategoricalHead, DiagGaussianHead, make_head, register_head
from rlkit.core.loss import LossOutput, clipped_surrogate, ppo_loss
from rlkit.errors import (CheckpointError, ConfigError, EnvError, NonFiniteError, RlkitError,
                          UnsupportedSpaceError)
from rlkit.gym.agent import Agent, load_agent
from rlkit.gym.config import PRESETS, TrainConfig, preset
from rlkit.gym.population import MemberOutcome, resume_population, train_population
from rlkit.gym.trainer import PPOTrainer, TrainResult, train
from rlkit.variants import VariantGroups

__version__ = "0.1.0"

__all__ = [
    "Agent", "Batch", "CategoricalHead", "CheckpointError", "ConfigError", "DiagGaussianHead", "EnvError",
    "GAEResult", "LossOutput", "NonFiniteError", "PPOConfig", "PPOTrainer", "PRESETS", "RlkitError",
    "RolloutBuffer", "TrainConfig", "TrainResult", "UnsupportedSpaceError", "VariantGroups",
    "clipped_surrogate", "compute_gae", "load_agent", "make_head", "ppo_loss", "preset", "register_head", "train",
    "MemberOutcome", "resume_population", "train_population",
]
