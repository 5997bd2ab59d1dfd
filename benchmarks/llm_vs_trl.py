"""RLHF iteration benchmark: one RLHF iteration, rlkit vs TRL (trl==1.12.0, the last release with
PPOTrainer; its GRPOTrainer too), side by side in one run, each in a fresh process, one at a time.
Reports the median seconds per iteration and each process's peak resident memory.

Critic-free arms: rlkit's group variant (RLOO and GRPO advantages, no value model) and TRL's
GRPOTrainer at the same prompts and tokens: 8 responses per iteration = 2 prompts x 4 answers,
4 epochs over the batch (TRL: ``num_iterations=4``, ``steps_per_generation=1``, so one
iteration is one generation and 4 optimizer steps), KL coefficient 0.05 (TRL GRPO puts its
k3 KL in the loss; rlkit keeps its per-token k1 penalty in the reward), clip 0.2, lr 3e-6.

Identical settings: SmolLM2-135M-Instruct fp32 on CPU as policy and frozen reference; a reward
model and a value model that are SmolLM2 backbones with a one-output head (rlkit: a separate
critic trunk, ``separate_critic=True``, to match TRL's separate value model); 8 prompts per
iteration, 32 new tokens (stop at EOS), temperature 0.7, 4 PPO epochs, 1 minibatch, k1 KL with
beta 0.05, lr 3e-6, gamma 1, lambda 0.95, clip 0.2, value clip 0.2, vf_coef 0.1. One iteration
= rollout + scoring + reference + update. Median seconds per iteration after a warm-up.
TRL's masks come from ``ids != pad_id``, so it gets a distinct pad token (``<|endoftext|>``).
TRL's configs default to bf16 autocast (also on CPU); both TRL arms set ``bf16=False`` so every arm
computes in fp32. TRL's GRPOConfig defaults to gradient checkpointing (rlkit's default keeps
activations): ``trl-grpo`` keeps TRL's default, ``trl-grpo-nogc`` turns it off, and
``rlkit-rloo-gc`` turns rlkit's on (``--gradient-checkpointing``), so each pairing computes alike.

    pip install trl==1.12.0   # benchmark only; not an rlkit dependency
    python benchmarks/llm_vs_trl.py --iterations 4

The PPO arms and the critic-free arms are two figures in benchmarks/README.md: a run replaces the
figure of each group it ran.
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

from common import README, WRITE_HELP, emit
from llm_common import setup

from rlkit.ablation.measurements import ExtendList, cpu_model

COMMON = dict(batch=8, new_tokens=32, epochs=4, temperature=0.7, lr=3e-6, kl_coef=0.05)
GROUP = 4
"""Answers per prompt in the critic-free arms (8 responses = 2 prompts x 4)."""


def seq_cls(model_dir: str, seed: int):
    import torch
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(seed)
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=1)
    return model


def peak_rss_gb() -> float:
    """This process's peak resident memory (Linux reports KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def worker_rlkit(iterations: int, threads: int, shared: bool, style: str, group_form: str | None = None,
                 checkpointing: bool = False) -> list[float]:
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
                     logdir="/tmp/rlkit-trl-bench", save_model=False, gradient_checkpointing=checkpointing,
                     **(dict(group_size=GROUP, group_form=group_form) if group_form else {}))
    trainer = RLHFTrainer(cfg, reward=RewardModelScorer(rm, tokenizer),
                          policy=AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32),
                          tokenizer=tokenizer, prompts=prompts)
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        trainer.update()
        trainer.progress.updates_done += 1
        times.append(time.perf_counter() - start)
    return times


def iteration_clock(base: type, steps_per_iteration: int) -> tuple[object, list[float]]:
    """A TRL callback timing iterations of ``steps_per_iteration`` optimizer steps, and the list it fills
    (the clock starts when the callback is made, right before the trainer is built)."""
    times: list[float] = []
    steps: list[float] = []
    last = [time.perf_counter()]

    class Clock(base):  # type: ignore[misc, valid-type]
        def on_step_end(self, args, state, control, **kwargs):
            now = time.perf_counter()
            steps.append(now - last[0])
            last[0] = now
            if len(steps) % steps_per_iteration == 0:
                times.append(sum(steps[-steps_per_iteration:]))

    return Clock(), times


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
                     logging_steps=1, seed=1, dataloader_num_workers=0, bf16=False)
    clock, times = iteration_clock(TrainerCallback, steps_per_iteration=1)
    trainer = PPOTrainer(args=args, processing_class=tokenizer,
                         model=AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32),
                         ref_model=AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32),
                         reward_model=seq_cls(model_dir, 0), value_model=seq_cls(model_dir, 1),
                         train_dataset=dataset, callbacks=[clock])
    trainer.train()
    return times


def worker_trl_grpo(iterations: int, threads: int, style: str, checkpointing: bool = True) -> list[float]:
    os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    model_dir, tokenizer, prompts = setup(threads, style)
    tokenizer.pad_token = "<|endoftext|>"
    tokenizer.padding_side = "left"
    b = COMMON["batch"]
    dataset = Dataset.from_dict({"prompt": prompts})
    args = GRPOConfig(output_dir="/tmp/trl-grpo-bench", per_device_train_batch_size=b, num_generations=GROUP,
                      steps_per_generation=1, num_iterations=COMMON["epochs"], max_steps=COMMON["epochs"] * iterations,
                      max_completion_length=COMMON["new_tokens"], temperature=COMMON["temperature"],
                      learning_rate=COMMON["lr"], beta=COMMON["kl_coef"], epsilon=0.2, use_cpu=True, report_to="none",
                      save_strategy="no", logging_steps=1, seed=1, dataloader_num_workers=0, bf16=False,
                      fp16=False, gradient_checkpointing=checkpointing)
    # One iteration: one generation and its num_iterations optimizer steps.
    clock, times = iteration_clock(TrainerCallback, steps_per_iteration=COMMON["epochs"])
    trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32),
                          reward_funcs=seq_cls(model_dir, 0), args=args, train_dataset=dataset,
                          processing_class=tokenizer, reward_processing_classes=tokenizer, callbacks=[clock])
    trainer.train()
    return times


WORKERS = {
    "trl": ("TRL 1.12.0 PPOTrainer (separate value model)", "trl"),
    "rlkit": ("rlkit PPO, separate critic (same models as TRL PPO)", "trl"),
    "rlkit-shared": ("rlkit PPO, shared trunk (default)", "trl"),
    "trl-grpo": ("TRL 1.12.0 GRPOTrainer (no value model; its default gradient checkpointing)", "trl-grpo"),
    "rlkit-rloo": ("rlkit RLOO (group variant, no value model)", "trl-grpo"),
    "rlkit-grpo": ("rlkit GRPO (group variant, no value model)", "trl-grpo"),
    "rlkit-rloo-gc": ("rlkit RLOO with --gradient-checkpointing", "trl-grpo"),
    "trl-grpo-nogc": ("TRL 1.12.0 GRPOTrainer, gradient_checkpointing=False", "trl-grpo-nogc"),
}
"""Arm -> (table label, the TRL arm it is compared with)."""

GROUPS = {name: "ppo" if base == "trl" else "critic-free" for name, (_, base) in WORKERS.items()}
"""Arm -> its figure in benchmarks/README.md: PPO with a value model, or the critic-free arms."""


def run_worker(name: str, iterations: int, threads: int, style: str) -> list[float]:
    n = iterations + 1
    fn = {"trl": lambda: worker_trl(n, threads, style),
          "rlkit": lambda: worker_rlkit(n, threads, False, style),
          "rlkit-shared": lambda: worker_rlkit(n, threads, True, style),
          "trl-grpo": lambda: worker_trl_grpo(n, threads, style),
          "rlkit-rloo": lambda: worker_rlkit(n, threads, True, style, "rloo"),
          "rlkit-grpo": lambda: worker_rlkit(n, threads, True, style, "grpo"),
          "rlkit-rloo-gc": lambda: worker_rlkit(n, threads, True, style, "rloo", checkpointing=True),
          "trl-grpo-nogc": lambda: worker_trl_grpo(n, threads, style, checkpointing=False)}[name]
    return fn()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=4, help="timed iterations after one warm-up")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompts", choices=["chat", "plain"], default="chat",
                        help="chat-formatted review openings (46-62 tokens) or the bare openings (4-12 tokens)")
    parser.add_argument("--write", default=README, help=WRITE_HELP)
    parser.add_argument("--arms", nargs="+", action=ExtendList, choices=list(WORKERS), default=list(WORKERS),
                        help="which arms to run (each in a fresh process, one after another)")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        times = run_worker(args.worker, args.iterations, args.threads, args.prompts)
        print(json.dumps({"times": times, "peak_gb": peak_rss_gb()}))
        return
    medians, peaks = {}, {}
    for name in args.arms:
        out = subprocess.run([sys.executable, __file__, "--worker", name, "--iterations", str(args.iterations),
                              "--threads", str(args.threads), "--prompts", args.prompts], capture_output=True, text=True)
        if out.returncode:
            raise SystemExit(f"{name} failed:\n{out.stderr[-4000:]}")
        record = json.loads(out.stdout.strip().splitlines()[-1])
        times = record["times"][1:]  # drop the warm-up iteration
        medians[name], peaks[name] = statistics.median(times), record["peak_gb"]
        print(f"{name}: median {medians[name]:.2f} s per iteration over {len(times)} ({[round(t, 2) for t in times]}), "
              f"peak RSS {peaks[name]:.2f} GB", flush=True)
    for group in dict.fromkeys(GROUPS[name] for name in args.arms):  # each group the arms include
        arms = [name for name in args.arms if GROUPS[name] == group]
        lines = [f"### One RLHF iteration vs TRL — {time.strftime('%Y-%m-%d %H:%M')}",
                 f"Command: `python benchmarks/llm_vs_trl.py --iterations {args.iterations} --threads {args.threads} "
                 f"--prompts {args.prompts} --arms {' '.join(args.arms)}`  ",
                 f"Machine: {platform.node()}, {platform.machine()}, {cpu_model()}, {args.threads} torch "
                 f"threads, nothing else running; SmolLM2-135M-Instruct fp32, 8 responses x 32 new tokens, 4 epochs, 1 "
                 f"minibatch, {args.prompts} prompts; critic-free arms: 2 prompts x {GROUP} answers\n",
                 "| arm | median s / iteration | speed-up vs its TRL arm | peak RSS (GB) |", "|---|---|---|---|"]
        for name in arms:
            label, base = WORKERS[name]
            ratio = f"{medians[base] / medians[name]:.2f}×" if base in medians else "—"
            lines.append(f"| {label} | {medians[name]:.2f} | {ratio} | {peaks[name]:.2f} |")
        emit(lines, args.write, f"llm_vs_trl:{group}")


if __name__ == "__main__":
    main()
