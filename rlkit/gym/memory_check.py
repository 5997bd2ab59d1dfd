"""The checks of a run's memory options (``--memory``), without torch: a sweep's dry run and a
report validate recurrent configs without importing it (a torso registered by a plug-in module
is looked up in :data:`rlkit.core.memory.MEMORIES`, which does)."""

from __future__ import annotations

from typing import Any

from rlkit.errors import ConfigError

BUILT_IN_MEMORIES = ("lstm", "gru")
"""The torsos :mod:`rlkit.core.memory` registers itself."""

MAX_MEMORY_SIZE = 65_536
"""The largest ``memory_size``: an LSTM that size already holds 2^34 weights."""


def check_memory(cfg: Any) -> None:
    """One-line :class:`ConfigError` where ``cfg``'s memory options cannot be honoured."""
    if cfg.memory not in BUILT_IN_MEMORIES:
        from rlkit.core.memory import MEMORIES

        if cfg.memory not in MEMORIES:
            raise ConfigError(f"unknown memory {cfg.memory!r}; choose from {', '.join(MEMORIES)} ('' for none)")
    for name, low, high in (("memory_size", 1, MAX_MEMORY_SIZE), ("bptt_length", 0, cfg.num_steps)):
        value = getattr(cfg, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")
        if value > high:
            raise ConfigError(f"{name}={value} is larger than {high}"
                              + (" (num_steps)" if name == "bptt_length" else " units"))
    length = cfg.bptt_length or cfg.num_steps
    if cfg.num_steps % length:
        raise ConfigError(f"bptt_length={cfg.bptt_length} does not divide num_steps={cfg.num_steps}: each sequence "
                          "an update replays is a whole chunk of the rollout")
    sequences = cfg.num_envs * (cfg.num_steps // length)
    if cfg.num_minibatches > sequences:
        raise ConfigError(f"num_minibatches={cfg.num_minibatches} exceeds the {sequences} sequences of a rollout "
                          "(num_envs x num_steps / bptt_length): a recurrent policy's minibatches are whole sequences")
    replacing = [v.name for v in cfg.variants.enabled() if v.replaces_batch]
    if replacing:
        raise ConfigError(f"--memory trains on the latest rollout's sequences; {replacing[0]}'s batches of other "
                          "data are not offered with it")
