"""Same seed, same numbers across the package move, and checkpoints written before it still load.

``data/digests.json`` holds SHA-256 digests of the weights after short runs, computed by the
code as it was before the layout change (CartPole for ``ppo``, ``outer-nesterov`` and
``hp3o-plus``; a tiny RLHF run). The default ``kernels="auto"`` path (fast on a CPU MLP) and the
fast kernels on the LLM path must reproduce them bit for bit. ``data/legacy/`` holds a Gym
checkpoint (Outer-PPO + HP3O+) and an RLHF checkpoint (Outer-PPO + HP3O) written by that code.

Float results depend on the CPU (vector kernels round differently), so the digests are kept per
machine kind, each computed by the old code on that kind (``data/record_premove.py``); a run
must equal the old code's result on one of them. On a CPU kind not recorded yet these tests
fail until the old code is run there.
"""

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import rlkit
from rlkit.io.checkpoint import resolve_checkpoint
from tests import tiny_lm
from tests.same_numbers_digest import digest, good_rate

DATA = Path(__file__).parent / "data"
MACHINES = json.loads((DATA / "digests.json").read_text())["machines"]
NEW_MACHINE = "not what the pre-move code computes on any recorded machine; on a new CPU kind run tests/data/record_premove.py"


def recorded(key: str) -> set:
    """What the pre-move code computed for ``key`` on each recorded machine kind."""
    return {machine[key] for machine in MACHINES.values()}


PROMPTS = ["the movie was", "i liked it", "a plot"]


@pytest.mark.parametrize("variant", ["ppo", "outer-nesterov", "hp3o-plus"])
def test_cartpole_weights_equal_the_digest_recorded_before_the_move(logdir, variant):
    # HP3O's default sampling changed after the move (to the authors' min(samples / k, L) without
    # replacement); "topup" is the sampling these digests were recorded with.
    extra = {"hp3o_sampling": "topup"} if variant.startswith("hp3o") else {}
    cfg = rlkit.preset("cartpole", variant, total_steps=4096, eval_episodes=0, progress=False, logdir=logdir,
                       run_name=variant, **extra)
    result = rlkit.train(cfg)
    tensors = load_file(str(resolve_checkpoint(result.run_dir) / "tensors.safetensors"))
    assert digest({k: v for k, v in tensors.items() if k.startswith("model.")}) in recorded(variant), NEW_MACHINE


def test_tiny_rlhf_weights_equal_the_digest_recorded_before_the_move(logdir):
    from rlkit.rlhf.config import RLHFConfig
    from rlkit.rlhf.trainer import RLHFTrainer

    cfg = RLHFConfig(num_envs=8, max_new_tokens=4, iterations=3, learning_rate=3e-3, logdir=logdir, num_minibatches=2,
                     save_model=False, torch_threads=1, kl_coef=0.1, run_name="rlhf", kernels="fast")
    trainer = RLHFTrainer(cfg, reward=good_rate, policy=tiny_lm.causal_lm(), tokenizer=tiny_lm.tokenizer(),
                          prompts=PROMPTS)
    trainer.train()
    assert digest({"flat": trainer.flat.data}) in recorded("rlhf"), NEW_MACHINE


def test_a_gym_checkpoint_from_before_the_move_loads_and_resumes_bit_identically(tmp_path):
    run = tmp_path / "gym"
    shutil.copytree(DATA / "legacy" / "gym", run)
    agent, cfg = rlkit.Agent.load(run)
    assert cfg.variant == "outer-lr1-m0.5-nesterov+hp3o+" and cfg.hidden_sizes == (8,)
    result = rlkit.train(rlkit.TrainConfig(resume=str(run)))  # update 2 of 4: Outer and HP3O state restored
    final = load_file(str(resolve_checkpoint(result.run_dir) / "tensors.safetensors"))
    matches = []
    for machine in MACHINES.values():  # the old code's own resumption of this checkpoint on that machine kind
        expected = load_file(str(DATA / machine["gym_final"]))
        if set(final) == set(expected) and all(torch.equal(final[k], expected[k]) for k in expected):
            matches.append(machine)
    assert matches, NEW_MACHINE
    assert result.eval_return_mean == matches[0]["gym_resumed_eval_return"]  # 173.0, as printed before the move


def test_an_rlhf_checkpoint_from_before_the_move_loads(tmp_path):
    from rlkit.rlhf.config import RLHFConfig
    from rlkit.rlhf.trainer import RLHFTrainer

    run = tmp_path / "rlhf"
    shutil.copytree(DATA / "legacy" / "rlhf", run)
    trainer = RLHFTrainer(RLHFConfig(resume=str(run)), reward=good_rate, policy=tiny_lm.causal_lm(),
                          tokenizer=tiny_lm.tokenizer(), prompts=PROMPTS)
    stored = load_file(str(resolve_checkpoint(run) / "tensors.safetensors"))
    assert trainer.iteration == 2 and trainer.cfg.hp3o and trainer.cfg.outer_lr == 1.5
    assert torch.equal(trainer.flat.data, stored["flat"])
    assert len(trainer.source.buffer) == 4  # HP3O's stored responses
    assert torch.equal(trainer.hooks[0].momentum_buffer, stored["outer.momentum_buffer"])
