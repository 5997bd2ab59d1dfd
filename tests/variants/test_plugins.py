"""Extending rlkit without touching a trainer: a toy variant (an update hook with checkpoint
state) and a toy head (Bernoulli actions for MultiBinary spaces), each one module plus a
registration, run through the real trainers."""

import json
import shutil

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

import rlkit
from rlkit.core.heads import NumpySample, make_head, register_head
from rlkit.io.checkpoint import resolve_checkpoint
from rlkit.variants import UpdateHook, VariantState, register_hook, unregister_hook


class CountingHook(UpdateHook):
    """Counts the updates it wrapped; the count travels in checkpoints (JSON and a tensor)."""

    name = "counter"

    def __init__(self) -> None:
        self.count, self.open = 0, False

    def begin(self) -> None:
        assert not self.open
        self.open = True

    def end(self, stats) -> dict[str, float]:
        assert {"losses/approx_kl", "losses/clipfrac", "losses/policy_loss"} <= set(stats)
        self.open, self.count = False, self.count + 1
        return {"counter/updates": float(self.count)}

    def state(self) -> VariantState:
        return VariantState({"count": torch.tensor([self.count])}, {"count": self.count})

    def load_state(self, state: VariantState) -> None:
        assert int(state.tensors["count"][0]) == state.json["count"]
        self.count = state.json["count"]


@pytest.fixture
def counting():
    hooks = []
    register_hook("counter", lambda options, flat: hooks.append(CountingHook()) or hooks[-1])
    yield hooks
    unregister_hook("counter")


def test_a_toy_variant_runs_checkpoints_and_resumes_in_the_gym_trainer(tmp_path, counting):
    cfg = rlkit.TrainConfig(total_steps=4 * 256, num_envs=2, num_steps=128, num_minibatches=2, update_epochs=1,
                            checkpoint_every=2 * 256, logdir=str(tmp_path), run_name="a", eval_episodes=0,
                            progress=False)
    result = rlkit.train(cfg)
    ckpt = resolve_checkpoint(result.run_dir)
    assert json.loads((ckpt / "state.json").read_text())["variants"]["counter"] == {"count": 4}
    assert counting[0].count == 4
    # Resume a copy of the run from its update-2 checkpoint: the count is restored, then continues.
    copy = tmp_path / "b"
    shutil.copytree(result.run_dir, copy)
    shutil.rmtree(copy / "checkpoints" / "update-0000004")
    (copy / "checkpoints" / "latest.json").write_text(json.dumps({"checkpoint": "update-0000002"}))
    rlkit.train(rlkit.TrainConfig(resume=str(copy)))
    assert counting[-1].count == 4 and len(counting) == 2


def test_a_toy_variant_runs_in_the_rlhf_trainer(tmp_path, counting):
    from rlkit.rlhf.config import RLHFConfig
    from rlkit.rlhf.trainer import RLHFTrainer
    from tests import tiny_lm

    cfg = RLHFConfig(num_envs=4, max_new_tokens=3, iterations=2, num_minibatches=2, logdir=str(tmp_path),
                     save_model=False, torch_threads=1, checkpoint_every=1)
    trainer = RLHFTrainer(cfg, reward=lambda p, r: [0.0] * len(r), policy=tiny_lm.causal_lm(),
                          tokenizer=tiny_lm.tokenizer(), prompts=["the movie was"])
    result = trainer.train()
    state = json.loads((resolve_checkpoint(result.run_dir) / "state.json").read_text())
    assert state["variants"]["counter"] == {"count": 2}
    assert [h["counter/updates"] for h in result.history] == [1.0, 2.0]


class BernoulliHead(nn.Module):
    """Independent Bernoulli actions for ``MultiBinary(n)``; params are logits ``[B, n]``."""

    action_dtype = torch.float32

    def __init__(self, n: int) -> None:
        super().__init__()
        self.out_dim, self.action_shape = n, (n,)

    def sample(self, logits, generator=None):
        return torch.bernoulli(torch.sigmoid(logits), generator=generator)

    def log_prob(self, logits, actions):
        return -nn.functional.binary_cross_entropy_with_logits(logits, actions, reduction="none").sum(-1)

    def entropy(self, logits):
        p = torch.sigmoid(logits)
        return nn.functional.binary_cross_entropy_with_logits(logits, p, reduction="none").sum(-1)

    def log_prob_entropy(self, logits, actions):
        return self.log_prob(logits, actions), self.entropy(logits)

    def mode(self, logits):
        return (logits > 0).float()

    def to_env(self, actions):
        return actions.astype(np.int8)

    def numpy_sampler(self):
        return _NumpyBernoulli()


class _NumpyBernoulli:
    def sample(self, out, rng):
        p = 1.0 / (1.0 + np.exp(-out))
        actions = (rng.random(out.shape, dtype=np.float32) < p).astype(np.float32)
        log_probs = (actions * np.log(p) + (1 - actions) * np.log1p(-p)).sum(-1).astype(np.float32)
        return NumpySample(actions, log_probs)

    def mode(self, out):
        return (out > 0).astype(np.float32)


class CopyBits(gym.Env):
    """Observe 3 random bits; reward = bits copied correctly. 8 steps per episode."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Box(0.0, 1.0, (3,), np.float32)
        self.action_space = gym.spaces.MultiBinary(3)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.bits = 0, self.np_random.integers(0, 2, 3).astype(np.float32)
        return self.bits.copy(), {}

    def step(self, action):
        reward = float((np.asarray(action) == self.bits).sum())
        self.t += 1
        self.bits = self.np_random.integers(0, 2, 3).astype(np.float32)
        return self.bits.copy(), reward, False, self.t >= 8, {}


def test_a_toy_head_is_one_class_plus_a_registration(tmp_path, monkeypatch):
    from rlkit.core import heads

    monkeypatch.setattr(heads, "_HEADS", list(heads._HEADS))  # the registration ends with the test
    assert not isinstance(make_head(gym.spaces.MultiBinary(3)), BernoulliHead)  # rlkit's own head
    register_head(gym.spaces.MultiBinary, lambda space: BernoulliHead(int(space.n)))  # a user's replaces it
    assert isinstance(make_head(gym.spaces.MultiBinary(3)), BernoulliHead)
    if "rlkit-test/CopyBits-v0" not in gym.registry:
        gym.register("rlkit-test/CopyBits-v0", entry_point=CopyBits)
    head = make_head(gym.spaces.MultiBinary(3))
    logits = torch.randn(5, 3)
    sample = head.numpy_sampler().sample(logits.numpy(), np.random.default_rng(0))
    torch.testing.assert_close(head.log_prob(logits, torch.from_numpy(sample.actions)),
                               torch.from_numpy(sample.log_probs))
    cfg = rlkit.TrainConfig(env="rlkit-test/CopyBits-v0", total_steps=40 * 256, num_envs=4, num_steps=64,
                            num_minibatches=4, update_epochs=4, learning_rate=3e-3, ent_coef=0.0, gamma=0.0,
                            logdir=str(tmp_path), eval_episodes=5, progress=False)
    assert rlkit.train(cfg).eval_return_mean > 22  # 24 at best; random bits score ~12


def _rlkit(args, tmp_path, plugins="tests.variants.toy_variant"):
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "RLKIT_VARIANTS": plugins, "PYTHONPATH": str(Path(__file__).parents[2])}
    return subprocess.run([sys.executable, "-m", "rlkit.cli", *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)


def test_a_variant_with_its_own_options_plugs_in_through_rlkit_variants(tmp_path):
    """Its options become flags and a --help group, its label names the run, its state is
    checkpointed, and a trainer it does not build for refuses it in one line."""
    help_text = _rlkit(["train", "--help"], tmp_path).stdout
    assert "variants.toy options" in help_text and "--toy-scale" in help_text
    assert "toy-half" in help_text  # its preset is offered
    done = _rlkit(["train", "--preset", "toy-half", "--total-steps", "1024", "--num-envs", "2", "--num-steps", "256",
                   "--eval-episodes", "0", "--logdir", "runs", "--run-name", "t"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["variant"] == "toy0.5"
    state = json.loads((resolve_checkpoint(tmp_path / "runs" / "t") / "state.json").read_text())
    assert state["variants"]["toy"] == {"count": 2} and state["config"]["toy_scale"] == 0.5
    assert state["config"]["update_epochs"] == 2  # the preset's PPO field
    lost = _rlkit(["train", "--resume", "runs/t", "--total-steps", "2048"], tmp_path, plugins="")
    assert lost.returncode == 2 and lost.stderr.strip().count("\n") == 0, lost.stderr
    assert "toy_scale" in lost.stderr and "RLKIT_VARIANTS" in lost.stderr  # resuming needs the plug-in loaded
    unloaded = _rlkit(["eval", "runs/t", "--episodes", "1"], tmp_path, plugins="")
    assert unloaded.returncode == 2 and unloaded.stderr.strip().count("\n") == 0, unloaded.stderr
    assert "toy_scale" in unloaded.stderr and "module in RLKIT_VARIANTS to evaluate" in unloaded.stderr
    refused = _rlkit(["rlhf", "--toy-scale", "0.5", "--policy", "x", "--prompts", "y"], tmp_path)
    assert refused.returncode == 2 and refused.stderr.strip().count("\n") == 0
    assert "variant toy is not offered by the RLHF trainer" in refused.stderr
    bad = _rlkit(["train", "--toy-scale", "0.5"], tmp_path, plugins="tests.variants.no_such_module")
    assert bad.returncode == 2 and "rlkit: error: RLKIT_VARIANTS: no module 'tests.variants.no_such_module'" in bad.stderr


def test_a_variant_registered_after_the_groups_exist_is_refused():
    from dataclasses import dataclass

    from rlkit.variants import Variant, register_variant, registered

    @dataclass(frozen=True)
    class LateOptions:
        late_x: int = 0

    with pytest.raises(rlkit.ConfigError, match="RLKIT_VARIANTS"):
        register_variant(Variant("late", LateOptions, str, builders={}))
    assert "late" not in registered() and "late_x" not in rlkit.TrainConfig().to_dict()


NAMES = {"clashing_variant_method": "build", "clashing_variant_name": "outer"}
"""The variant names of the clashing plug-ins (else ``clash``)."""


@pytest.mark.parametrize("module,match", [
    ("clashing_variant_ppo", "option 'clip_coef' is already ppo's"),
    ("clashing_variant_trainer", "config field 'seed' is defined twice"),
    ("clashing_variant_method", "not one of the options container's attributes"),
    ("clashing_variant_preset", "preset 'mujoco' must be a new plain name"),
    ("clashing_variant_name", "variant 'outer': the name is taken by module rlkit.variants."),
])
def test_a_plugin_whose_names_clash_is_a_one_line_error(tmp_path, module, match):
    """An option named like an existing field would shadow it in flat flags and records; a variant
    named like a method of the options container would hide it: both are refused, nothing written."""
    (tmp_path / f"{module}.py").write_text(
        "from dataclasses import dataclass\n"
        "from rlkit.variants import Variant, register_variant\n"
        "@dataclass(frozen=True)\n"
        "class O:\n"
        f"    {dict(clashing_variant_ppo='clip_coef', clashing_variant_trainer='seed').get(module, 'x')}: float = 1.0\n"
        "    enabled = False\n"
        "    def validate(self): pass\n"
        f"register_variant(Variant({NAMES.get(module, 'clash')!r}, O, str, "
        f"builders={{'gym': print}}, presets={ {'mujoco': {}} if module.endswith('preset') else {} }))\n")
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "RLKIT_VARIANTS": module,
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(Path(__file__).parents[2])])}
    done = subprocess.run([sys.executable, "-m", "rlkit.cli", "train", "--total-steps", "512", "--logdir", "runs"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
    assert "rlkit: error:" in done.stderr and match in done.stderr
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("body,flag,match", [
    ("raise KeyboardInterrupt", "", "cannot import variant module"),
    ("raise SystemExit(3)", "", "cannot import variant module"),
    ("make(label=lambda o: 1 / 0)", "--bad-x 2", "label failed: ZeroDivisionError"),
    ("make(label=lambda o: 'x\\ny')", "--bad-x 2", "label must be a non-empty name"),
    ("make(label=lambda o: '')", "--bad-x 2", "label must be a non-empty name"),
    ("make(build=lambda o, c: None)", "--bad-x 2", "returned NoneType, not a Plug"),
    ("make(build=lambda o, c: 1 / 0)", "--bad-x 2", "gym builder failed: ZeroDivisionError"),
    ("make(frozen=False)", "", "must be a frozen dataclass"),
])
def test_a_broken_plugin_is_a_one_line_error_with_nothing_written(tmp_path, body, flag, match):
    (tmp_path / "broken_variant.py").write_text(
        "import dataclasses\n"
        "from rlkit.variants import Plug, Variant, register_variant\n"
        "def make(label=lambda o: 'bad', build=lambda o, c: Plug(), frozen=True):\n"
        "    @dataclasses.dataclass(frozen=frozen)\n"
        "    class O:\n"
        "        bad_x: float = 1.0\n"
        "        enabled = property(lambda self: self.bad_x != 1.0)\n"
        "        def validate(self): pass\n"
        "    register_variant(Variant('bad', O, label, builders={'gym': build}))\n"
        + body + "\n")
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "RLKIT_VARIANTS": "broken_variant",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(Path(__file__).parents[2])])}
    args = ["train", "--total-steps", "512", "--num-envs", "2", "--num-steps", "256", "--eval-episodes", "0",
            "--logdir", "runs", *flag.split()]
    done = subprocess.run([sys.executable, "-m", "rlkit.cli", *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=300)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
    assert done.stderr.startswith("rlkit: error:") and match in done.stderr, done.stderr
    assert not (tmp_path / "runs").exists()
