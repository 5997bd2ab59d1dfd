"""Small environments for tests, registered under ``rlkit-test/`` by ``tests/conftest.py``.

Entry points are strings so subprocess (async) workers can import them too.
"""

from __future__ import annotations

import sys

import gymnasium as gym
import numpy as np


class IdentityDiscrete(gym.Env):
    """Observe a one-hot target out of ``n``; reward 1 for choosing it. 16 steps per episode."""

    def __init__(self, n: int = 4, length: int = 16) -> None:
        self.n, self.length = n, length
        self.observation_space = gym.spaces.Box(0.0, 1.0, (n,), np.float32)
        self.action_space = gym.spaces.Discrete(n)

    def _obs(self) -> np.ndarray:
        obs = np.zeros(self.n, np.float32)
        obs[self.target] = 1.0
        return obs

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.target = 0, int(self.np_random.integers(self.n))
        return self._obs(), {}

    def step(self, action):
        reward = float(int(action) == self.target)
        self.t += 1
        self.target = int(self.np_random.integers(self.n))
        return self._obs(), reward, False, self.t >= self.length, {}


class IdentityBox(gym.Env):
    """Observe a point in [-1, 1]^2; reward -|a - obs|^2. 16 steps per episode."""

    def __init__(self, length: int = 16) -> None:
        self.length = length
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.obs = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        return self.obs, {}

    def step(self, action):
        reward = -float(np.square(np.asarray(action) - self.obs).sum())
        self.t += 1
        self.obs = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        return self.obs, reward, False, self.t >= self.length, {}


class Faulty(IdentityDiscrete):
    """Misbehaves after ``after`` steps: ``mode`` is 'nan_obs', 'nan_reward', 'raise', 'interrupt'
    (raises KeyboardInterrupt itself), 'exit' (``sys.exit(0)``, as a simulator's wrapper may) or
    'hang' (sleeps for an hour in its step, first appending a line to the file named by
    ``RLKIT_TEST_MARKER``)."""

    def __init__(self, mode: str = "raise", after: int = 40) -> None:
        super().__init__()
        self.mode, self.after, self.count = mode, after, 0

    def step(self, action):
        obs, reward, term, trunc, info = super().step(action)
        self.count += 1
        if self.count > self.after:
            if self.mode == "raise":
                raise RuntimeError("simulated physics blow-up")
            if self.mode == "interrupt":
                raise KeyboardInterrupt
            if self.mode == "hang":
                _hang()
            if self.mode == "exit":
                sys.exit(0)
            if self.mode == "nan_obs":
                obs = obs * np.nan
            if self.mode == "nan_reward":
                reward = float("nan")
        return obs, reward, term, trunc, info


def _hang() -> None:
    import os
    import time

    if os.environ.get("RLKIT_TEST_MARKER"):
        with open(os.environ["RLKIT_TEST_MARKER"], "a") as f:
            f.write("stuck\n")
    time.sleep(3600)


class FaultyForSeed(Faulty):
    """:class:`Faulty` only in an env first reset with seed ``seed`` (one member of a population)."""

    def __init__(self, mode: str = "raise", seed: int = 100, after: int = 40) -> None:
        super().__init__(mode, after)
        self.bad_seed, self.bad = seed, False

    def reset(self, *, seed=None, options=None):
        if seed is not None and self.count == 0:
            self.bad = seed == self.bad_seed
        return super().reset(seed=seed, options=options)

    def step(self, action):
        if not self.bad:
            return IdentityDiscrete.step(self, action)
        return super().step(action)


class BoxNaNForSeed(IdentityBox):
    """:class:`IdentityBox` whose observations turn NaN after ``after`` steps in an env first reset
    with seed ``seed`` (one member of a Gaussian population)."""

    def __init__(self, seed: int = 100, after: int = 40) -> None:
        super().__init__()
        self.bad_seed, self.after, self.count, self.bad = seed, after, 0, False

    def reset(self, *, seed=None, options=None):
        if seed is not None and self.count == 0:
            self.bad = seed == self.bad_seed
        return super().reset(seed=seed, options=options)

    def step(self, action):
        obs, reward, term, trunc, info = super().step(action)
        self.count += 1
        return (obs * np.nan if self.bad and self.count > self.after else obs), reward, term, trunc, info


class DiesInWorker(IdentityDiscrete):
    """Ends its process (``os._exit``) at its ``at``-th step, but only inside a worker process: a
    population's env worker dying in the middle of a step."""

    def __init__(self, at: int = 64) -> None:
        super().__init__(length=10_000)
        self.at, self.count = at, 0

    def step(self, action):
        import multiprocessing
        import os

        self.count += 1
        if self.count >= self.at and multiprocessing.parent_process() is not None:
            os._exit(3)
        return super().step(action)


class NaNRewardThenRaises(FaultyForSeed):
    """For seed 100: a NaN reward at step ``after`` + 1, then raises at every later step."""

    def __init__(self) -> None:
        super().__init__("nan_reward")

    def step(self, action):
        if self.bad and self.count > self.after:
            raise RuntimeError("simulated second failure")
        return super().step(action)


class CloseRaises(IdentityDiscrete):
    """Raises in ``close()``."""

    def close(self):
        raise RuntimeError("simulated close failure")


class CloseInterrupts(IdentityDiscrete):
    """Raises KeyboardInterrupt in ``close()`` (a simulator's binding that turns its own error into one)."""

    def close(self):
        raise KeyboardInterrupt


class WorkerFails(IdentityDiscrete):
    """Fails to construct in a worker process only (a simulator that one process cannot open twice)."""

    def __init__(self) -> None:
        import multiprocessing

        if multiprocessing.parent_process() is not None:
            raise RuntimeError("cannot open the simulator in this worker")
        super().__init__()


class CloseHangs(IdentityDiscrete):
    """Sleeps for an hour in ``close()`` (a simulator that never shuts down)."""

    def close(self):
        import time

        time.sleep(3600)


class ExitsOnInit(IdentityDiscrete):
    """Calls ``sys.exit(0)`` in its constructor."""

    def __init__(self) -> None:
        sys.exit(0)


class ResetRaises(IdentityDiscrete):
    """Raises on every reset."""

    def reset(self, *, seed=None, options=None):
        raise RuntimeError("simulated reset failure")


class DictActions(IdentityDiscrete):
    def __init__(self) -> None:
        super().__init__()
        self.action_space = gym.spaces.Dict({"a": gym.spaces.Discrete(2)})


class Endless(IdentityDiscrete):
    """Never terminates and has no time limit. Its 1000th step appends a line to the file named by
    ``RLKIT_TEST_MARKER`` (a run's episode that long is an evaluation's, when no training env
    steps that often)."""

    def step(self, action):
        import os

        obs, reward, _, _, info = super().step(action)
        if self.t == 1000 and os.environ.get("RLKIT_TEST_MARKER"):
            with open(os.environ["RLKIT_TEST_MARKER"], "a") as f:
                f.write("step 1000\n")
        return obs, reward, False, False, info


class NoneObs(IdentityDiscrete):
    """Returns None as its observation after a few steps."""

    def step(self, action):
        obs, reward, term, trunc, info = super().step(action)
        return (None if self.t > 3 else obs), reward, term, trunc, info


class DyingWorker(IdentityDiscrete):
    """The process dies (no exception, no cleanup) on the 20th step."""

    def step(self, action):
        if getattr(self, "steps", 0) >= 20:
            import os

            os._exit(3)
        self.steps = getattr(self, "steps", 0) + 1
        return super().step(action)


class HangsOnStep(IdentityDiscrete):
    """Every step blocks for an hour (an env stuck in a simulator)."""

    def step(self, action):
        import time

        time.sleep(3600)
        return super().step(action)


class SlowStart(IdentityDiscrete):
    """Takes 2 s to construct, first appending a line to the file named by ``RLKIT_TEST_MARKER``."""

    def __init__(self) -> None:
        import os
        import time

        super().__init__()
        if os.environ.get("RLKIT_TEST_MARKER"):
            with open(os.environ["RLKIT_TEST_MARKER"], "a") as f:
                f.write("start\n")
        time.sleep(2.0)


class ImageObs(IdentityDiscrete):
    def __init__(self) -> None:
        super().__init__()
        self.observation_space = gym.spaces.Box(0, 255, (64, 64, 3), np.uint8)


class Pixels(IdentityDiscrete):
    """The identity task seen as an image: a bright block marks the target among ``n`` places.
    ``side``/``channels``/``dtype`` make an Atari-like uint8 frame (H x W x C) or a MinAtar-like
    bool grid; ``channels_first`` gives C x H x W."""

    def __init__(self, side: int = 40, channels: int = 3, dtype: str = "uint8", channels_first: bool = False) -> None:
        super().__init__()
        self.side, self.channels, self.dtype, self.first = side, channels, np.dtype(dtype), channels_first
        high = 1 if self.dtype == np.bool_ else 255
        shape = (channels, side, side) if channels_first else (side, side, channels)
        self.observation_space = gym.spaces.Box(0, high, shape, self.dtype)

    def _obs(self) -> np.ndarray:
        img = np.zeros((self.side, self.side, self.channels), self.dtype)
        cell = self.side // self.n
        img[self.target * cell:(self.target + 1) * cell, :, self.target % self.channels] = (
            True if self.dtype == np.bool_ else 255)
        return img.transpose(2, 0, 1).copy() if self.first else img


class MaskedFatal(IdentityDiscrete):
    """The identity task where only two of ``n`` actions are allowed at each step (the target and
    one other); an invalid action ends the episode with reward -10 and counts in ``invalid``. The
    mask comes from ``action_masks()`` (``via="method"``) or ``info["action_mask"]`` (``via="info"``)."""

    invalid = 0
    """Invalid actions taken, over every instance in this process."""

    def __init__(self, via: str = "method", n: int = 6) -> None:
        super().__init__(n=n)
        self.via = via

    def _new_mask(self) -> None:
        other = (self.target + 1 + int(self.np_random.integers(self.n - 1))) % self.n
        self.mask = np.zeros(self.n, bool)
        self.mask[[self.target, other]] = True

    def _info(self) -> dict:
        return {"action_mask": self.mask.copy()} if self.via == "info" else {}

    def action_masks(self) -> np.ndarray:
        if self.via != "method":
            raise AttributeError("action_masks")
        return self.mask.copy()

    def __getattribute__(self, name):
        if name == "action_masks" and object.__getattribute__(self, "via") != "method":
            raise AttributeError(name)
        return object.__getattribute__(self, name)

    def reset(self, *, seed=None, options=None):
        obs, _ = super().reset(seed=seed)
        self._new_mask()
        return obs, self._info()

    def step(self, action):
        if not self.mask[int(action)]:
            MaskedFatal.invalid += 1
            return self._obs(), -10.0, True, False, self._info()
        obs, reward, term, trunc, _ = super().step(action)
        self._new_mask()
        return obs, reward, term, trunc, self._info()


def register_all() -> None:
    specs = {
        "rlkit-test/IdentityDiscrete-v0": ("IdentityDiscrete", {}),
        "rlkit-test/IdentityBox-v0": ("IdentityBox", {}),
        "rlkit-test/Raising-v0": ("Faulty", {"mode": "raise"}),
        "rlkit-test/NaNObs-v0": ("Faulty", {"mode": "nan_obs"}),
        "rlkit-test/NaNReward-v0": ("Faulty", {"mode": "nan_reward"}),
        "rlkit-test/DictActions-v0": ("DictActions", {}),
        "rlkit-test/NoneObs-v0": ("NoneObs", {}),
        "rlkit-test/DyingWorker-v0": ("DyingWorker", {}),
        "rlkit-test/ImageObs-v0": ("ImageObs", {}),
        "rlkit-test/SlowStart-v0": ("SlowStart", {}),
        "rlkit-test/HangsOnStep-v0": ("HangsOnStep", {}),
        "rlkit-test/CloseRaises-v0": ("CloseRaises", {}),
        "rlkit-test/CloseInterrupts-v0": ("CloseInterrupts", {}),
        "rlkit-test/RaisesForSeed100-v0": ("FaultyForSeed", {"mode": "raise"}),
        "rlkit-test/NaNObsForSeed100-v0": ("FaultyForSeed", {"mode": "nan_obs"}),
        "rlkit-test/NaNRewardForSeed100-v0": ("FaultyForSeed", {"mode": "nan_reward"}),
        "rlkit-test/InterruptsForSeed100-v0": ("FaultyForSeed", {"mode": "interrupt"}),
        "rlkit-test/HangsForSeed200-v0": ("FaultyForSeed", {"mode": "hang", "seed": 200, "after": 150}),
        "rlkit-test/ExitsForSeed100-v0": ("FaultyForSeed", {"mode": "exit"}),
        "rlkit-test/ExitsOnInit-v0": ("ExitsOnInit", {}),
        "rlkit-test/CloseHangs-v0": ("CloseHangs", {}),
        "rlkit-test/BoxNaNForSeed100-v0": ("BoxNaNForSeed", {}),
        "rlkit-test/DiesInWorker-v0": ("DiesInWorker", {}),
        "rlkit-test/NaNRewardThenRaises-v0": ("NaNRewardThenRaises", {}),
        "rlkit-test/WorkerFails-v0": ("WorkerFails", {}),
        "rlkit-test/ResetRaises-v0": ("ResetRaises", {}),
        "rlkit-test/Pixels-v0": ("Pixels", {}),
        "rlkit-test/MaskedFatal-v0": ("MaskedFatal", {}),
        "rlkit-test/MaskedFatalInfo-v0": ("MaskedFatal", {"via": "info"}),
        "rlkit-test/Grid-v0": ("Pixels", {"side": 10, "channels": 4, "dtype": "bool"}),
        "rlkit-test/PixelsFirst-v0": ("Pixels", {"side": 12, "channels": 2, "channels_first": True}),
    }
    for env_id, (cls, kwargs) in specs.items():
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=f"tests.toy_envs:{cls}", kwargs=kwargs)
    if "rlkit-test/Endless-v0" not in gym.registry:  # no max_episode_steps: no TimeLimit wrapper
        gym.register("rlkit-test/Endless-v0", entry_point="tests.toy_envs:Endless", max_episode_steps=None)


register_all()
