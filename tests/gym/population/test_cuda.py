"""A population with its network on CUDA (environments and acting on the CPU): the stacked
network gives each member what its own model gives on the GPU, and a population trains there with
every member a single run. Skipped without a GPU."""

import json

import numpy as np
import pytest
import torch

import rlkit
from rlkit.core.config import PPOConfig
from rlkit.gym.population import train_population
from tests.gym.population.test_network import SPACES, _batch, _member_loss, _members

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize("kind", SPACES)
def test_the_stacked_network_on_cuda_is_each_members_own(kind):
    models, stacked = _members(kind, device="cuda")
    mb = type(_batch(_members(kind)[0], 3))(*(x.to("cuda") for x in _batch(_members(kind)[0], 3)))
    dist_params, values = stacked.forward(mb.obs)
    from rlkit.gym.population.network import StackedLoss

    hp = PPOConfig()
    out = StackedLoss(models[0].head, hp)(stacked.head_tensors(), dist_params, values, mb)
    out.loss.sum().backward()
    for k, model in enumerate(models):
        own_params, own_values, own = _member_loss(model, mb, k, hp)
        assert torch.allclose(dist_params[k], own_params, atol=1e-5) and torch.allclose(values[k], own_values, atol=1e-5)
        assert torch.allclose(own.loss, out.loss[k], atol=1e-5)
        grads = torch.autograd.grad(own.loss, model.ordered_parameters())
        assert torch.allclose(torch.cat([g.reshape(-1) for g in grads]), stacked.theta.grad[k], atol=1e-4)


HP3O = {"hp3o": True, "hp3o_samples": 256}


@pytest.mark.parametrize("env, backend, extra", [("CartPole-v1", "vector", {}), ("Pendulum-v1", "gymnasium", {}),
                                                 ("CartPole-v1", "gymnasium", HP3O)])
def test_a_population_trains_on_cuda_each_member_a_single_run(tmp_path, env, backend, extra):
    cfg = rlkit.preset("cartpole", env=env, env_backend=backend, device="cuda", total_steps=2048, num_envs=2,
                       num_steps=128, eval_episodes=2, checkpoint_every=1024, progress=False, logdir=str(tmp_path),
                       run_name="gpu", **extra)
    outcomes = train_population(cfg, [1, 2, 3])
    assert [o.error for o in outcomes] == [None] * 3
    for o in outcomes:
        result = json.loads((tmp_path / f"gpu__s{o.seed}" / "result.json").read_text())
        assert result["updates"] == 8 and np.isfinite(result["eval_return_mean"])
    weights = [o.result.agent.model.actor[0].weight.detach().cpu() for o in outcomes]
    assert not torch.equal(weights[0], weights[1])


@pytest.mark.parametrize("extra", [{}, HP3O])
def test_a_killed_population_on_cuda_resumes_every_member_bit_identically(tmp_path, monkeypatch, extra):
    from rlkit.gym.population import PopulationInterrupted
    from rlkit.gym.population import resume_population
    from tests.test_reproducibility import _stop_after_update, assert_same_bits, final_tensors

    cfg = dict(total_steps=2048, num_envs=2, num_steps=128, eval_episodes=2, checkpoint_every=512, progress=False,
               logdir=str(tmp_path), device="cuda", env_backend="vector", **extra)
    whole = train_population(rlkit.preset("cartpole", run_name="whole", **cfg), [1, 2])
    with monkeypatch.context() as m:
        _stop_after_update(m, 3)
        with pytest.raises(PopulationInterrupted):
            train_population(rlkit.preset("cartpole", run_name="cut", **cfg), [1, 2])
    resumed = resume_population([tmp_path / "cut__s1", tmp_path / "cut__s2"])
    for w, r in zip(whole, resumed):
        assert_same_bits(final_tensors(w.run_dir), final_tensors(r.run_dir))
        assert w.result.eval_history == r.result.eval_history


def test_an_hp3o_member_on_cuda_gives_the_same_bits_alone_and_among_others(tmp_path):
    """HP3O members update by their own models (no GEMM batched across members), and acting is
    numpy on the CPU: on CUDA too a member's bits do not depend on who else is in the population."""
    from tests.test_reproducibility import assert_same_bits, final_tensors

    cfg = dict(total_steps=2048, num_envs=2, num_steps=128, eval_episodes=2, checkpoint_every=512, progress=False,
               logdir=str(tmp_path), device="cuda", **HP3O)
    (alone,) = train_population(rlkit.preset("cartpole", run_name="alone", **cfg), [2])
    among = train_population(rlkit.preset("cartpole", run_name="among", **cfg), [5, 2, 9])
    assert_same_bits(final_tensors(alone.run_dir), final_tensors(among[1].run_dir))
    assert alone.result.eval_history == among[1].result.eval_history
