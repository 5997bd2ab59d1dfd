"""rlkit's lean in-process vector env against Gymnasium's SyncVectorEnv in SAME_STEP mode."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from rlkit.gym.envs import make_vec_env
from rlkit.gym.vector import SameStepEnvs


def _reference(env_id: str, n: int) -> gym.vector.VectorEnv:
    return gym.make_vec(env_id, num_envs=n, vectorization_mode="sync", disable_env_checker=True,
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})


@pytest.mark.parametrize("env_id,n,steps", [("CartPole-v1", 3, 600), ("Pendulum-v1", 2, 450),
                                            ("FrozenLake-v1", 2, 300)])
def test_same_steps_as_gymnasium(env_id: str, n: int, steps: int) -> None:
    ours, ref = make_vec_env(env_id, n), _reference(env_id, n)
    assert isinstance(ours, SameStepEnvs)
    assert ours.single_observation_space == ref.single_observation_space
    assert ours.action_space == ref.action_space
    o1, _ = ours.reset(seed=7)
    o2, _ = ref.reset(seed=7)
    np.testing.assert_array_equal(o1, o2)
    ref.action_space.seed(3)
    ends = 0
    for _ in range(steps):
        a = ref.action_space.sample()
        s1, s2 = ours.step(a), ref.step(a)
        for x, y in zip(s1[:4], s2[:4]):
            np.testing.assert_array_equal(x, y)
            assert x.dtype == y.dtype
        done = s2[2] | s2[3]
        ends += int(done.sum())
        assert set(s1[4]) == ({"final_obs", "_final_obs"} if done.any() else set())
        for i in np.flatnonzero(done):
            np.testing.assert_array_equal(s1[4]["final_obs"][i], s2[4]["final_obs"][i])
        if done.any():
            np.testing.assert_array_equal(s1[4]["_final_obs"], done)
    assert ends > 0  # episodes ended (and were reset) along the way
    ours.close()
    ref.close()


def test_fresh_arrays_every_step() -> None:
    envs = make_vec_env("CartPole-v1", 2)
    first, _ = envs.reset(seed=0)
    kept = first.copy()
    second = envs.step(np.array([0, 1]))[0]
    assert second is not first
    np.testing.assert_array_equal(first, kept)  # a later step never writes into an earlier result


def test_seed_list_length_checked() -> None:
    with pytest.raises(ValueError):
        make_vec_env("CartPole-v1", 2).reset(seed=[1, 2, 3])


class _Counted(gym.Env):
    """Counts its closes; raises in ``close()`` or in its constructor when told to."""

    closed = 0
    observation_space = gym.spaces.Box(-1, 1, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, close_raises: bool = False, init_raises: bool = False) -> None:
        if init_raises:
            raise RuntimeError("cannot open the simulator")
        self.close_raises = close_raises

    def close(self) -> None:
        _Counted.closed += 1
        if self.close_raises:
            raise RuntimeError("simulated close failure")


def test_every_sub_env_is_closed_when_one_raises_in_close_or_in_its_constructor() -> None:
    _Counted.closed = 0
    envs = SameStepEnvs([lambda: _Counted(close_raises=True), _Counted, _Counted])
    with pytest.raises(RuntimeError, match="simulated close failure"):
        envs.close()
    assert _Counted.closed == 3
    _Counted.closed = 0
    with pytest.raises(RuntimeError, match="cannot open"):
        SameStepEnvs([_Counted, _Counted, lambda: _Counted(init_raises=True)])
    assert _Counted.closed == 2
