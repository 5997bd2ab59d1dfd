"""Where one rlkit RLHF iteration spends its time: the critic-free arm of ``llm_vs_trl.py``
(SmolLM2-135M-Instruct fp32, 8 responses = 2 prompts x 4 answers, 32 new tokens, 4 epochs, 1
minibatch, chat prompts), each phase timed by wrapping the method that does it.

Phases: ``prefill`` and ``decode`` (sampling with the KV cache), ``rm`` (reward-model scoring of
the finished responses, inside the rollout), ``policy_pass`` and ``ref_pass`` (the behaviour and
reference log-probs), ``train_forward`` / ``backward`` / ``opt_step`` (the PPO epochs).

    python benchmarks/llm_phases.py --iterations 4

The table (each phase's median seconds per iteration after the warm-up) is its figure in
benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import functools
import platform
import statistics
import time

from common import README, WRITE_HELP, emit
from llm_common import setup
from llm_vs_trl import COMMON, GROUP, seq_cls

from rlkit.ablation.measurements import cpu_model


def timed(owner: object, name: str, key: str, times: dict[str, list[float]]) -> None:
    """Replace ``owner.name`` by a wrapper adding each call's seconds to ``times[key]``."""
    inner = getattr(owner, name)

    @functools.wraps(inner)
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        out = inner(*args, **kwargs)
        times.setdefault(key, []).append(time.perf_counter() - start)
        return out

    setattr(owner, name, wrapper)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=4, help="iterations to time (the first is a warm-up)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--form", choices=["rloo", "grpo"], default="rloo", help="the group variant's advantage form")
    parser.add_argument("--write", default=README, help=WRITE_HELP)
    args = parser.parse_args()
    import torch
    from transformers import AutoModelForCausalLM

    from rlkit.rlhf.config import RLHFConfig
    from rlkit.rlhf.reward_model import RewardModelScorer
    from rlkit.rlhf.trainer import RLHFTrainer

    model_dir, tokenizer, prompts = setup(args.threads, "chat")
    cfg = RLHFConfig(num_envs=COMMON["batch"], max_new_tokens=COMMON["new_tokens"], update_epochs=COMMON["epochs"],
                     num_minibatches=1, temperature=COMMON["temperature"], learning_rate=COMMON["lr"],
                     kl_coef=COMMON["kl_coef"], kl_estimator="k1", gamma=1.0, iterations=args.iterations,
                     torch_threads=args.threads, logdir="/tmp/rlkit-phases", save_model=False, group_size=GROUP,
                     group_form=args.form)
    trainer = RLHFTrainer(cfg, reward=RewardModelScorer(seq_cls(model_dir, 0).eval().requires_grad_(False), tokenizer),
                          policy=AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32),
                          tokenizer=tokenizer, prompts=prompts)
    times: dict[str, list[float]] = {}
    for owner, name, key in ((trainer.model, "start", "prefill"), (trainer.model, "advance", "decode"),
                             (trainer.scorer, "prefetch", "rm"), (trainer.model, "evaluate_tokens", "policy_pass"),
                             (trainer, "reference_log_probs", "ref_pass"),
                             (trainer.model, "forward_tokens", "train_forward"), (torch.Tensor, "backward", "backward"),
                             (trainer.learner.optimizer, "step", "opt_step")):
        timed(owner, name, key, times)
    rounds = []  # per iteration: phase -> seconds, "iteration" -> the whole
    for i in range(args.iterations):
        times.clear()
        start = time.perf_counter()
        stats = trainer.update()
        trainer.progress.updates_done += 1
        total = time.perf_counter() - start
        rounds.append({"iteration": total, **{k: sum(v) for k, v in times.items()}})
        phases = ", ".join(f"{k} {sum(v):.2f}" for k, v in times.items())
        print(f"iteration {i}{' (warm-up)' if i == 0 else ''}: {total:.2f} s; mean response "
              f"{stats['charts/response_length']:.1f} tokens; {phases}", flush=True)
    emit(phase_table(args, rounds), args.write, "llm_phases")


def phase_table(args: argparse.Namespace, rounds: list[dict[str, float]]) -> list[str]:
    """The figure: each phase's median seconds per iteration over the iterations after the warm-up."""
    after = rounds[1:] or rounds
    lines = [f"### Where one rlkit RLHF iteration spends its time — {time.strftime('%Y-%m-%d %H:%M')}",
             f"Command: `python benchmarks/llm_phases.py --iterations {args.iterations} --threads {args.threads} "
             f"--form {args.form}`  ",
             f"Machine: {platform.node()}, {cpu_model()}, {args.threads} torch threads; SmolLM2-135M-Instruct fp32, "
             f"{COMMON['batch']} responses = {COMMON['batch'] // GROUP} prompts x {GROUP} answers, "
             f"{COMMON['new_tokens']} new tokens, {COMMON['epochs']} epochs, 1 minibatch, chat prompts\n",
             f"| phase | median s per iteration ({len(after)} after the warm-up) |", "|---|---|"]
    return lines + [f"| {key} | {statistics.median(r.get(key, 0.0) for r in after):.2f} |" for key in rounds[0]]


if __name__ == "__main__":
    main()
