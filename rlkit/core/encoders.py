"""Observation encoders: any supported Gymnasium observation space to one flat float vector.

An encoder turns a batch of raw observations, as a vector env returns them, into ``[N, dim]``
numbers the policy's MLPs read: ``Box`` flattened, ``Discrete`` one-hot, ``MultiDiscrete`` one
one-hot per dimension, ``MultiBinary`` as 0/1, and ``Tuple`` / ``Dict`` each part through its own
encoder, concatenated in the space's order (Stable-Baselines3's ``CombinedExtractor`` for non-image
parts). ``continuous`` marks the columns observation normalization may scale; one-hot and binary
columns stay 0/1.

An image-shaped ``Box`` (:func:`is_image`) becomes flat ``uint8`` pixels, channels first, which a
CNN torso reads (:class:`ImageEncoder`). A new encoder is a class with the :class:`ObsEncoder`
members plus one :func:`register_encoder` call; an unsupported space (``Text``, ``Graph``,
``Sequence``, an image inside a ``Dict``) is a one-line error naming it.
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
    image: tuple[int, int, int] | None
    """``(C, H, W)`` of an image encoder's ``uint8`` output (a CNN torso reads it); None: a flat vector."""

    def batch(self, obs: Any, n: int) -> np.ndarray:
        """``[n, dim]`` for ``n`` observations batched as a vector env batches them."""
        ...


def encode_items(encoder: ObsEncoder, items: list[Any]) -> np.ndarray:
    """``[len(items), dim]`` for single observations (e.g. final observations of ended episodes)."""
    if isinstance(encoder.space, gym.spaces.Box):
        return encoder.batch(np.stack([np.asarray(x) for x in items]), len(items))
    batched = concatenate(encoder.space, items, create_empty_array(encoder.space, len(items)))
    return encoder.batch(batched, len(items))


def is_image(space: gym.Space) -> bool:
    """An image-shaped ``Box``: 3-D (channels first or last), or 2-D uint8 (one channel)."""
    return isinstance(space, gym.spaces.Box) and (len(space.shape) == 3 or
                                                  (len(space.shape) == 2 and space.dtype == np.uint8))


class BoxEncoder:
    """A non-image ``Box`` of any shape, flattened (dtype converted by observation normalization)."""

    image: tuple[int, int, int] | None = None

    def __init__(self, space: gym.spaces.Box) -> None:
        self.space, self.dim = space, int(np.prod(space.shape))
        self.continuous = np.ones(self.dim, bool)

    def batch(self, obs: Any, n: int) -> np.ndarray:
        obs = np.asarray(obs)
        if obs.shape != (n, *self.space.shape):  # equal sizes of another shape too (a (2, 2) for a (4,) space)
            raise ValueError(f"observations of shape {obs.shape[1:]} for {self.space}")
        return obs.reshape(n, self.dim)


class ImageEncoder:
    """An image ``Box`` as flat ``uint8`` pixels, channels first: ``[N, C*H*W]``, stored as bytes in
    the rollout buffer and scaled to ``[0, 1]`` by the policy on its device (``scale``). The channel
    axis is the smallest one (Stable-Baselines3's rule): ``H x W x C`` (Atari, MinAtar) is
    transposed, ``C x H x W`` kept, a 2-D image has one channel. Never normalized (``continuous``
    all False)."""

    def __init__(self, space: gym.spaces.Box) -> None:
        shape = space.shape if len(space.shape) == 3 else (1, *space.shape)
        self.last = len(space.shape) == 3 and int(np.argmin(shape)) == 2 and shape[2] < shape[0]
        c, h, w = (shape[2], shape[0], shape[1]) if self.last else shape
        high = float(np.max(space.high)) if np.all(np.isfinite(space.high)) else 255.0
        if np.min(space.low) < 0 or high > 255:
            raise UnsupportedSpaceError(f"observation space {space} is image-shaped but not of pixels in [0, 255]")
        self.space, self.image, self.dim = space, (int(c), int(h), int(w)), int(c * h * w)
        self.scale = 1.0 / max(high, 1.0)
        """Pixels times ``scale`` lie in ``[0, 1]`` (1/255 for uint8 frames, 1 for 0/1 planes)."""
        self.continuous = np.zeros(self.dim, bool)

    def batch(self, obs: Any, n: int) -> np.ndarray:
        obs = np.asarray(obs)
        if obs.shape != (n, *self.space.shape):
            raise ValueError(f"observations of shape {obs.shape[1:]} for {self.space}")
        if self.last:
            obs = obs.transpose(0, 3, 1, 2)
        return np.ascontiguousarray(obs, dtype=np.uint8).reshape(n, self.dim)


class OneHotEncoder:
    """``Discrete(k, start)`` (one one-hot of width k) or a 1-D ``MultiDiscrete(nvec, start)``
    (one one-hot per dimension, concatenated)."""

    image = None

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

    image = None

    def __init__(self, space: gym.spaces.MultiBinary) -> None:
        self.space, self.dim = space, int(np.prod(space.shape))
        self.continuous = np.zeros(self.dim, bool)

    def batch(self, obs: Any, n: int) -> np.ndarray:
        return np.asarray(obs, np.float32).reshape(n, self.dim)


class CompositeEncoder:
    """``Tuple`` or ``Dict``: each part through its own encoder, concatenated in the space's order."""

    image = None

    def __init__(self, space: gym.spaces.Tuple | gym.spaces.Dict) -> None:
        self.space = space
        self.keys = list(space.spaces) if isinstance(space, gym.spaces.Dict) else list(range(len(space.spaces)))
        if not self.keys:
            raise UnsupportedSpaceError(f"unsupported observation space {space}: it has no parts")
        try:
            self.parts = [make_encoder(space[k]) for k in self.keys]
        except UnsupportedSpaceError as exc:
            raise UnsupportedSpaceError(f"{exc} (a part of {type(space).__name__} observations: a wrapper may drop "
                                        "or encode it, e.g. --env-wrappers minigrid for MiniGrid's mission)") from None
        if any(p.image for p in self.parts):
            raise UnsupportedSpaceError(f"unsupported observation space {space}: an image inside a "
                                        f"{type(space).__name__} (wrap the env to keep the image alone)")
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


register_encoder(gym.spaces.Box, lambda space: ImageEncoder(space) if is_image(space) else BoxEncoder(space))
register_encoder(gym.spaces.Discrete, OneHotEncoder)
register_encoder(gym.spaces.MultiDiscrete, OneHotEncoder)
register_encoder(gym.spaces.MultiBinary, BinaryEncoder)
register_encoder(gym.spaces.Tuple, CompositeEncoder)
register_encoder(gym.spaces.Dict, CompositeEncoder)
