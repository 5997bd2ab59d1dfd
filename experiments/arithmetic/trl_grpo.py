"""TRL's GRPOTrainer on the arithmetic task at the settings of run.py's ``grpo`` method, so the two
stand side by side in one ``curve.jsonl``: held-out accuracy over training wall time, seconds per
iteration and peak memory.

One iteration, as in rlkit: one generation of 16 completions (4 prompts x 4) of at most 12 tokens,
then 1 epoch of 2 minibatches of 8 (TRL: ``num_generations=4``, ``per_device_train_batch_size=8``,
``steps_per_generation=2``, ``num_iterations=1``, so 2 optimizer steps). Loss ``dapo`` (token mean
over the minibatch), rewards scaled per group, no advantage normalization beyond it, beta 0 (no
reference model), clip 0.2, lr 1e-5 held constant, Adam epsilon 1e-5, gradient norm 1.0,
temperature 1, fp32 on the CPU with 2 threads, without gradient checkpointing (rlkit keeps
activations). Prompts are formatted with the model's chat template as text (rlkit's
``--chat-template``), so both libraries see the same token ids and the reward function gets plain
strings.

Every ``--segment`` iterations the model is saved and ``rlkit rlhf eval`` scores it greedily on the
held-out problems (its time is not training time); the run stops at the first segment whose
training seconds reach ``--minutes``. A stopped run of this script starts its unfinished seeds
again (TRL's state is not resumed); finished seeds are kept.

    pip install trl==1.16.0    # this script only; not an rlkit dependency
    python experiments/arithmetic/trl_grpo.py --out runs/arithmetic
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from run import GROUP, common_arguments, evaluate, parse, points, rewrite  # noqa: E402  (this folder's run.py)

from rlkit.ablation.measurements import ExtendList  # noqa: E402

PROMPTS_PER_ITERATION, NEW_TOKENS, EPOCHS, MINIBATCHES = 4, 12, 1, 2


def templated(rows: list[dict], tokenizer, chat_template: bool) -> list[dict]:
    """Each problem's prompt as the text rlkit feeds the model (with ``--chat-template``, the template's)."""
    if not chat_template:
        return rows
    return [{**row, "prompt": tokenizer.apply_chat_template([{"role": "user", "content": row["prompt"]}],
                                                            tokenize=False, add_generation_prompt=True)}
            for row in rows]


def train_seed(seed: int, args: argparse.Namespace, curve: Path) -> None:
    os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rlkit.errors import RlkitError
    from rlkit.rlhf.prompts import read_prompt_data
    from rlkit.rlhf.rewards import load_reward_function

    torch.set_num_threads(2)
    tokenizer = AutoTokenizer.from_pretrained(args.policy)
    tokenizer.pad_token, tokenizer.padding_side = "<|endoftext|>", "left"  # TRL masks by ids != pad_id
    try:
        data = read_prompt_data(args.train)
        reward = load_reward_function(args.reward).fn
    except RlkitError as exc:
        raise SystemExit(f"trl_grpo.py: error: {exc}") from None
    if len(set(data.prompts)) < PROMPTS_PER_ITERATION:
        raise SystemExit(f"trl_grpo.py: error: {args.train} has fewer than {PROMPTS_PER_ITERATION} distinct prompts "
                         "(one iteration draws that many)")
    rows = [{"prompt": p, **{k: v[i] for k, v in data.columns.items()}} for i, p in enumerate(data.prompts)]
    run = Path(args.out) / f"trl-grpo__s{seed}"
    steps_per_iteration = EPOCHS * MINIBATCHES
    config = GRPOConfig(
        output_dir=str(run / "trainer"), num_generations=GROUP, per_device_train_batch_size=8,
        steps_per_generation=MINIBATCHES, num_iterations=EPOCHS, max_steps=10**7,
        max_completion_length=NEW_TOKENS, temperature=1.0, learning_rate=1e-5, lr_scheduler_type="constant",
        adam_epsilon=1e-5, max_grad_norm=1.0, beta=0.0, epsilon=0.2, loss_type="dapo", scale_rewards="group",
        use_cpu=True, bf16=False, fp16=False, gradient_checkpointing=False, report_to="none", save_strategy="no",
        logging_steps=10**7, seed=seed, dataloader_num_workers=0)

    class Segments(TrainerCallback):
        """Times each optimizer step; every ``--segment`` iterations saves and scores the model."""

        def __init__(self) -> None:
            self.seconds, self.started = 0.0, 0.0

        def on_step_begin(self, targs, state, control, **kw):
            self.started = time.perf_counter()

        def on_step_end(self, targs, state, control, model=None, **kw):
            self.seconds += time.perf_counter() - self.started
            iterations, rest = divmod(state.global_step, steps_per_iteration)
            if rest or iterations % args.segment:
                return
            snapshot = run / "snapshot"
            model.save_pretrained(snapshot)
            tokenizer.save_pretrained(snapshot)
            point = {"method": "trl-grpo", "seed": seed, "iterations": iterations, "train_seconds": self.seconds,
                     "accuracy": evaluate(str(snapshot), args),
                     "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20}
            shutil.rmtree(snapshot)
            with curve.open("a") as f:
                f.write(json.dumps(point) + "\n")
            control.should_training_stop = self.seconds >= args.minutes * 60

    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(args.policy, dtype=torch.float32),
                          reward_funcs=reward, args=config, train_dataset=Dataset.from_list(templated(rows, tokenizer, args.chat_template)),
                          processing_class=tokenizer, callbacks=[Segments()])
    trainer.train()
    shutil.rmtree(run / "trainer", ignore_errors=True)
    if not any(p["method"] == "trl-grpo" and p["seed"] == seed for p in points(curve)):
        raise SystemExit(f"trl_grpo.py: error: seed {seed} trained no segment (TRL stopped early); not marked done")
    (run / "done").write_text("finished\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    common_arguments(parser, "training wall time per seed")
    parser.add_argument("--seeds", nargs="+", action=ExtendList, type=int, default=[1, 2, 3],
                        help="seeds to train (repeatable: the lists add up)")
    args = parse(parser)
    curve = Path(args.out) / "curve.jsonl"
    curve.parent.mkdir(parents=True, exist_ok=True)
    for seed in args.seeds:
        run = Path(args.out) / f"trl-grpo__s{seed}"
        if (run / "done").is_file():
            continue
        if run.exists():  # an unfinished seed starts again: its points go
            kept = [p for p in points(curve) if not (p["method"] == "trl-grpo" and p["seed"] == seed)]
            rewrite(curve, kept)
            shutil.rmtree(run)
        train_seed(seed, args, curve)
    print(curve)


if __name__ == "__main__":
    main()
