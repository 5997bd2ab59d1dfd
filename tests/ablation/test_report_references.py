"""The report's measured 'random' score is taken on the env as its runs are evaluated: under the
evaluation side of the runs' wrapper stack."""

import gymnasium as gym
import pandas as pd
import pytest

from rlkit.ablation.references import random_return, references
from rlkit.gym import wrappers as stacks


def test_the_random_score_is_measured_under_the_runs_wrapper_stack(monkeypatch):
    tenfold = stacks.WrapperStack(train=lambda env: env,
                                  evaluate=lambda env: gym.wrappers.TransformReward(env, lambda r: 10.0 * r))
    monkeypatch.setitem(stacks.WRAPPER_STACKS, "tenfold", tenfold)
    plain = random_return("CartPole-v1", episodes=3)
    assert plain > 5 and random_return("CartPole-v1", episodes=3, wrappers="tenfold") == pytest.approx(10 * plain, rel=1e-12)
    scores = pd.DataFrame({"env": ["CartPole-v1"], "score": [500.0]})
    refs = references(scores, {}, {"CartPole-v1": {}}, {"CartPole-v1": "tenfold"})
    assert refs["CartPole-v1"]["random"] == random_return("CartPole-v1", wrappers="tenfold")
    assert references(scores, {})["CartPole-v1"]["random"] == random_return("CartPole-v1")


def test_on_a_masked_env_the_random_score_chooses_among_the_allowed_actions():
    """Uniform over all 64 actions nearly always picks a forbidden one (-1 at once); an agent never can."""
    masked = random_return("rlkit/InvalidActions-v0", episodes=5, env_kwargs={"n": 64, "valid": 4})
    assert 25 / 4 - 3 < masked < 25 / 4 + 3
