"""Observation encoders: any supported Gymnasium observation space to one flat float vector.

An encoder turns a batch of raw observations, as a vector env returns them, into ``[N, dim]``
numbers the policy's MLPs read: ``Box`` flattened, ``Discrete`` one-hot, ``MultiDiscrete`` one
one-hot per dimension, ``MultiBinary`` as 0/1, and ``Tuple`` / ``Dict`` each part through its own
encoder, concatenated in the space's order (Stable-Baselines3's ``CombinedExtractor`` for non-image
parts). ``continuous`` marks the columns observation normalization may scale; one-hot and binary
columns stay 0/1.

A new encoder is a class with the :class:`ObsEncoder` members plus one :func:`register_encoder`
call; an unsupported space (``Text``, ``Graph``, ``Sequence``, image-shaped ``Box``) is a one-line
error naming it.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

import gymnasium as gym
import numpy as np
from gymnasium.vector.utils import concatenate, create_empty_array

from rlkit.errors import UnsupportedSpaceError


class ObsEncoder(Protocol):
    """What the trainer, the buffer and the agent need from an observation space."""

    space: gym.Space
    dim: int
    """Width of one encoded observation."""
    continuous: np.ndarray
    """``[dim]`` bool: columns observation normalization scales (the others are left as they are)."""

    def batch(self, obs: Any, n: int) -> np.ndarray:
        """``[n, dim]`` for ``n`` observations batched as a vector env batches them."""
        ...


def encode_items(encoder: ObsEncoder, items: list[Any]) -> np.ndarray:
    """``[len(items), dim]`` for single observations (e.g. final observations of ended episodes)."""
    if isinstance(encoder.space, gym.spaces.Box):
        return encoder.batch(np.stack([np.asarray(x) for x in items]), len(items))
    batched = concatenate(encoder.space, items, create_empty_array(encoder.space, len(items)))
    return encoder.batch(batched, len(items))


class BoxEncoder:
    """A non-image ``Box`` of any shape, flattened (dtype converted by observation normalization)."""

    def __init__(self, space: gym.spaces.Box) -> None:
        if len(space.shape) >= 3 or (space.dtype == np.uint8 and len(space.shape) >= 2):
            raise UnsupportedSpaceError(f"observation space {space} looks like an image; rlkit's MLP policies take "
                                        "flat vectors (no CNN torso yet): flatten or encode it in a wrapper")
        self.space, self.dim = space, int(np.prod(space.shape))
        self.continuous = np.ones(self.dim, bool)

    def batch(self, obs: Any, n: int) -> np.ndarray:
        obs = np.asarray(obs)
        if obs.shape != (n, *self.space.shape):  # equal sizes of another shape too (a (2, 2) for a (4,) space)
            raise ValueError(f"observations of shape {obs.shape[1:]} for {self.space}")
        return obs.reshape(n, self.dim)


class OneHotEncoder:
    """``Discrete(k, start)`` (one one-hot of width k) or a 1-D ``MultiDiscrete(nvec, start)``
    (one one-hot per dimension, concatenated)."""

    def __init__(self, space: gym.spaces.Discrete | gym.spaces.MultiDiscrete) -> None:
        if isinstance(space, gym.spaces.Discrete):
            nvec, start = np.array([space.n]), np.array([space.start])
        else:
            if space.nvec.ndim != 1:
                raise UnsupportedSpaceError(f"unsupported observation space {space}: MultiDiscrete must be 1-D")
            nvec, start = space.nvec, space.start
        self.space, self.nvec, self.start = space, nvec.astype(np.int64), start.astype(np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(nvec)[:-1]]).astype(np.int64)
        self.dim = int(nvec.sum())
        self.continuous = np.zeros(self.dim, bool)

    def batch(self, obs: Any, n: int) -> np.ndarray:
        value = np.asarray(obs, np.int64).reshape(n, -1) - self.start
        if ((value < 0) | (value >= self.nvec)).any():
            raise ValueError(f"an observation outside {self.space}")
        index = value + self.offsets
        out = np.zeros((n, self.dim), np.float32)
        np.put_along_axis(out, index, 1.0, axis=1)
        return out


class BinaryEncoder:
    """``MultiBinary`` of any shape, flattened as 0/1 floats."""

    def __init__(self, space: gym.spaces.MultiBinary) -> None:
        self.space, self.dim = space, int(np.prod(space.shape))
        self.continuous = np.zeros(self.dim, bool)

    def batch(self, obs: Any, n: int) -> np.ndarray:
        return np.asarray(obs, np.float32).reshape(n, self.dim)


class CompositeEncoder:
    """``Tuple`` or ``Dict``: each part through its own encoder, concatenated in the space's order."""

    def __init__(self, space: gym.spaces.Tuple | gym.spaces.Dict) -> None:
        self.space = space
        self.keys = list(space.spaces) if isinstance(space, gym.spaces.Dict) else list(range(len(space.spaces)))
        if not self.keys:
            raise UnsupportedSpaceError(f"unsupported observation space {space}: it has no parts")
        self.parts = [make_encoder(space[k]) for k in self.keys]
        self.dim = sum(p.dim for p in self.parts)
        self.continuous = np.concatenate([p.continuous for p in self.parts])

    def batch(self, obs: Any, n: int) -> np.ndarray:
        cols = [p.batch(obs[k], n) for k, p in zip(self.keys, self.parts)]
        return np.concatenate([np.asarray(c, np.float32) for c in cols], axis=1)


EncoderFactory = Callable[[gym.Space], ObsEncoder]
_ENCODERS: list[tuple[type[gym.Space], EncoderFactory]] = []


def register_encoder(space_type: type[gym.Space], factory: EncoderFactory) -> None:
    """Make ``factory(space)`` the encoder for observation spaces of ``space_type`` (later registrations win)."""
    _ENCODERS.insert(0, (space_type, factory))


def make_encoder(space: gym.Space) -> ObsEncoder:
    """The encoder for an observation space; any other space is a one-line error naming it."""
    for space_type, factory in _ENCODERS:
        if isinstance(space, space_type):
            return factory(space)
    names = ", ".join(sorted({t.__name__ for t, _ in _ENCODERS}))
    raise UnsupportedSpaceError(f"unsupported observation space {space}: rlkit encodes {names} observations")


register_encoder(gym.spaces.Box, BoxEncoder)
register_encoder(gym.spaces.Discrete, OneHotEncoder)
register_encoder(gym.spaces.MultiDiscrete, OneHotEncoder)
register_encoder(gym.spaces.MultiBinary, BinaryEncoder)
register_encoder(gym.spaces.Tuple, CompositeEncoder)
register_encoder(gym.spaces.Dict, CompositeEncoder)
