"""``rlkit rlhf eval``: a trained run's policy (or the initial model) answers held-out prompts and
its reward functions score them, with bootstrap intervals over prompts."""

import json

import numpy as np
import pytest
import torch

from rlkit.cli import main
from rlkit.rlhf.evaluate import EvalRequest, bootstrap_interval, evaluate
from tests import tiny_lm

REWARDS = '''
def correct(prompts, completions, answer, **kw):
    return [1.0 if a in c.split() else 0.0 for c, a in zip(completions, answer)]

def words(completions, **kw):
    return [len(c.split()) or None for c in completions]
'''
ROWS = [{"prompt": "the movie was", "answer": "good"}, {"prompt": "i liked it", "answer": "fun"},
        {"prompt": "a plot", "answer": "boring"}, {"prompt": "it was", "answer": "great"}]


@pytest.fixture
def task(tmp_path):
    return tiny_lm.reward_task(tmp_path, REWARDS, ROWS)


def trained_run(tmp_path, policy, capsys):
    assert main(["rlhf", "--policy", str(policy), "--prompts", str(tmp_path / "prompts.jsonl"), "--reward",
                 f"{tmp_path}/rewards.py:correct", "--iterations", "3", "--num-envs", "4", "--max-new-tokens", "4",
                 "--learning-rate", "3e-3", "--torch-threads", "1", "--logdir", str(tmp_path / "runs"),
                 "--run-name", "r"]) == 0
    capsys.readouterr()
    return tmp_path / "runs" / "r"


def greedy_by_hand(run, prompt, steps=4):
    """The run's saved LM weights in a fresh tiny model, greedy without a KV cache."""
    from safetensors.torch import load_file

    lm = tiny_lm.causal_lm()
    lm.load_state_dict({k.removeprefix("model.lm."): v for k, v in load_file(run / "policy.safetensors").items()
                        if k.startswith("model.lm.")})
    tok = tiny_lm.tokenizer()
    ids = tok(prompt, add_special_tokens=False).input_ids
    out = []
    with torch.no_grad():
        for _ in range(steps):
            token = int(lm(torch.tensor([ids + out])).logits[0, -1].argmax())
            out.append(token)
            if token == tok.eos_token_id:
                break
    return tok.decode(out, skip_special_tokens=True)


def test_greedy_answers_are_the_trained_policys_and_scores_are_its_functions(task, capsys):
    tmp_path, policy = task
    run = trained_run(tmp_path, policy, capsys)
    request = EvalRequest(str(run), str(tmp_path / "prompts.jsonl"), (f"{tmp_path}/rewards.py:correct",
                                                                      f"{tmp_path}/rewards.py:words"))
    result = evaluate(request)
    assert result["completions"] == [{"prompt": r["prompt"], "answers": [greedy_by_hand(run, r["prompt"])]}
                                     for r in ROWS]
    answers = [c["answers"][0] for c in result["completions"]]
    correct = [float(r["answer"] in c.split()) for r, c in zip(ROWS, answers)]
    counted = [len(c.split()) for c in answers]
    assert result["accuracy"] == result["rewards"]["correct"] and result["accuracy"]["mean"] == np.mean(correct)
    assert result["rewards"]["words"]["mean"] == np.mean(counted)  # None (an empty answer) counts 0
    assert result["rewards"]["words"]["applied"] == np.mean([n > 0 for n in counted])
    assert result["rewards"]["total"]["mean"] == pytest.approx(np.mean(correct) + np.mean(counted))
    for source in result["rewards"].values():
        assert source["low"] <= source["mean"] <= source["high"]


def test_sampled_answers_k_per_prompt_and_the_initial_model_is_evaluable(task, capsys):
    tmp_path, policy = task
    out = tmp_path / "initial.json"
    assert main(["rlhf", "eval", str(policy), "--prompts", str(tmp_path / "prompts.jsonl"), "--reward",
                 f"{tmp_path}/rewards.py:correct", "--samples", "3", "--max-new-tokens", "4", "--batch-size", "5",
                 "--out", str(out)]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    written = json.loads(out.read_text())
    assert printed["samples"] == 3 and not printed["greedy"] and "completions" not in printed
    assert [c["prompt"] for c in written["completions"]] == [r["prompt"] for r in ROWS]
    assert all(len(c["answers"]) == 3 for c in written["completions"]) and written["accuracy"] == printed["accuracy"]
    assert main(["rlhf", "eval", str(policy), "--prompts", str(tmp_path / "prompts.jsonl"), "--reward",
                 f"{tmp_path}/rewards.py:correct", "--samples", "3", "--max-new-tokens", "4", "--batch-size", "5",
                 "--out", str(tmp_path / "again.json")]) == 0
    assert json.loads((tmp_path / "again.json").read_text()) == written  # seeded: the same samples


def test_bootstrap_interval_of_a_mean():
    assert bootstrap_interval(np.full(5, 0.5), seed=1) == (0.5, 0.5)
    low, high = bootstrap_interval(np.array([0.0, 1.0] * 50), seed=1)
    assert 0.38 < low < 0.5 < high < 0.62  # about 0.5 -/+ 1.96 * 0.05


def test_what_rlhf_eval_refuses_is_one_line_and_nothing_is_overwritten(task, capsys):
    tmp_path, policy = task
    taken = tmp_path / "taken.json"
    taken.write_text("mine")
    prompts, fn = str(tmp_path / "prompts.jsonl"), f"{tmp_path}/rewards.py:correct"
    (tmp_path / "runs" / "unsaved").mkdir(parents=True)
    (tmp_path / "runs" / "unsaved" / "config.json").write_text(json.dumps({"policy": str(policy)}))
    for argv, words in [([str(policy), "--prompts", prompts], "no reward"),
                        ([str(policy), "--prompts", prompts, "--reward", fn, "--out", str(taken)], "exists"),
                        ([str(tmp_path / "nothing"), "--prompts", prompts, "--reward", fn], "neither"),
                        ([str(tmp_path / "runs" / "unsaved"), "--prompts", prompts, "--reward", fn], "without a saved"),
                        ([str(policy), "--prompts", prompts, "--reward", fn, "--samples", "0"], "--samples"),
                        ([str(policy), "--reward", fn], "--prompts")]:
        assert main(["rlhf", "eval", *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], (argv, err)
    assert taken.read_text() == "mine"


def test_a_policy_with_tied_embeddings_is_saved_and_evaluated(task, capsys):
    """SmolLM2 ties its output layer to its input embeddings (one tensor, two names): the trained
    policy is written all the same, and ``rlkit rlhf eval`` answers with the trained weights."""
    from safetensors.torch import load_file
    from transformers import LlamaForCausalLM

    from rlkit.rlhf.models import quiet_transformers

    tmp_path, policy = task
    with quiet_transformers():
        LlamaForCausalLM(tiny_lm.config(tie_word_embeddings=True)).save_pretrained(policy)
    run = trained_run(tmp_path, policy, capsys)
    saved = load_file(run / "policy.safetensors")
    tied = saved["model.lm.lm_head.weight"]
    assert torch.equal(tied, saved["model.lm.model.embed_tokens.weight"])
    with quiet_transformers():
        assert not torch.equal(tied, LlamaForCausalLM.from_pretrained(policy).lm_head.weight)  # trained
    result = evaluate(EvalRequest(str(run), str(tmp_path / "prompts.jsonl"), (f"{tmp_path}/rewards.py:correct",)))
    assert result["completions"] == [{"prompt": r["prompt"], "answers": [greedy_by_hand(run, r["prompt"])]}
                                     for r in ROWS]
