"""rlkit: one PPO core for classic control, MuJoCo and token-level LLM environments.

Packages, from the bottom up: :mod:`rlkit.errors` and :mod:`rlkit.io` (checkpoints, logging),
:mod:`rlkit.core` (the PPO algorithm), :mod:`rlkit.fast` (fused kernels, on by default for
the gym trainer on the CPU) and
:mod:`rlkit.variants` (Outer-PPO, HP3O), then the two trainers :mod:`rlkit.gym` and
:mod:`rlkit.rlhf`, and :mod:`rlkit.cli`.
"""

import importlib
from typing import Any

_EXPORTS = {
    "rlkit.core.buffer": ("Batch", "RolloutBuffer"),
    "rlkit.core.config": ("PPOConfig",),
    "rlkit.core.gae": ("GAEResult", "compute_gae"),
    "rlkit.core.heads": ("CategoricalHead", "DiagGaussianHead", "make_head", "register_head"),
    "rlkit.core.loss": ("LossOutput", "clipped_surrogate", "ppo_loss"),
    "rlkit.errors": ("CheckpointError", "ConfigError", "EnvError", "NonFiniteError", "RlkitError",
                     "UnsupportedSpaceError"),
    "rlkit.gym.agent": ("Agent", "load_agent"),
    "rlkit.gym.config": ("PRESETS", "TrainConfig", "preset"),
    "rlkit.gym.population": ("MemberOutcome", "resume_population", "train_population"),
    "rlkit.gym.trainer": ("PPOTrainer", "train"),
    "rlkit.gym.result": ("TrainResult",),
    "rlkit.variants": ("VariantGroups",),
}
"""Each public name -> the module that defines it, imported on first use: ``import rlkit`` (and
the ``rlkit`` command's help) does not start torch."""
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'rlkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_MODULE_OF])


__version__ = "0.1.0"

__all__ = [
    "Agent", "Batch", "CategoricalHead", "CheckpointError", "ConfigError", "DiagGaussianHead", "EnvError",
    "GAEResult", "LossOutput", "NonFiniteError", "PPOConfig", "PPOTrainer", "PRESETS", "RlkitError",
    "RolloutBuffer", "TrainConfig", "TrainResult", "UnsupportedSpaceError", "VariantGroups",
    "clipped_surrogate", "compute_gae", "load_agent", "make_head", "ppo_loss", "preset", "register_head", "train",
    "MemberOutcome", "resume_population", "train_population",
]
