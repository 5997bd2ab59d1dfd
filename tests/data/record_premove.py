"""Record, on this machine, what the code from before the package move (commit 29b33da) computes
for the runs tests/test_same_numbers.py checks. Float results depend on the CPU (vector kernels
round differently), so each CPU kind the suite runs on needs its own record, made by the old
code, never by the code under test.

    git worktree add /tmp/premove 29b33da
    cd /tmp/premove && PYTHONPATH=/tmp/premove python /path/to/tests/data/record_premove.py OUT_DIR

prints the digests as JSON (add them under a new machine name in tests/data/digests.json) and
writes OUT_DIR/gym_final.safetensors, the legacy Gym checkpoint resumed to its end (copy it to
tests/data/legacy/machines/<name>/).
"""

import importlib.util
import json
import shutil
import sys
import tempfile
from pathlib import Path

from safetensors.torch import load_file, save_file

import rlkit
from rlkit.checkpoint import resolve_checkpoint
from rlkit.rlhf import RLHFTrainer
from rlkit.rlhf_config import RLHFConfig
from tests import tiny_lm

PROMPTS = ["the movie was", "i liked it", "a plot"]
_spec = importlib.util.spec_from_file_location("same_numbers_digest", Path(__file__).parents[1] / "same_numbers_digest.py")
_helpers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_helpers)
digest, good_rate = _helpers.digest, _helpers.good_rate


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    record = {}
    for variant in ("ppo", "outer-nesterov", "hp3o-plus"):
        cfg = rlkit.preset("cartpole", variant, total_steps=4096, eval_episodes=0, progress=False,
                           logdir=tempfile.mkdtemp(), run_name=variant)
        tensors = load_file(str(resolve_checkpoint(rlkit.train(cfg).run_dir) / "tensors.safetensors"))
        record[variant] = digest({k: v for k, v in tensors.items() if k.startswith("model.")})
    cfg = RLHFConfig(num_envs=8, max_new_tokens=4, iterations=3, learning_rate=3e-3, logdir=tempfile.mkdtemp(),
                     num_minibatches=2, save_model=False, torch_threads=1, kl_coef=0.1, run_name="rlhf")
    trainer = RLHFTrainer(cfg, reward=good_rate, policy=tiny_lm.causal_lm(), tokenizer=tiny_lm.tokenizer(),
                          prompts=PROMPTS)
    trainer.train()
    record["rlhf"] = digest({"flat": trainer.flat.data})
    run = Path(tempfile.mkdtemp()) / "gym"
    shutil.copytree(Path("tests/data/legacy/gym"), run)
    result = rlkit.train(rlkit.TrainConfig(resume=str(run)))
    save_file(load_file(str(resolve_checkpoint(result.run_dir) / "tensors.safetensors")), str(out / "gym_final.safetensors"))
    record["gym_resumed_eval_return"] = result.eval_return_mean
    json.dump(record, sys.stdout, indent=1)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
