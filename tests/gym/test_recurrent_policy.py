"""The recurrent actor-critic: acting in numpy, then replaying the rollout's sequences from their
stored states gives the acting log-probs and values; minibatches are whole env sequences."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlkit.core.buffer import Batch
from rlkit.core.sequences import SequenceBatches
from rlkit.gym.recurrent_policy import RecurrentActorCritic, reset_where


def _rollout(model, steps=24, envs=3, seed=0):
    """Act ``steps`` steps on ``envs`` CartPole envs with the numpy copy: (obs [T, N, D], starts
    [T, N], states [T, N, 2S], actions [T, N], log-probs [T, N], values [T, N])."""
    vec = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(envs)])
    obs, _ = vec.reset(seed=seed)
    actor, rng = model.snapshot(), np.random.default_rng(seed)
    state, starts_now = model.initial_state(envs), np.ones(envs, bool)
    out = {k: [] for k in ("obs", "starts", "states", "actions", "log_probs", "values")}
    for _ in range(steps):
        state = reset_where(state, starts_now)
        step = actor.act(obs.astype(np.float32), state, rng)
        for k, v in (("obs", obs.astype(np.float32)), ("starts", starts_now), ("states", state),
                     ("actions", step.act.actions), ("log_probs", step.act.log_probs), ("values", step.act.values)):
            out[k].append(v)
        obs, _, terminated, truncated, _ = vec.step(step.act.actions)
        state, starts_now = step.state, terminated | truncated
    return {k: torch.as_tensor(np.stack(v)) for k, v in out.items()}


@pytest.fixture(params=["lstm", "gru"])
def model(request):
    torch.manual_seed(0)
    space = gym.make("CartPole-v1")
    net = RecurrentActorCritic(space.observation_space, space.action_space, request.param, 16)
    with torch.no_grad():  # a policy that is not near-uniform, so the log-probs differ from step to step
        for p in net.parameters():
            p.add_(0.2 * torch.randn_like(p))
    return net


def test_replaying_the_rollout_gives_the_acting_log_probs_and_values(model):
    r = _rollout(model)
    assert r["starts"][1:].any(), "the rollout should cross an episode boundary"
    with torch.no_grad():
        params, values = model.replay(r["obs"], r["starts"], r["states"][0])
        log_probs, _ = model.head.log_prob_entropy(params, r["actions"].reshape(-1))
    assert torch.allclose(log_probs, r["log_probs"].reshape(-1), atol=1e-5)
    assert torch.allclose(values, r["values"].reshape(-1), atol=1e-5)


@pytest.mark.parametrize("length", [24, 8, 1])
def test_sequence_minibatches_replay_from_their_stored_states(model, length):
    r = _rollout(model)
    steps, envs = r["starts"].shape
    flat = lambda x: x.reshape(steps * envs, *x.shape[2:])  # noqa: E731
    batch = Batch(flat(r["obs"]), flat(r["actions"]), flat(r["log_probs"]), torch.zeros(steps * envs),
                  torch.zeros(steps * envs), flat(r["values"]))
    source = SequenceBatches(batch, r["starts"], r["states"], length)
    seen = []
    for mb in source.minibatches(2, torch.Generator().manual_seed(0)):
        assert mb.obs.shape[0] == length and mb.state.shape == (mb.obs.shape[1], model.state_size)
        with torch.no_grad():
            params, values = model.replay(mb.obs, mb.starts, mb.state)
            log_probs, _ = model.head.log_prob_entropy(params, mb.targets.actions)
        assert torch.allclose(log_probs, mb.targets.log_probs, atol=1e-5)
        assert torch.allclose(values, mb.targets.values, atol=1e-5)
        seen.append(mb.targets.log_probs)
    assert len(seen) == 2 and sum(len(s) for s in seen) == steps * envs
    assert torch.equal(torch.sort(torch.cat(seen)).values, torch.sort(r["log_probs"].reshape(-1)).values)


def test_a_length_that_does_not_divide_the_rollout_is_refused(model):
    r = _rollout(model, steps=6, envs=1)
    batch = Batch(r["obs"].reshape(6, -1), r["actions"].reshape(6), *(torch.zeros(6),) * 4)
    with pytest.raises(ValueError, match="does not divide"):
        SequenceBatches(batch, r["starts"], r["states"], 4)
