"""The objective slot (rlkit.core.objective) and the PPO paper's objectives as variants: the default
objective through the slot keeps its bits, the fused kernels serve the default only, the KL
penalties' behaviour distribution, the adaptive coefficient's rule and its checkpoint, and bad
options as one line."""

import json
import logging
import shutil
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import rlkit
import rlkit.variants
import rlkit.variants.plugged
from rlkit.core.objective import ClippedSurrogate
from rlkit.errors import CheckpointError, ConfigError
from rlkit.gym.population import train_population
from rlkit.gym.trainer import resume
from rlkit.io.checkpoint import resolve_checkpoint
from rlkit.io.signals import Interrupted
from rlkit.variants import kl_fixed
from rlkit.variants.kl_adaptive import AdaptiveBeta, adapted
from tests.test_reproducibility import _stop_after_update, assert_same_bits, final_tensors


def _cfg(logdir, name, env="CartPole-v1", **kw):
    base = dict(env=env, total_steps=1024, num_envs=2, num_steps=128, update_epochs=2, num_minibatches=4,
                eval_episodes=0, progress=False, logdir=str(logdir), run_name=name, device="cpu")
    return rlkit.preset("cartpole" if env == "CartPole-v1" else "mujoco", **{**base, **kw})


class ThroughTheSlot(ClippedSurrogate):
    """The clipped surrogate as any other objective is run: called by the update, through autograd."""

    is_default = False


def _tiny_rlhf(logdir, name, **kw):
    from rlkit.rlhf.config import RLHFConfig
    from rlkit.rlhf.trainer import RLHFTrainer
    from tests import tiny_lm
    from tests.test_reproducibility import PROMPTS

    cfg = RLHFConfig(num_envs=8, max_new_tokens=4, iterations=2, learning_rate=3e-3, logdir=str(logdir),
                     num_minibatches=2, save_model=False, torch_threads=1, kl_coef=0.1, run_name=name, kernels="plain",
                     **kw)
    return RLHFTrainer(cfg, reward=tiny_lm.good_rate, policy=tiny_lm.causal_lm(), tokenizer=tiny_lm.tokenizer(),
                       prompts=PROMPTS)


def test_the_default_objective_through_the_slot_keeps_its_bits(tmp_path, monkeypatch):
    """PPO's clipped surrogate called through the slot, as a plug-in objective is called, gives the
    bits of the default path (rlkit.core.loss.ppo_loss on the plain kernels): a single run, a
    population of two (the stacked loss) and a tiny RLHF run."""
    def runs(tag):
        single = rlkit.train(_cfg(tmp_path, f"single-{tag}", env="Pendulum-v1", kernels="plain", total_steps=512))
        pop = train_population(_cfg(tmp_path, f"pop-{tag}", kernels="plain"), [1, 2])
        trainer = _tiny_rlhf(tmp_path, f"rlhf-{tag}")
        trainer.train()
        return final_tensors(single.run_dir), [final_tensors(o.run_dir) for o in pop], trainer

    default = runs("default")
    with monkeypatch.context() as m:
        m.setattr(rlkit.variants.plugged, "CLIPPED_SURROGATE", ThroughTheSlot())
        slot = runs("slot")
    assert not slot[2].learner.objective.is_default and default[2].learner.objective.is_default
    assert int(default[0]["optim.step"]) > 0
    assert_same_bits(default[0], slot[0])
    for a, b in zip(default[1], slot[1]):
        assert_same_bits(a, b)
    assert torch.equal(default[2].learner.flat.data, slot[2].learner.flat.data)


def test_the_fused_kernels_serve_the_default_objective_only(tmp_path, monkeypatch, caplog):
    """With --kernels fast the default objective's loss is the fused kernel; another objective runs
    through autograd (the fused MLP and Adam step still apply) and says so in one log line; in a
    population its stacked loss is not fused and the autograd-free direct step is not used."""
    import gymnasium as gym

    import rlkit.fast.kernels
    from rlkit.core.optim import FlatParameters
    from rlkit.gym.population.network import StackedLoss, StackedParameters, direct_step
    from rlkit.gym.policies import MLPActorCritic
    from rlkit.variants.no_clip import PlainSurrogate

    calls = []
    real = rlkit.fast.kernels.fused_ppo_loss
    monkeypatch.setattr(rlkit.fast.kernels, "fused_ppo_loss", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    rlkit.train(_cfg(tmp_path, "default", kernels="fast", total_steps=256))
    assert calls
    calls.clear()
    with caplog.at_level(logging.INFO, logger="rlkit"):
        rlkit.train(_cfg(tmp_path, "noclip", kernels="fast", total_steps=256, unclipped=True))
    assert not calls
    assert [r.levelno for r in caplog.records if "objective noclip runs through autograd" in r.getMessage()] \
        == [logging.WARNING]  # --kernels fast asked for by name: a warning
    models = [MLPActorCritic(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), (8, 8)) for _ in range(2)]
    model = models[0]
    flats = [FlatParameters(m.ordered_parameters(), split=sum(p.numel() for p in m.actor_parameters()))
             for m in models]
    stacked = StackedParameters(flats, model, fused=True)
    hp = rlkit.PPOConfig()
    assert direct_step(stacked, StackedLoss(model.head, hp, fused=True)) is not None
    other = StackedLoss(model.head, hp, fused=True, objective=PlainSurrogate())
    assert not other.fused and direct_step(stacked, other) is None


def _first_minibatch_kls(monkeypatch):
    """Record the penalty objective's mean KL of every minibatch."""
    seen = []
    real = kl_fixed.penalized_terms

    def recorded(inputs, hp, head, beta, dim=None):
        out = real(inputs, hp, head, beta, dim)
        seen.append(out.stats["kl"].clone())
        return out

    monkeypatch.setattr(kl_fixed, "penalized_terms", recorded)
    return seen


@pytest.mark.parametrize("env", ["CartPole-v1", "Pendulum-v1"])
@pytest.mark.parametrize("population, kernels", [(False, "fast"), (False, "plain"), (True, "fast"), (True, "plain")])
def test_the_kl_is_taken_to_the_policy_that_collected_the_rollout(tmp_path, monkeypatch, env, population, kernels):
    """The behaviour distribution is the policy's before the first epoch, computed on the first
    epoch's minibatches: the KL is exactly 0 on every update's first minibatch and grows after."""
    seen = _first_minibatch_kls(monkeypatch)
    cfg = _cfg(tmp_path, "kl", env=env, total_steps=512, kernels=kernels, kl_fixed=True)
    if population:
        assert [o.error for o in train_population(cfg, [1, 2])] == [None, None]
    else:
        rlkit.train(cfg)
    per_update = cfg.update_epochs * cfg.num_minibatches
    assert len(seen) == 2 * per_update
    firsts = torch.stack(seen[::per_update])
    assert torch.equal(firsts, torch.zeros_like(firsts))
    assert all(bool((s > 0).all()) for s in seen[1:per_update])


def test_the_adaptive_rule_halves_and_doubles_beta_outside_the_band():
    assert adapted(1.0, 0.01 / 1.5 - 1e-9, 0.01) == 0.5 and adapted(1.0, 0.01 * 1.5 + 1e-9, 0.01) == 2.0
    assert adapted(1.0, 0.01 / 1.5, 0.01) == 1.0 == adapted(1.0, 0.01 * 1.5, 0.01) == adapted(1.0, 0.012, 0.01)
    objective = kl_fixed.KLPenalty("kl_adaptive", rlkit.CategoricalHead(2), 1.0)
    hook = AdaptiveBeta(objective, 0.01)
    assert hook.end({"losses/kl": 0.1, "losses/approx_kl": 0.0}) == {"kl_adaptive/beta": 1.0}  # the update's own
    assert objective.beta == 2.0 and hook.end({"losses/kl": 0.0}) == {"kl_adaptive/beta": 2.0}
    assert objective.beta == 1.0
    with pytest.raises(ValueError, match="finite number > 0"):
        hook.load_state(rlkit.variants.VariantState({}, {"beta": float("nan")}))


def test_an_adaptive_kl_run_stopped_and_resumed_gives_the_uninterrupted_bits(tmp_path, monkeypatch):
    """beta is checkpointed: a run stopped after update 3 (its checkpoint written then) and resumed
    ends with the uninterrupted run's bits, and beta moved during the run."""
    def cfg(name):
        return _cfg(tmp_path, name, total_steps=6 * 256, checkpoint_every=512, kl_adaptive=True, kl_dtarg=0.001)

    straight = rlkit.train(cfg("straight"))
    with monkeypatch.context() as m:
        _stop_after_update(m, 3)
        with pytest.raises(Interrupted):
            rlkit.train(cfg("stopped"))
    stopped = json.loads((resolve_checkpoint(tmp_path / "stopped") / "state.json").read_text())
    assert stopped["objective"] == "kl_adaptive" and stopped["variants"]["kl_adaptive"]["beta"] != 1.0
    resumed = resume(str(tmp_path / "stopped"))
    assert_same_bits(final_tensors(straight.run_dir), final_tensors(resumed.run_dir))
    final = json.loads((resolve_checkpoint(straight.run_dir) / "state.json").read_text())
    assert final == json.loads((resolve_checkpoint(resumed.run_dir) / "state.json").read_text()) | {
        k: final[k] for k in ("config", "seconds")}


def test_a_checkpoint_resumes_only_under_its_own_objective(tmp_path):
    """A checkpoint whose config names another objective than the one it was trained with is
    refused in one line and nothing in the run changes."""
    rlkit.train(_cfg(tmp_path, "run", total_steps=256, kl_fixed=True))
    state_file = resolve_checkpoint(tmp_path / "run") / "state.json"
    for config in ({"kl_fixed": False}, {"kl_fixed": False, "kl_adaptive": True}):
        state = json.loads(state_file.read_text())
        state["config"].update(config)
        copy = tmp_path / f"copy-{len(config)}"
        shutil.copytree(tmp_path / "run", copy)
        (resolve_checkpoint(copy) / "state.json").write_text(json.dumps(state))
        before = {p: p.read_bytes() for p in copy.rglob("*") if p.is_file() and p.name != ".rlkit-run.lock"}
        with pytest.raises(CheckpointError, match="trained with the objective 'kl_fixed'") as info:
            resume(str(copy), total_steps=512)
        assert "\n" not in str(info.value)
        assert {p: p.read_bytes() for p in copy.rglob("*") if p.is_file() and p.name != ".rlkit-run.lock"} == before


@pytest.mark.parametrize("kw, match", [
    ({"kl_beta": -1.0}, "kl_beta"), ({"kl_fixed": True, "kl_beta": float("nan")}, "kl_beta"),
    ({"kl_dtarg": 0.0}, "kl_dtarg"), ({"kl_dtarg": -0.01}, "kl_dtarg"), ({"kl_adaptive": True, "kl_beta_init": 0.0},
                                                                        "kl_beta_init"),
    ({"kl_fixed": True, "kl_beta": 1e30}, r"kl_beta \(beta\) must be .* <= 1e\+06"),  # it overflowed update 1
    ({"kl_adaptive": True, "kl_beta_init": 1e30}, r"kl_beta_init \(beta\) must be .* <= 1e\+06"),
    ({"kl_fixed": True, "kl_adaptive": True}, "both replace the policy objective"),
    ({"unclipped": True, "kl_fixed": True}, "both replace the policy objective"),
    ({"kl_fixed": True, "hp3o": True}, "variant hp3o trains on other data"),
    ({"kl_adaptive": True, "hp3o": True}, "cannot be combined"),
])
def test_bad_objective_options_are_one_line(kw, match):
    with pytest.raises(ConfigError, match=match) as info:
        rlkit.preset("cartpole", **kw)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("flags, match", [(["--kl-fixed", "--kl-adaptive"], "both replace the policy objective"),
                                          (["--kl-beta", "-1"], "kl_beta (beta) must be a finite number >= 0"),
                                          (["--kl-beta", "1e30"], "and <= 1e+06, got 1e+30"),
                                          (["--kl-adaptive", "--kl-dtarg", "0"], "kl_dtarg (d_targ) must be")])
def test_the_command_line_refuses_bad_objectives_in_one_line_writing_nothing(tmp_path, capsys, flags, match):
    from rlkit.cli import main

    assert main(["train", *flags, "--logdir", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rlkit: error: ") and err.count("\n") == 1 and match in err
    assert not (tmp_path / "runs").exists()


def test_a_head_without_an_analytic_kl_is_refused_by_the_penalties():
    from rlkit.core.multi_heads import BernoulliHead

    ctx = SimpleNamespace(model=SimpleNamespace(head=BernoulliHead((3,))))
    with pytest.raises(ConfigError, match="BernoulliHead head does not offer"):
        kl_fixed.kl_penalty("kl_fixed", ctx, 1.0)


def test_the_rlhf_trainer_refuses_the_penalties_in_one_line():
    from rlkit.rlhf.config import RLHFConfig

    for kw in ({"kl_fixed": True}, {"kl_adaptive": True}):
        with pytest.raises(ConfigError, match="not offered by the RLHF trainer"):
            RLHFConfig(**kw)
    assert RLHFConfig(unclipped=True).variant == "noclip"


def test_the_rlhf_trainer_trains_on_the_plain_surrogate(tmp_path):
    """--unclipped is the one objective variant the RLHF trainer offers: its builder, named as
    "module:function", is imported and run by the RLHF trainer."""
    trainer = _tiny_rlhf(tmp_path, "rlhf-noclip", unclipped=True)
    trainer.train()
    assert trainer.learner.objective.name == "noclip" and trainer.progress.updates_done == 2


def test_the_objective_variants_have_labels_presets_and_help(capsys):
    assert rlkit.preset("mujoco", "ppo-paper-noclip").variant == "noclip"
    assert rlkit.preset("mujoco", "ppo-paper-klfix").variant == "klfix-b3"
    assert rlkit.preset("mujoco", "ppo-paper-kladapt").variant == "kladapt-d0.01"
    assert rlkit.preset("cartpole", kl_beta=0.3).variant == "klfix-b0.3"
    assert rlkit.preset("cartpole", kl_dtarg=0.003, kl_beta_init=3).variant == "kladapt-d0.003-b3"
    from rlkit.cli import main

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    for flag in ("--unclipped", "--kl-fixed", "--kl-beta", "--kl-adaptive", "--kl-dtarg", "--kl-beta-init"):
        assert flag in out
    for preset in ("ppo-paper-noclip", "ppo-paper-klfix", "ppo-paper-kladapt"):
        assert preset in out


def test_a_populations_penalty_gives_each_member_its_own_beta_and_terms():
    """The stacked penalty (dim=1) computes row k as member k's own objective on its own rows."""
    from rlkit.core.heads import gaussian_full_params
    from rlkit.core.objective import ObjectiveInputs, stack_objectives

    gen = torch.Generator().manual_seed(0)
    head = rlkit.DiagGaussianHead(2, -np.ones(2), np.ones(2))
    members = [kl_fixed.KLPenalty("kl_adaptive", head, beta) for beta in (0.5, 4.0)]

    def rand(*shape):
        return torch.randn(*shape, generator=gen)

    mean = rand(2, 16, 2)
    inputs = ObjectiveInputs(rand(2, 16), rand(2, 16), rand(2, 16), rand(2, 16), rand(2, 16), rand(2, 16),
                             rand(2, 16), gaussian_full_params(mean, rand(2, 1, 2)),
                             gaussian_full_params(mean + 0.1 * rand(2, 16, 2), rand(2, 1, 2)))
    hp = rlkit.PPOConfig()
    together = stack_objectives(members)(inputs, hp, dim=1)
    for k, member in enumerate(members):
        alone = member(ObjectiveInputs(*(None if x is None else x[k] for x in inputs)), hp)
        torch.testing.assert_close(together.loss[k], alone.loss)
        torch.testing.assert_close(together.stats["kl"][k], alone.stats["kl"])
    assert together.stats["kl"][0] > 0
