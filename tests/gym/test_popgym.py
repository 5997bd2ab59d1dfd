"""POPGym's memory tasks (extra ``popgym``) by their ids, with and without a memory torso."""

import numpy as np
import pytest

import rlkit
from rlkit.gym.envs import check_env_id

pytest.importorskip("popgym")

TASKS = ["popgym-RepeatPreviousEasy-v0", "popgym-CountRecallEasy-v0", "popgym-PositionOnlyCartPoleEasy-v0"]


@pytest.mark.parametrize("env_id", TASKS)
def test_a_popgym_task_trains_with_an_lstm_by_its_plain_id(tmp_path, env_id):
    check_env_id(env_id)  # registered on first use, as MiniGrid's ids are
    result = rlkit.train(rlkit.TrainConfig(env=env_id, memory="lstm", memory_size=16, num_envs=2, num_steps=64,
                                           num_minibatches=2, update_epochs=1, total_steps=256, eval_episodes=1,
                                           eval_max_steps=200, progress=False, logdir=str(tmp_path)))
    assert result.updates == 2 and np.isfinite(result.eval_return_mean)


def test_an_unknown_popgym_id_is_one_line(tmp_path):
    with pytest.raises(rlkit.EnvError, match="unknown environment id 'popgym-NoSuchTask-v0'"):
        check_env_id("popgym-NoSuchTask-v0")
