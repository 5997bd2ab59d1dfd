"""RLHF iteration benchmark: one RLHF PPO iteration, rlkit vs TRL's PPOTrainer (trl==1.12.0, the
last release that has it), side by side in one run, each in a fresh process, one at a time.

Identical settings: SmolLM2-135M-Instruct fp32 on CPU as policy and frozen reference; a reward
model and a value model that are SmolLM2 backbones with a one-output head (rlkit: a separate
critic trunk, ``separate_critic=True``, to match TRL's separate value model); 8 prompts per
iteration, 32 new tokens (stop at EOS), temperature 0.7, 4 PPO epochs, 1 minibatch, k1 KL with
beta 0.05, lr 3e-6, gamma 1, lambda 0.95, clip 0.2, value clip 0.2, vf_coef 0.1. One iteration
= rollout + scoring + reference + update. Median seconds per iteration after a warm-up.
TRL's masks come from ``ids != pad_id``, so it gets a distinct pad token (``<|endoftext|>``).

    pip install trl==1.12.0   # benchmark only; not an rlkit dependency
    python benchmarks/llm_vs_trl.py --iterations 4
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

from llm_common import setup
from report import emit

COMMON = dict(batch=8, new_tokens=32, epochs=4, temperature=0.7, lr=3e-6, kl_coef=0.05)


def seq_cls(model_dir: str, seed: int):
    import torch
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=1)
    return model


def worker_rlkit(iterations: int, threads: int, shared: bool, style: str) -> list[float]:
    import torch
    from transformers import AutoModelForCausalLM

    from rlkit.rlhf.reward_model import RewardModelScorer
    from rlkit.rlhf.trainer import RLHFTrainer
    from rlkit.rlhf.config import RLHFConfig

    model_dir, tokenizer, prompts = setup(threads, style)
    rm = seq_cls(model_dir, 0).eval().requires_grad_(False)
    cfg = RLHFConfig(num_envs=COMMON["batch"], max_new_tokens=COMMON["new_tokens"], update_epochs=COMMON["epochs"],
                     num_minibatches=1, temperature=COMMON["temperature"], learning_rate=COMMON["lr"],
                     kl_coef=COMMON["kl_coef"], kl_estimator="k1", vf_coef=0.1, clip_coef=0.2, gamma=1.0,
                     gae_lambda=0.95, separate_critic=not shared, iterations=iterations, torch_threads=threads,
                     logdir="/tmp/rlkit-trl-bench", save_model=False)
    trainer = RLHFTrainer(cfg, reward=RewardModelScorer(rm, tokenizer),
                          policy=AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32),
                          tokenizer=tokenizer, prompts=prompts)
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        trainer.update()
        trainer.iteration += 1
        times.append(time.perf_counter() - start)
    return times


def worker_trl(iterations: int, threads: int, style: str) -> list[float]:
    os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, TrainerCallback
    from trl.experimental.ppo import PPOConfig, PPOTrainer

    model_dir, tokenizer, prompts = setup(threads, style)
    tokenizer.pad_token = "<|endoftext|>"  # TRL masks by ids != pad_id; SmolLM2's default pad is its EOS
    ids = [tokenizer(p, add_special_tokens=False).input_ids for p in prompts]
    dataset = Dataset.from_dict({"input_ids": ids})
    b = COMMON["batch"]
    args = PPOConfig(output_dir="/tmp/trl-bench", per_device_train_batch_size=b, num_mini_batches=1,
                     total_episodes=b * iterations, response_length=COMMON["new_tokens"],
                     num_ppo_epochs=COMMON["epochs"], local_rollout_forward_batch_size=b, stop_token="eos",
                     temperature=COMMON["temperature"], learning_rate=COMMON["lr"], kl_coef=COMMON["kl_coef"],
                     kl_estimator="k1", vf_coef=0.1, cliprange=0.2, cliprange_value=0.2, gamma=1.0, lam=0.95,
                     use_cpu=True, report_to="none", save_strategy="no", num_sample_generations=0,
                     logging_steps=1, seed=1, dataloader_num_workers=0)
    times: list[float] = []

    class Clock(TrainerCallback):
        last = None

        def on_step_end(self, args, state, control, **kwargs):
            now = time.perf_counter()
            times.append(now - (Clock.last or start))
            Clock.last = now

    trainer = PPOTrainer(args=args, processing_class=tokenizer,
                         model=AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32),
                         ref_model=AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32),
                         reward_model=seq_cls(model_dir, 0), value_model=seq_cls(model_dir, 1),
                         train_dataset=dataset, callbacks=[Clock()])
    start = time.perf_counter()
    trainer.train()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=4, help="timed iterations after one warm-up")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompts", choices=["chat", "plain"], default="chat",
                        help="chat-formatted review openings (46-62 tokens) or the bare openings (4-12 tokens)")
    parser.add_argument("--write", default="benchmarks/RESULTS.md")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    n = args.iterations + 1
    if args.worker:
        fn = {"trl": lambda: worker_trl(n, args.threads, args.prompts),
              "rlkit": lambda: worker_rlkit(n, args.threads, False, args.prompts),
              "rlkit-shared": lambda: worker_rlkit(n, args.threads, True, args.prompts)}[args.worker]
        print(json.dumps(fn()))
        return
    medians = {}
    for name in ("trl", "rlkit", "rlkit-shared"):
        out = subprocess.run([sys.executable, __file__, "--worker", name, "--iterations", str(args.iterations),
                              "--threads", str(args.threads), "--prompts", args.prompts], capture_output=True, text=True)
        if out.returncode:
            raise SystemExit(f"{name} failed:\n{out.stderr[-4000:]}")
        times = json.loads(out.stdout.strip().splitlines()[-1])[1:]  # drop the warm-up iteration
        medians[name] = statistics.median(times)
        print(f"{name}: median {medians[name]:.2f} s per iteration over {len(times)} ({[round(t, 2) for t in times]})",
              flush=True)
    lines = [f"\n### One RLHF PPO iteration vs TRL PPOTrainer — {time.strftime('%Y-%m-%d %H:%M')}",
             f"Command: `python benchmarks/llm_vs_trl.py --iterations {args.iterations} --threads {args.threads} "
             f"--prompts {args.prompts}`  ",
             f"Machine: {platform.node()}, {platform.machine()}, {args.threads} torch threads, nothing else running; "
             f"SmolLM2-135M-Instruct fp32, batch 8, 32 new tokens, 4 epochs, 1 minibatch, {args.prompts} prompts\n",
             "| framework | median s / iteration | speed-up vs TRL | target |", "|---|---|---|---|",
             f"| TRL 1.12.0 PPOTrainer | {medians['trl']:.2f} | 1.00× | |",
             f"| rlkit, separate critic (same models as TRL) | {medians['rlkit']:.2f} | "
             f"{medians['trl'] / medians['rlkit']:.2f}× | ≥ 1.5× |",
             f"| rlkit, shared trunk (default) | {medians['rlkit-shared']:.2f} | "
             f"{medians['trl'] / medians['rlkit-shared']:.2f}× | |"]
    emit(lines, args.write)


if __name__ == "__main__":
    main()
