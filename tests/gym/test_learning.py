"""Each algorithm learns: PPO, HP3O and Outer-PPO take CartPole far above a random policy's return
(about 22) in a few thousand steps. The median of three seeds, trained as one population (each
member is its single run, tested elsewhere); every threshold lies far below the returns these seeds
reach (PPO's ten seeds here: 165 to 424 at 20k steps; Outer-PPO's: 246 to 500; HP3O's: 359 to 500
at 10k) and far above random. Solving CartPole (475) is the slow suite's check."""

import numpy as np
import pytest

import rlkit

RANDOM_RETURN = 22.0


@pytest.mark.parametrize("variant, steps, threshold", [
    ("ppo", 20_480, 100.0),
    ("outer-nesterov", 20_480, 150.0),
    ("hp3o", 10_240, 150.0),
])
def test_each_algorithm_takes_cartpole_far_above_random(tmp_path, variant, steps, threshold):
    cfg = rlkit.preset("cartpole", variant, total_steps=steps, eval_episodes=5, progress=False, logdir=str(tmp_path))
    members = rlkit.train_population(cfg, [1, 2, 3])
    assert [m.error for m in members] == [None] * 3
    returns = [m.result.eval_return_mean for m in members]
    assert np.median(returns) >= threshold > 4 * RANDOM_RETURN, returns
