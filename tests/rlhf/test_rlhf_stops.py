"""Stopping RLHF commands: one SIGINT stops a run whose reward function hangs (after the grace an
environment's step gets) and ``rlkit rlhf eval`` at once; a run stopped before its first checkpoint
resumes by starting again, to the weights of a run never stopped; ``rlhf eval`` leaves a run being
trained alone; a reward function's changes to its arguments do not reach later calls."""

import json
import os
import shlex
import signal
import stat

import pytest
import torch

from rlkit.cli import main
from rlkit.io.lock import RUN_LOCK, FolderLock
from rlkit.rlhf.rewards import RewardFunction, RewardSet
from tests import tiny_lm
from tests.processes import wait_until
from tests.robustness.helpers import start_cli

REWARDS = '''
import os, time
from pathlib import Path

def correct(prompts, completions, answer, **kw):
    hang = os.environ.get("RLKIT_TEST_HANG")
    if hang:
        Path(hang).touch()
        time.sleep(600)
    return [1.0 if a in c.split() else 0.0 for c, a in zip(completions, answer)]
'''
ROWS = [{"prompt": "the movie was", "answer": "good"}, {"prompt": "i liked it", "answer": "fun"}]


@pytest.fixture
def task(tmp_path):
    return tiny_lm.reward_task(tmp_path, REWARDS, ROWS)


def train_args(tmp_path, policy, name):
    return ["rlhf", "--policy", str(policy), "--prompts", str(tmp_path / "prompts.jsonl"), "--reward",
            f"{tmp_path}/rewards.py:correct", "--iterations", "2", "--num-envs", "4", "--max-new-tokens", "4",
            "--learning-rate", "3e-3", "--torch-threads", "1", "--logdir", str(tmp_path / "runs"), "--run-name", name,
            "--no-progress"]


def stopped_while_hanging(tmp_path, args):
    """``rlkit ARGS`` given one SIGINT once its reward function hangs: (exit code, stderr). The function
    sleeps 600 s, so a process that ends within the 60 s hang bound was stopped by that one signal."""
    marker = tmp_path / "hanging"
    proc = start_cli(*args, env={**os.environ, "RLKIT_TEST_HANG": str(marker)})
    assert wait_until(marker.exists, 120), proc.communicate(timeout=60)[1][-1500:]
    proc.send_signal(signal.SIGINT)
    err = proc.communicate(timeout=60)[1]
    return proc.returncode, err


def test_one_sigint_stops_a_hanging_reward_function_and_the_run_starts_again_exactly(task, capsys):
    tmp_path, policy = task
    code, err = stopped_while_hanging(tmp_path, train_args(tmp_path, policy, "stopped"))
    run = tmp_path / "runs" / "stopped"
    assert code == 130 and "Traceback" not in err, err[-1500:]
    stop = err.strip().splitlines()[-1]  # why the stop came at once and what it left, in one line
    assert f"reward function {tmp_path}/rewards.py:correct did not return within" in stop, err[-1500:]
    assert "the run has no checkpoint yet (a resume starts it again)" in stop and err.count("did not return") == 1
    assert not (run / "checkpoints").exists() and not (run / "policy.safetensors").exists()
    assert main(["rlhf", "--resume", str(run)]) == 0
    assert main(train_args(tmp_path, policy, "straight")) == 0
    capsys.readouterr()
    from safetensors.torch import load_file

    resumed, straight = (load_file(tmp_path / "runs" / name / "policy.safetensors") for name in ("stopped", "straight"))
    assert resumed.keys() == straight.keys() and all(torch.equal(resumed[k], straight[k]) for k in straight)


def test_an_extended_run_stopped_at_once_is_told_to_resume_with_its_extension(task, capsys):
    """No checkpoint holds ``--iterations 4`` yet when the stop comes at once (the reward function
    hangs in iteration 3): the printed command repeats it, and running it ends at iteration 4."""
    tmp_path, policy = task
    assert main([*train_args(tmp_path, policy, "ext"), "--checkpoint-every", "16"]) == 0  # 16 tokens: each iteration
    run = tmp_path / "runs" / "ext"
    code, err = stopped_while_hanging(tmp_path, ["rlhf", "--resume", str(run), "--iterations", "4"])
    stop = err.strip().splitlines()[-1]
    assert code == 130 and "its newest checkpoint iteration-000002 stands" in stop, err[-1500:]
    again = shlex.split(stop.split("continue with: ", 1)[1])
    assert again == ["rlkit", "rlhf", "--resume", str(run), "--iterations", "4"], stop
    capsys.readouterr()
    assert main(again[1:]) == 0
    latest = json.loads((run / "checkpoints" / "latest.json").read_text())["checkpoint"]
    assert json.loads((run / "checkpoints" / latest / "state.json").read_text())["update"] == 4


def test_weights_are_written_with_the_mode_of_the_runs_other_files(task, capsys):
    tmp_path, policy = task
    assert main([*train_args(tmp_path, policy, "modes"), "--checkpoint-every", "16"]) == 0
    run = tmp_path / "runs" / "modes"
    weights = [run / "policy.safetensors", *run.glob("checkpoints/*/tensors.safetensors")]
    assert len(weights) == 3 and {stat.S_IMODE(p.stat().st_mode) for p in weights} == \
        {stat.S_IMODE((run / "config.json").stat().st_mode)}


def test_one_sigint_stops_rlhf_eval_at_once_and_nothing_is_written(task):
    tmp_path, policy = task
    out = tmp_path / "eval.json"
    code, err = stopped_while_hanging(tmp_path, [
        "rlhf", "eval", str(policy), "--prompts", str(tmp_path / "prompts.jsonl"), "--reward",
        f"{tmp_path}/rewards.py:correct", "--max-new-tokens", "4", "--out", str(out)])
    assert code == 130 and err.strip().splitlines()[-1] == "rlkit: interrupted; nothing was written", err[-1500:]
    assert not out.exists()


def test_rlhf_eval_refuses_a_run_being_trained_and_a_gymnasium_run(task, capsys):
    tmp_path, policy = task
    run = tmp_path / "runs" / "r"
    assert main(train_args(tmp_path, policy, "r")) == 0
    gym_run = tmp_path / "gym"
    gym_run.mkdir()
    (gym_run / "config.json").write_text(json.dumps({"env": "CartPole-v1", "total_steps": 4096}))
    capsys.readouterr()
    fn = ["--prompts", str(tmp_path / "prompts.jsonl"), "--reward", f"{tmp_path}/rewards.py:correct"]
    with FolderLock(run, RUN_LOCK, "rlkit process", "resume it"):
        assert main(["rlhf", "eval", str(run), *fn]) == 2
        assert "being trained by another rlkit process (pid" in capsys.readouterr().err
    assert main(["rlhf", "eval", str(gym_run), *fn]) == 2
    assert capsys.readouterr().err.strip() == f"rlkit: error: {gym_run} is a Gymnasium run; evaluate it with: " \
                                              f"rlkit eval {gym_run}"
    assert main(["rlhf", "eval", str(run), *fn]) == 0  # the lock let go: evaluable again


def test_what_a_reward_function_changes_in_its_arguments_does_not_reach_later_calls():
    seen = []

    def meddles(prompts, completions, answer, **kw):
        seen.append((json.dumps(prompts), list(answer), list(completions)))
        prompts[0][0]["content"] = "changed"
        answer[0] = "changed"
        completions[0] = "changed"
        return [1.0] * len(completions)

    rewards = RewardSet([RewardFunction("mod:meddles", meddles)])
    prompts, completions, columns = [[{"role": "user", "content": "hi"}]], ["a"], {"answer": ["b"]}
    for _ in range(2):
        rewards.score(prompts, completions, columns, [[1]])
    assert seen[0] == seen[1] == ('[[{"role": "user", "content": "hi"}]]', ["b"], ["a"])
    assert prompts[0][0]["content"] == "hi" and columns == {"answer": ["b"]} and completions == ["a"]


def test_a_finished_run_without_checkpoints_is_never_trained_again(task, capsys):
    tmp_path, policy = task
    assert main(train_args(tmp_path, policy, "done")) == 0  # no --checkpoint-every: no checkpoints
    run = tmp_path / "runs" / "done"
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    capsys.readouterr()
    assert main(["rlhf", "--resume", str(run), "--iterations", "4"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "without checkpoints (its final policy is policy.safetensors)" in err[0], err
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before


def test_a_run_never_checkpointed_warns_of_moved_rewards_and_refuses_changes_in_one_line(task, capsys, caplog):
    tmp_path, policy = task
    run = tmp_path / "runs" / "fresh"
    run.mkdir(parents=True)
    assert main(train_args(tmp_path, policy, "model")) == 0  # a config.json as a run writes it
    (run / "config.json").write_text((tmp_path / "runs" / "model" / "config.json").read_text())
    capsys.readouterr()
    assert main(["rlhf", "--resume", str(run), "--learning-rate", "1e-4"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot change learning_rate" in err[0], err
    (tmp_path / "moved.py").write_text(REWARDS)
    with caplog.at_level("WARNING"):
        assert main(["rlhf", "--resume", str(run), "--reward", f"{tmp_path}/moved.py:correct"]) == 0
    assert "resuming with reward" in caplog.text and "starts again from its beginning" in caplog.text


def test_a_reward_function_cannot_take_the_stop_signals_or_hide_a_stop_from_rlhf_eval(task):
    from rlkit.io.signals import SignalStop, stop_on_signals
    from rlkit.rlhf.evaluate import EvalRequest, evaluate

    def ignores_ctrl_c(completions, **kw):
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGALRM, signal.SIG_IGN)
        return [0.0] * len(completions)

    with stop_on_signals() as request:
        ours = signal.getsignal(signal.SIGINT)
        RewardSet([RewardFunction("mod:ignores", ignores_ctrl_c)]).score(["p"], ["a"], {}, [[1]])
        assert signal.getsignal(signal.SIGINT) is ours  # put back after the call
        request.signum = signal.SIGINT  # a stop that a function caught and swallowed
        tmp_path, policy = task
        with pytest.raises(SignalStop):
            evaluate(EvalRequest(str(policy), str(tmp_path / "prompts.jsonl"), (f"{tmp_path}/rewards.py:correct",),
                                 max_new_tokens=2))
        request.signum, request.over = None, True
