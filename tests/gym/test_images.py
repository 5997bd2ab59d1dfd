"""Image observations: pixels stay bytes in the buffer, a CNN torso reads them channels first, the
policy learns a tiny synthetic image task, and a run resumes bit-identically and evaluates."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlkit
from rlkit.core.encoders import ImageEncoder, make_encoder
from rlkit.core.heads import make_head
from rlkit.gym.cnn import CNNActorCritic
from rlkit.gym.trainer import PPOTrainer, resume
from rlkit.io.signals import Interrupted
from tests.test_reproducibility import _stop_after_update, assert_same_bits, final_tensors


@pytest.mark.parametrize("shape,dtype,image,scale", [
    ((84, 84, 4), np.uint8, (4, 84, 84), 1 / 255),  # Atari frames, channels last
    ((10, 10, 6), np.bool_, (6, 10, 10), 1.0),  # MinAtar planes
    ((3, 40, 40), np.uint8, (3, 40, 40), 1 / 255),  # channels first
    ((32, 32), np.uint8, (1, 32, 32), 1 / 255),  # grayscale
])
def test_image_spaces_encode_as_bytes_channels_first(shape, dtype, image, scale):
    high = 1 if dtype == np.bool_ else 255
    space = gym.spaces.Box(0, high, shape, dtype)
    enc = make_encoder(space)
    assert isinstance(enc, ImageEncoder) and enc.image == image and enc.scale == pytest.approx(scale)
    assert not enc.continuous.any()
    obs = np.stack([space.sample() for _ in range(3)])
    out = enc.batch(obs, 3)
    assert out.dtype == np.uint8 and out.shape == (3, int(np.prod(image)))
    chw = obs.transpose(0, 3, 1, 2) if shape[-1] < shape[0] else obs.reshape(3, *image)
    np.testing.assert_array_equal(out.reshape(3, *image), chw.astype(np.uint8))


def test_pixels_outside_0_255_are_refused():
    with pytest.raises(rlkit.errors.UnsupportedSpaceError, match="pixels"):
        make_encoder(gym.spaces.Box(-1, 1, (16, 16, 3), np.float32))


@pytest.mark.parametrize("image,width", [((4, 84, 84), 512), ((6, 10, 10), 128)])
def test_the_torso_follows_the_image_size_and_acting_matches_the_model(image, width):
    model = CNNActorCritic(image, 1 / 255, make_head(gym.spaces.Discrete(5)))
    assert model.torso[-2].out_features == width
    obs = torch.randint(0, 256, (7, int(np.prod(image))), dtype=torch.uint8)
    logits, values = model(obs)
    assert logits.shape == (7, 5) and values.shape == (7,)
    torch.testing.assert_close(model(obs.float())[0], logits)  # bytes or floats of the same pixels
    actor = model.snapshot()
    np.testing.assert_allclose(actor.value(obs.numpy()), values.detach().numpy(), rtol=1e-6)
    np.testing.assert_array_equal(actor.mode(obs.numpy()), logits.argmax(1).numpy())
    n_params = sum(p.numel() for p in model.ordered_parameters())
    assert n_params == sum(p.numel() for p in model.parameters())  # every parameter is in the flat vector


def _cfg(tmp_path, env, name, **kw):
    return rlkit.TrainConfig(env=env, total_steps=kw.pop("total_steps", 4096), num_envs=4, num_steps=64,
                             num_minibatches=4, update_epochs=4, learning_rate=1e-3, checkpoint_every=512,
                             eval_episodes=5, logdir=str(tmp_path), run_name=name, progress=False, **kw)


@pytest.mark.parametrize("env", ["rlkit-test/Pixels-v0", "rlkit-test/Grid-v0"])
def test_a_cnn_policy_learns_a_tiny_image_task_with_pixels_stored_as_bytes(tmp_path, env):
    trainer = PPOTrainer(_cfg(tmp_path, env, "a", total_steps=8192))
    assert trainer.buffer.obs.dtype == torch.uint8 and isinstance(trainer.model, CNNActorCritic)
    assert not trainer.kernels.fused_mlp
    result = trainer.train()
    first = result.eval_history[0][1] if len(result.eval_history) > 1 else None
    assert result.eval_return_mean >= 12.0, (first, result.eval_return_mean)  # a random policy scores 4 of 16


def test_an_image_run_resumes_bit_identically_and_evaluates(tmp_path, monkeypatch):
    whole = rlkit.train(_cfg(tmp_path, "rlkit-test/Grid-v0", "whole"))
    with monkeypatch.context() as m:
        _stop_after_update(m, 3)
        with pytest.raises(Interrupted):
            rlkit.train(_cfg(tmp_path, "rlkit-test/Grid-v0", "stopped"))
    resumed = resume(str(tmp_path / "stopped"))
    assert_same_bits(final_tensors(whole.run_dir), final_tensors(resumed.run_dir))
    assert resumed.eval_return_mean == whole.eval_return_mean
    agent = rlkit.load_agent(whole.run_dir)
    env = gym.make("rlkit-test/Grid-v0")
    obs, _ = env.reset(seed=3)
    action = agent.act(obs)
    assert env.action_space.contains(int(action)) and agent.act(np.stack([obs, obs])).shape == (2,)


def test_a_namespace_whose_package_is_missing_names_the_extra(monkeypatch):
    from rlkit.errors import EnvError
    from rlkit.gym import envs

    monkeypatch.setitem(envs.NAMESPACES, "NoSuchGames", ("no_such_games_pkg", None, "nosuch"))
    with pytest.raises(EnvError, match=r"pip install 'rlkit\[nosuch\]'"):
        envs.check_env_id("NoSuchGames/Pong-v0")


def test_minatar_ids_work_without_registering_them_first(tmp_path):
    """``--env MinAtar/<Game>-v1`` with the minatar extra: its ids register on first use; the bool
    10x10xC planes go through the small CNN."""
    pytest.importorskip("minatar")
    cfg = rlkit.TrainConfig(env="MinAtar/Breakout-v1", total_steps=512, num_envs=2, num_steps=64, num_minibatches=2,
                            update_epochs=1, eval_episodes=1, logdir=str(tmp_path), run_name="m", progress=False)
    result = rlkit.train(cfg)
    assert result.total_steps == 512 and result.eval_return_mean is not None
    agent = rlkit.load_agent(result.run_dir)
    assert isinstance(agent.model, CNNActorCritic) and agent.model.image == (4, 10, 10)
