"""Reward functions as plain callables (``--reward module:function``), prompt data with columns
(.jsonl, a datasets folder), chat templates, and a failing function stopping the run after a
checkpoint it resumes from exactly."""

import json
import re
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from rlkit.cli import main
from rlkit.errors import ConfigError
from rlkit.rlhf.config import RLHFConfig
from rlkit.rlhf.prompts import PromptData, prompt_texts, read_prompt_data
from rlkit.rlhf.rewards import RewardFunction, RewardFunctionError, RewardSet, load_reward_function
from rlkit.rlhf.trainer import RLHFTrainer
from tests import tiny_lm

PROMPTS = ["the movie was", "i liked it", "a plot"]

REWARDS = '''
import os
from pathlib import Path

def good_count(prompts, completions, **kw):
    return [c.split().count("good") for c in completions]

def brevity(completions, **kw):
    return [-len(c.split()) for c in completions]

def matches(prompts, completions, answer, **kw):
    Path(os.environ["RLKIT_TEST_SEEN"]).open("a").write(
        "".join(f"{p}|{a}\\n" for p, a in zip(prompts, answer)))
    return [1.0 if a in c.split() else None for c, a in zip(completions, answer)]

def fails_in_iteration_2(completions, **kw):
    counter = Path(os.environ["RLKIT_TEST_COUNTER"])
    seen = int(counter.read_text() or 0) if counter.exists() else 0
    counter.write_text(str(seen + len(completions)))
    if seen >= 4 and Path(os.environ["RLKIT_TEST_FAIL"]).exists():
        raise ValueError("the grader is down")
    return [c.split().count("good") / 4 for c in completions]
'''


@pytest.fixture
def rewards_file(tmp_path):
    path = tmp_path / "my_rewards.py"
    path.write_text(REWARDS)
    return path


def cfg(logdir, **kw):
    base = dict(num_envs=4, max_new_tokens=4, iterations=3, learning_rate=3e-3, logdir=logdir, num_minibatches=2,
                save_model=False, torch_threads=1)
    return RLHFConfig(**{**base, **kw})


def test_a_weighted_reward_function_trains_exactly_as_the_same_reward_given_as_a_callable(logdir, rewards_file):
    by_callable = RLHFTrainer(cfg(logdir, run_name="a"), reward=tiny_lm.good_rate, policy=tiny_lm.causal_lm(),
                              tokenizer=tiny_lm.tokenizer(), prompts=PROMPTS)
    by_callable.train()
    by_function = RLHFTrainer(cfg(logdir, run_name="b", reward=(f"{rewards_file}:good_count",), reward_weights=(0.25,)),
                              policy=tiny_lm.causal_lm(), tokenizer=tiny_lm.tokenizer(), prompts=PROMPTS)
    out = by_function.train()
    assert torch.equal(by_function.learner.flat.data, by_callable.learner.flat.data)
    assert all(h["rewards/good_count/applied"] == 1.0 for h in out.history)
    for h in out.history:  # the logged per-function mean is unweighted; the score is the weighted sum
        assert h["rewards/good_count/mean"] * 0.25 == pytest.approx(h["charts/score"])


def test_columns_reach_the_function_aligned_with_their_prompts_and_none_does_not_count(logdir, rewards_file, tmp_path,
                                                                                       monkeypatch):
    rows = [{"prompt": "the movie was", "answer": "good"}, {"prompt": "i liked it", "answer": "fun"},
            {"prompt": "a plot", "answer": "boring"}]
    data = tmp_path / "prompts.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    seen = tmp_path / "seen.txt"
    monkeypatch.setenv("RLKIT_TEST_SEEN", str(seen))
    trainer = RLHFTrainer(cfg(logdir, prompts=str(data), reward=(f"{rewards_file}:matches",), group_size=2),
                          policy=tiny_lm.causal_lm(), tokenizer=tiny_lm.tokenizer())
    out = trainer.train()
    pairs = {tuple(line.split("|")) for line in seen.read_text().splitlines()}
    assert pairs and pairs <= {(r["prompt"], r["answer"]) for r in rows}  # every answer with its own prompt
    for h in out.history:
        applied = h["rewards/matches/applied"]
        assert 0.0 <= applied <= 1.0
        assert h["charts/score"] == pytest.approx(applied)  # a match scores 1, None counts 0
        assert math.isnan(h["rewards/matches/mean"]) or h["rewards/matches/mean"] == 1.0


def test_reward_set_sums_weighted_sources_with_none_as_zero_and_names_a_bad_function():
    class Model:
        def score_ids(self, sequences):
            return np.array([float(len(s)) for s in sequences])

    def half(prompts, completions, **kw):
        return [0.5, None, 2]

    rewards = RewardSet([RewardFunction("mod:half", half, weight=2.0)], Model(), model_weight=0.5)
    scored = rewards.score(["p"] * 3, ["a", "b", "c"], {}, [[1], [1, 2], [1, 2, 3]])
    np.testing.assert_array_equal(scored.total, [0.5 * 1 + 2 * 0.5, 0.5 * 2 + 0, 0.5 * 3 + 2 * 2])
    stats = rewards.take_stats()
    assert stats["rewards/half/mean"] == pytest.approx(1.25) and stats["rewards/half/applied"] == pytest.approx(2 / 3)
    assert stats["rewards/reward_model/mean"] == 2.0 and rewards.take_stats() == {}
    for returned, words in [([1.0], "returned 1 rewards for 3 completions"), (3.0, "returned float, not a list"),
                            ([1.0, "x", 2.0], "returned 'x' (str) for completion 1"),
                            ([1.0, math.nan, 2.0], "returned nan"), ([True, 1.0, 2.0], "returned True (bool)")]:
        bad = RewardSet([RewardFunction("mod:bad", lambda returned=returned, **kw: returned)])
        with pytest.raises(RewardFunctionError, match=re.escape(words)) as info:
            bad.score(["p"] * 3, ["a", "b", "c"], {}, [[1]] * 3)
        assert "reward function mod:bad" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ConfigError, match="two reward sources are named 'half'"):
        RewardSet([RewardFunction("a:half", half), RewardFunction("b:half", half)])


def test_a_generator_of_rewards_is_scored_and_its_failure_named():
    """A function that yields does its work while its values are read: that is the function's call too."""
    def lengths(completions, **kw):
        yield from (float(len(c)) for c in completions)

    def grader_down(completions, **kw):
        yield 1.0
        raise KeyError("answer")

    np.testing.assert_array_equal(RewardSet([RewardFunction("mod:lengths", lengths)]).score(
        ["p"] * 2, ["a", "bb"], {}, [[1]] * 2).total, [1.0, 2.0])
    with pytest.raises(RewardFunctionError, match=re.escape("reward function mod:down raised KeyError: 'answer'")):
        RewardSet([RewardFunction("mod:down", grader_down)]).score(["p"] * 2, ["a", "b"], {}, [[1]] * 2)


def test_reward_function_specs_load_by_module_or_file_and_bad_ones_are_one_line(rewards_file, tmp_path):
    assert load_reward_function("tests.tiny_lm:good_rate").fn is tiny_lm.good_rate
    assert load_reward_function(f"{rewards_file}:good_count", 2.0).fn(prompts=[], completions=["good good"]) == [2]
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('no grader here')\n")
    for spec, words in [("nocolon", "expected module:function"), (f"{rewards_file}:", "expected module:function"),
                        (f"{tmp_path}/missing.py:f", "not found"), (f"{rewards_file}:nothing", "has no function"),
                        ("no_such_module_xyz:f", "importing no_such_module_xyz raised ModuleNotFoundError"),
                        (f"{broken}:f", "raised RuntimeError: no grader here")]:
        with pytest.raises(ConfigError, match=words) as info:
            load_reward_function(spec)
        assert "\n" not in str(info.value)


def test_prompt_data_from_jsonl_and_a_datasets_folder_and_what_is_refused(tmp_path):
    rows = [{"prompt": "the movie was", "answer": "good", "level": 1}, {"prompt": "a plot", "answer": "bad", "level": 2}]
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = read_prompt_data(str(jsonl))
    assert data.prompts == ["the movie was", "a plot"] and data.rows([1, 0]) == {"answer": ["bad", "good"],
                                                                                 "level": [2, 1]}
    datasets = pytest.importorskip("datasets")
    folder = tmp_path / "ds"
    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}).save_to_disk(str(folder))
    assert read_prompt_data(str(folder)) == data
    for bad, words in [([{"prompt": "a", "answer": 1}, {"prompt": "b"}], "differ from the first row's"),
                       ([{"prompt": "a", "completions": 1}], "would shadow"),
                       ([{"text": "a"}], "expected a string \"prompt\" field")]:
        jsonl.write_text("".join(json.dumps(r) + "\n" for r in bad))
        with pytest.raises(ConfigError, match=words):
            read_prompt_data(str(jsonl))
    with pytest.raises(ConfigError, match="nor a datasets folder"):
        read_prompt_data(str(tmp_path))


def test_chat_template_formats_prompts_and_conversations_need_it():
    tok = tiny_lm.tokenizer()
    data = PromptData(["the movie was", [{"role": "user", "content": "a plot"}]], {})
    with pytest.raises(ConfigError, match="set chat_template"):
        prompt_texts(data, tok, False, None)
    with pytest.raises(ConfigError, match="has no chat template"):
        prompt_texts(data, tok, True, None)
    with pytest.raises(ConfigError, match="system_prompt needs chat_template"):
        prompt_texts(PromptData(["a"], {}), tok, False, "be brief")
    tok.chat_template = "{% for m in messages %}{{ m['role'] }} {{ m['content'] }} {% endfor %}" \
                        "{% if add_generation_prompt %}it{% endif %}"
    assert prompt_texts(data, tok, True, "be good") == ["system be good user the movie was it",
                                                        "system be good user a plot it"]


def test_a_failing_function_stops_the_run_after_a_checkpoint_it_resumes_from_exactly(tmp_path, rewards_file,
                                                                                     monkeypatch, capsys):
    policy, _, prompts = tiny_lm.save_models(tmp_path, PROMPTS)
    fail = tmp_path / "grader_down"
    monkeypatch.setenv("RLKIT_TEST_FAIL", str(fail))
    args = ["rlhf", "--policy", str(policy), "--prompts", str(prompts), "--reward", f"{rewards_file}:fails_in_iteration_2",
            "--iterations", "3", "--num-envs", "4", "--num-minibatches", "2", "--max-new-tokens", "4",
            "--learning-rate", "3e-3", "--torch-threads", "1", "--logdir", str(tmp_path / "runs")]
    monkeypatch.setenv("RLKIT_TEST_COUNTER", str(tmp_path / "straight.count"))
    assert main([*args, "--run-name", "straight"]) == 0
    capsys.readouterr()
    fail.touch()
    monkeypatch.setenv("RLKIT_TEST_COUNTER", str(tmp_path / "stopped.count"))
    assert main([*args, "--run-name", "stopped"]) == 2
    err = capsys.readouterr().err.strip()
    run = tmp_path / "runs" / "stopped"
    assert err == (f"rlkit: error: reward function {rewards_file}:fails_in_iteration_2 raised ValueError: the grader "
                   f"is down; the run stopped with checkpoint iteration-000001: fix the function (or the data) and continue with "
                   f"rlkit rlhf --resume {run}")
    assert (run / "checkpoints" / "iteration-000001").is_dir() and not (run / "policy.safetensors").exists()
    fail.unlink()
    assert main(["rlhf", "--resume", str(run)]) == 0
    final = [json.loads(capsys.readouterr().out.strip().splitlines()[-1])]
    from safetensors.torch import load_file

    straight, resumed = (load_file(tmp_path / "runs" / name / "policy.safetensors") for name in ("straight", "stopped"))
    assert final[0]["iterations"] == 3 and straight.keys() == resumed.keys()
    assert all(torch.equal(straight[k], resumed[k]) for k in straight)


def test_a_failure_after_an_extended_resume_is_told_to_continue_with_its_extension(tmp_path, rewards_file,
                                                                                     monkeypatch, capsys):
    """The failing iteration's checkpoint is the one the resume started from, which records neither
    the extension nor the reward given: the printed command repeats them, and it continues the run."""
    import shlex

    policy, _, prompts = tiny_lm.save_models(tmp_path, PROMPTS)
    fail = tmp_path / "grader_down"
    monkeypatch.setenv("RLKIT_TEST_FAIL", str(fail))
    monkeypatch.setenv("RLKIT_TEST_COUNTER", str(tmp_path / "count"))
    run, reward = tmp_path / "runs" / "r", f"{rewards_file}:fails_in_iteration_2"
    assert main(["rlhf", "--policy", str(policy), "--prompts", str(prompts), "--reward", f"{rewards_file}:good_count",
                 "--iterations", "1", "--checkpoint-every", "16", "--num-envs", "4", "--max-new-tokens", "4",
                 "--torch-threads", "1", "--no-save-model", "--logdir", str(tmp_path / "runs"), "--run-name", "r"]) == 0
    (tmp_path / "count").write_text("4")  # the failing function's next call is its "iteration 2"
    fail.touch()
    capsys.readouterr()
    assert main(["rlhf", "--resume", str(run), "--iterations", "3", "--reward", reward]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "stopped with checkpoint iteration-000001" in err, err
    command = err.split("continue with ")[1]
    assert command == f"rlkit rlhf --resume {shlex.quote(str(run))} --iterations 3 --reward {shlex.quote(reward)}"
    fail.unlink()
    assert main(shlex.split(command)[1:]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["iterations"] == 3


def test_reward_flags_repeat_and_bad_weights_are_one_line(tmp_path, rewards_file, capsys):
    policy, _, prompts = tiny_lm.save_models(tmp_path, PROMPTS)
    base = ["rlhf", "--policy", str(policy), "--prompts", str(prompts), "--iterations", "1", "--num-envs", "4",
            "--max-new-tokens", "3", "--torch-threads", "1", "--no-save-model", "--logdir", str(tmp_path / "runs")]
    assert main([*base, "--reward", f"{rewards_file}:good_count", f"--reward={rewards_file}:brevity",
                 "--reward-weights", "0.5", "2", "--run-name", "two"]) == 0
    capsys.readouterr()
    stored = json.loads((tmp_path / "runs" / "two" / "config.json").read_text())
    assert stored["reward"] == [f"{Path(rewards_file).resolve()}:{name}" for name in ("good_count", "brevity")]
    for extra, words in [(["--reward", f"{rewards_file}:good_count", "--reward-weights", "1", "2"],
                          "reward_weights has 2 weights for 1 reward sources"),
                         (["--reward", f"{rewards_file}:good_count", "--reward-weights", "nan"], "reward_weights must be"),
                         ([], "no reward"), (["--reward", "tests.tiny_lm:nope"], "has no function 'nope'")]:
        assert main([*base, *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0], err


def test_the_recipe_of_the_rewards_page_runs_as_printed(tmp_path):
    """docs/rlhf-rewards.md's commands with two iterations; both functions are logged."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from tests.docs.recipes import Shell, recipes

    shell = Shell(tmp_path, {"rlkit rlhf --policy": ["--iterations", "2", "--torch-threads", "1"]})
    shell.run(recipes((Path(__file__).parents[2] / "docs" / "rlhf-rewards.md").read_text())["rewards"])
    out, trained, initial = (json.loads(text.strip().splitlines()[-1]) for text in shell.printed[-3:])
    assert out["run_dir"] == "runs/rewards" and out["iterations"] == 2
    assert trained["samples"] == 4 and trained["prompts"] == 3 and set(trained["rewards"]) == {"total", "correct"}
    assert initial["samples"] == 4 and 0 <= initial["accuracy"]["mean"] <= 1
    events = EventAccumulator(str(tmp_path / "runs" / "rewards"), size_guidance={"scalars": 0})
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"rewards/correct/mean", "rewards/correct/applied", "rewards/brevity/mean"} <= tags


def test_a_missing_column_is_named_and_an_adaptive_beta_from_zero_is_refused(logdir, rewards_file):
    trainer = RLHFTrainer(cfg(logdir, reward=(f"{rewards_file}:matches",)), policy=tiny_lm.causal_lm(),
                          tokenizer=tiny_lm.tokenizer(), prompts=PROMPTS)
    with pytest.raises(RewardFunctionError, match=re.escape("missing 1 required keyword-only argument") + "|"
                       + re.escape("prompt data's columns: none")) as info:
        trainer.train()
    assert "prompt data's columns: none" in str(info.value)
    with pytest.raises(ConfigError, match="kl_target adapts beta"):
        cfg(logdir, kl_coef=0.0, kl_target=1.0)


def test_resuming_with_another_reward_function_says_so(tmp_path, rewards_file, capsys, caplog):
    policy, _, prompts = tiny_lm.save_models(tmp_path, PROMPTS)
    run = tmp_path / "runs" / "r"
    assert main(["rlhf", "--policy", str(policy), "--prompts", str(prompts), "--reward", f"{rewards_file}:good_count",
                 "--iterations", "1", "--num-envs", "4", "--max-new-tokens", "3", "--checkpoint-every", "12",
                 "--torch-threads", "1", "--no-save-model", "--logdir", str(run.parent), "--run-name", "r"]) == 0
    capsys.readouterr()
    assert main(["rlhf", "--resume", str(run), "--iterations", "2", "--reward", f"{rewards_file}:brevity"]) == 0
    warned = [r.getMessage() for r in caplog.records if "resuming with reward" in r.getMessage()]
    assert len(warned) == 1 and f"['{Path(rewards_file).resolve()}:brevity']" in warned[0], warned
    assert "good_count" in warned[0]


def test_huge_dict_and_interrupting_rewards_are_the_functions_failures():
    for returned, words in [([1e300], "at most 1e30"), ([10 ** 400], "at most 1e30"), ({0: 1.0}, "returned dict"),
                            ("1", "returned str")]:
        bad = RewardSet([RewardFunction("mod:bad", lambda returned=returned, **kw: returned)])
        with pytest.raises(RewardFunctionError, match=re.escape(words)):
            bad.score(["p"], ["a"], {}, [[1]])
    for exc in (KeyboardInterrupt, SystemExit):
        def raises(exc=exc, **kw):
            raise exc()
        with pytest.raises(RewardFunctionError, match=f"reward function mod:raises raised {exc.__name__}"):
            RewardSet([RewardFunction("mod:raises", raises)]).score(["p"], ["a"], {}, [[1]])
    big = RewardSet([RewardFunction("mod:big", lambda **kw: [1e20], weight=1e20)])
    with pytest.raises(RewardFunctionError, match="weighted sum"):
        big.score(["p"], ["a"], {}, [[1]])


def test_a_weighted_reward_model_alone_is_weighted(tmp_path):
    from rlkit.rlhf.build import build_reward

    _, rm, _ = tiny_lm.save_models(tmp_path)
    plain = build_reward(RLHFConfig(reward_model=str(rm)), None, tiny_lm.tokenizer(), torch.device("cpu"))
    weighted = build_reward(RLHFConfig(reward_model=str(rm), reward_weights=(3.0,)), None, tiny_lm.tokenizer(),
                            torch.device("cpu"))
    sequences = [[3, 4, 5], [6, 7]]
    np.testing.assert_allclose(weighted.score(["p", "q"], ["a", "b"], {}, sequences).total,
                               3.0 * plain.score_ids(sequences), rtol=1e-6)


def test_json_prompt_files_and_an_empty_saved_dataset_are_one_line(tmp_path):
    for name in ("p.json", "P.JSON"):
        (tmp_path / name).write_text('{"prompt": "a"}\n')
        with pytest.raises(ConfigError, match="not read"):
            read_prompt_data(str(tmp_path / name))
    (tmp_path / "up.JSONL").write_text('{"prompt": "a", "answer": 1}\n')
    assert read_prompt_data(str(tmp_path / "up.JSONL")).columns == {"answer": [1]}
    datasets = pytest.importorskip("datasets")
    datasets.Dataset.from_dict({"prompt": [], "answer": []}).save_to_disk(str(tmp_path / "empty"))
    with pytest.raises(ConfigError):
        read_prompt_data(str(tmp_path / "empty"))


def test_a_stop_signal_during_a_reward_function_is_not_taken_for_its_failure():
    from rlkit.io.signals import SignalStop

    def stopped(**kw):
        raise SignalStop(2)
    with pytest.raises(SignalStop):
        RewardSet([RewardFunction("mod:stopped", stopped)]).score(["p"], ["a"], {}, [[1]])
