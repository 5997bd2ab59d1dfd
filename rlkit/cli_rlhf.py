"""``rlkit rlhf tiny-models`` and ``rlkit rlhf eval``: a trained RLHF policy (or the initial model) scored on held-out prompts by
reward functions and/or a reward model (:mod:`rlkit.rlhf.evaluate`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rlkit.errors import ConfigError


def rlhf_eval(argv: list[str], parser_class: type[argparse.ArgumentParser]) -> str:
    """The JSON line ``rlkit rlhf eval`` prints."""
    parser = parser_class(prog="rlkit rlhf eval", description="Answer held-out prompts with a trained RLHF run's "
                          "policy (or any causal LM folder, e.g. the initial model) and score the answers; prints one "
                          "JSON line: each reward source's mean over prompts with a 95% bootstrap interval, and "
                          "accuracy (the first reward function's).")
    parser.add_argument("target", help="an rlkit rlhf run folder (its policy.safetensors) or a causal LM folder")
    parser.add_argument("--prompts", required=True, help="prompt data: .txt, .jsonl with columns, or a datasets folder")
    parser.add_argument("--reward", nargs="+", action="extend", default=[],
                        help="reward functions, module:function or file.py:function (repeatable)")
    parser.add_argument("--reward-model", default=None, help="a reward model folder, scored as a source too")
    parser.add_argument("--reward-weights", nargs="+", action="extend", type=float, default=[],
                        help="one weight per source: the reward model first (when set), then each function "
                        "(repeatable: the lists add up)")
    parser.add_argument("--samples", type=int, default=1,
                        help="completions per prompt: 1 answers greedily, more are sampled (default: 1)")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (default: 1.0)")
    parser.add_argument("--max-new-tokens", type=int, default=None,
                        help="response length limit (default: the run's; 32 for a model folder)")
    parser.add_argument("--chat-template", action=argparse.BooleanOptionalAction, default=None,
                        help="format prompts with the tokenizer's chat template (default: as the run did; off for "
                        "a model folder)")
    parser.add_argument("--system-prompt", default=None,
                        help="a system message before each prompt, with --chat-template (default: the run's; none "
                        "for a model folder)")
    parser.add_argument("--batch-size", type=int, default=16, help="completions generated at once (default: 16)")
    parser.add_argument("--seed", type=int, default=1, help="seed of sampling and of the bootstrap; sampled answers repeat at the same seed and "
                        "--batch-size (default: 1)")
    parser.add_argument("--device", default="auto", help="torch device: auto, cpu or cuda[:i] (default: auto)")
    parser.add_argument("--out", default=None, help="also write the result with every completion to this new file")
    args = parser.parse_args(argv)
    out = Path(args.out) if args.out else None
    if out is not None and out.exists():
        raise ConfigError(f"--out {out} exists; choose a new file (nothing is overwritten)")
    if out is not None:
        from rlkit.io.files import check_writable

        if not out.parent.is_dir():
            raise ConfigError(f"--out {out}: no folder {out.parent}")
        check_writable(out.parent)
    from rlkit.rlhf.evaluate import EvalRequest, evaluate

    result: dict[str, Any] = evaluate(EvalRequest(
        args.target, args.prompts, tuple(args.reward), args.reward_model, tuple(args.reward_weights), args.samples,
        args.temperature, args.max_new_tokens, args.chat_template, args.system_prompt, args.batch_size, args.seed,
        args.device))
    if out is not None:
        from rlkit.io.files import write_new

        write_new(out, json.dumps(result, indent=1))
    result.pop("completions")
    return json.dumps(result)


def tiny_models(argv: list[str], parser_class: type[argparse.ArgumentParser]) -> str:
    """The JSON line ``rlkit rlhf tiny-models`` prints."""
    parser = parser_class(prog="rlkit rlhf tiny-models", description="Write a tiny random policy (a 2-layer Llama over "
                          "16 words, built locally) and a reward model of the same shape, to try the RLHF commands: "
                          "the random reward model makes rlkit rlhf run, not learn; rlkit rm train --backbone "
                          "DIR/policy trains one.")
    parser.add_argument("dir", help="a new or empty folder: DIR/policy and DIR/reward-model are written there")
    parser.add_argument("--no-reward-model", action="store_true", help="write the policy only")
    args = parser.parse_args(argv)
    from rlkit.rlhf.tiny import write_tiny_models

    return json.dumps(write_tiny_models(args.dir, with_reward_model=not args.no_reward_model).to_json())
