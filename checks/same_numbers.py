"""Does the current code compute the same numbers as before? Digests of short runs, to compare
with a record made on the same CPU kind (float results differ between CPU kinds, so compare only
with a record of the same kind): this script's output at the earlier revision on this machine, or
the digests recorded in benchmarks/archive/RESULTS-log.md with their CPU kinds.

What is digested (SHA-256 over the tensors' names and bytes, in name order): the ``model.*``
tensors after ``rlkit.preset("cartpole", VARIANT, total_steps=4096, eval_episodes=0)`` for ppo,
outer-nesterov and hp3o-plus (HP3O with the ``topup`` sampling); the trained flat vector after the
tiny RLHF run (tests/tiny_lm.py, 8 envs x 4 tokens, 3 iterations, lr 3e-3, kl 0.1, fast kernels);
and the evaluation return of the legacy Gym checkpoint (tests/data/legacy/gym, Outer-PPO + HP3O+,
update 2 of 4) resumed to its end.

    python checks/same_numbers.py
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

import torch
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import rlkit  # noqa: E402
from rlkit.io.checkpoint import resolve_checkpoint  # noqa: E402
from tests import tiny_lm  # noqa: E402


def digest(tensors: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    for k in sorted(tensors):
        h.update(k.encode())
        h.update(tensors[k].detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def good_rate(prompts: list[str], responses: list[str]) -> list[float]:
    return [r.split().count("good") / 4 for r in responses]


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    from rlkit.rlhf.config import RLHFConfig
    from rlkit.rlhf.trainer import RLHFTrainer

    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for variant in ("ppo", "outer-nesterov", "hp3o-plus"):
            extra = {"hp3o_sampling": "topup"} if variant.startswith("hp3o") else {}
            cfg = rlkit.preset("cartpole", variant, total_steps=4096, eval_episodes=0, progress=False, logdir=tmp,
                               run_name=variant, **extra)
            result = rlkit.train(cfg)
            tensors = load_file(str(resolve_checkpoint(result.run_dir) / "tensors.safetensors"))
            out[variant] = digest({k: v for k, v in tensors.items() if k.startswith("model.")})
        cfg = RLHFConfig(num_envs=8, max_new_tokens=4, iterations=3, learning_rate=3e-3, logdir=tmp, num_minibatches=2,
                         save_model=False, torch_threads=1, kl_coef=0.1, run_name="rlhf", kernels="fast")
        trainer = RLHFTrainer(cfg, reward=good_rate, policy=tiny_lm.causal_lm(), tokenizer=tiny_lm.tokenizer(),
                              prompts=["the movie was", "i liked it", "a plot"])
        trainer.train()
        out["rlhf"] = digest({"flat": trainer.learner.flat.data})
        run = Path(tmp) / "legacy"
        shutil.copytree(ROOT / "tests" / "data" / "legacy" / "gym", run)
        out["legacy_gym_resumed_eval_return"] = rlkit.train(rlkit.TrainConfig(resume=str(run))).eval_return_mean
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
