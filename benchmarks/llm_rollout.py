"""LLM rollout benchmark: tokens/s of rlkit's env + policy rollout vs ``model.generate``.

SmolLM2-135M-Instruct (fp32, CPU), the same 8 prompts, the same number of new tokens, sampling at
temperature 1 with no top-k/top-p. rlkit's rollout steps 8 token envs (one token per env step)
with a batched KV cache; generate runs the same batch. Useful tokens (up to and including EOS)
per second, median over repeats, the two alternating; run it on an otherwise idle machine.

    python benchmarks/llm_rollout.py --batch 8 --new-tokens 32 --repeats 5
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

from common import README, WRITE_HELP, emit
from llm_common import setup


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=8, help="prompts sampled at once (token envs, generate's rows)")
    parser.add_argument("--new-tokens", type=int, default=32, help="new tokens per response at most")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds of each, alternating (median reported)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads")
    parser.add_argument("--write", default=README, help=WRITE_HELP)
    args = parser.parse_args()
    import torch
    from transformers import AutoModelForCausalLM

    from rlkit.rlhf.trainer import RLHFTrainer
    from rlkit.rlhf.config import RLHFConfig

    model_dir, tokenizer, prompts = setup(args.threads)
    prompts = prompts[: args.batch]
    cfg = RLHFConfig(num_envs=args.batch, max_new_tokens=args.new_tokens, num_minibatches=1, iterations=1,
                     temperature=1.0, logdir="/tmp/rlkit-llm-bench", save_model=False, torch_threads=args.threads)
    policy = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    trainer = RLHFTrainer(cfg, reward=lambda p, r: [0.0] * len(r), policy=policy, tokenizer=tokenizer,
                          prompts=prompts)
    # the same prompt per sub-env as generate's row: sub-env i always draws prompt i
    for i, env in enumerate(trainer.parts.envs):
        env.prompts = [env.prompts[i]]
    gen_model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    tokenizer.padding_side = "left"
    enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    eos = tokenizer.eos_token_id

    def rlkit_rollout() -> float:
        start = time.perf_counter()
        grid, _, _ = trainer.collect()
        return float(grid.valid.sum()) / (time.perf_counter() - start)

    @torch.no_grad()
    def generate() -> float:
        start = time.perf_counter()
        out = gen_model.generate(**enc, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                                 max_new_tokens=args.new_tokens, pad_token_id=eos)
        seconds = time.perf_counter() - start
        new = out[:, enc.input_ids.shape[1]:]
        useful = 0
        for row in new.tolist():  # up to and including the first EOS
            useful += row.index(eos) + 1 if eos in row else len(row)
        return useful / seconds

    rlkit_rollout(), generate()  # warm-up
    ours, theirs = [], []
    for _ in range(args.repeats):
        ours.append(rlkit_rollout())
        theirs.append(generate())
    a, b = statistics.median(ours), statistics.median(theirs)
    lines = [f"### LLM rollout throughput vs model.generate — {time.strftime('%Y-%m-%d %H:%M')}",
             f"Command: `python benchmarks/llm_rollout.py --batch {args.batch} --new-tokens {args.new_tokens} "
             f"--repeats {args.repeats}`  ",
             f"Machine: {platform.node()}, {platform.machine()}, {args.threads} torch threads, SmolLM2-135M-Instruct fp32, "
             f"sampling at temperature 1; useful tokens (through EOS) per second, median of {args.repeats}\n",
             "| batch × new tokens | rlkit env + policy rollout (tok/s) | model.generate (tok/s) | ratio | target |",
             "|---|---|---|---|---|",
             f"| {args.batch} × {args.new_tokens} | {a:.1f} | {b:.1f} | {a / b:.2f}× | ≥ 0.8× |"]
    emit(lines, args.write, "llm_rollout")


if __name__ == "__main__":
    main()
