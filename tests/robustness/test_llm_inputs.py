"""Bad input to the RLHF side is one line; runs resume from anywhere; nothing is downloaded."""

import json
import os
import shutil

import pytest

from rlkit.cli import main
from tests import tiny_lm

pytest.importorskip("transformers")


@pytest.fixture
def models(tmp_path):
    return tiny_lm.save_models(tmp_path)


def rlhf_args(policy, rm, prompts, tmp_path, *extra):
    return ["rlhf", "--policy", str(policy), "--reward-model", str(rm), "--prompts", str(prompts), "--iterations", "1",
            "--num-envs", "2", "--num-minibatches", "1", "--max-new-tokens", "2", "--logdir", str(tmp_path / "runs"),
            "--torch-threads", "1", "--no-save-model", *extra]


def one_error(capsys, code):
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err[-2000:]
    line = err.strip().splitlines()[-1]
    assert line.startswith("rlkit: error: ")
    return line


@pytest.fixture
def network_attempts(monkeypatch):
    """Every attempt of this process to resolve a host name or open a connection, refused and recorded."""
    import socket

    attempts = []

    def refuse(name):
        def call(*args, **kwargs):
            attempts.append((name, args[1:] if name.startswith("socket.") else args))
            raise OSError(f"the test refuses {name}")
        return call

    for name in ("getaddrinfo", "create_connection"):
        monkeypatch.setattr(socket, name, refuse(name))
    for name in ("connect", "connect_ex"):
        monkeypatch.setattr(socket.socket, name, refuse(f"socket.{name}"))
    return attempts


@pytest.mark.parametrize("missing", ["a folder", "a hub name"])
def test_a_missing_local_model_fails_at_once_without_network_noise(models, tmp_path, capsys, network_attempts,
                                                                   missing):
    """Neither a missing folder nor a name absent from the local hub cache asks the network."""
    _, rm, prompts = models
    name = tmp_path / "nope" if missing == "a folder" else "rlkit-test-nobody/no-such-model"
    code = main(rlhf_args(name, rm, prompts, tmp_path))
    assert network_attempts == []
    line = one_error(capsys, code)
    assert "no such folder" in line and "nothing is downloaded" in line


def test_a_causal_lm_as_reward_model_is_refused(models, tmp_path, capsys):
    policy, _, prompts = models
    assert "no trained score head" in one_error(capsys, main(rlhf_args(policy, policy, prompts, tmp_path)))


def test_reward_models_with_other_labels_or_vocabulary_are_refused(models, tmp_path, capsys):
    from transformers import LlamaForSequenceClassification

    policy, _, prompts = models
    three = tmp_path / "rm3"
    LlamaForSequenceClassification(tiny_lm.config(num_labels=3)).save_pretrained(three)
    assert "3 labels" in one_error(capsys, main(rlhf_args(policy, three, prompts, tmp_path)))
    small = tmp_path / "rm_small"
    LlamaForSequenceClassification(tiny_lm.config(num_labels=1, vocab_size=8)).save_pretrained(small)
    assert "vocabulary" in one_error(capsys, main(rlhf_args(policy, small, prompts, tmp_path)))


def test_a_policy_folder_without_a_tokenizer_is_one_line(models, tmp_path, capsys):
    policy, rm, prompts = models
    bare = tmp_path / "bare"
    tiny_lm.causal_lm().save_pretrained(bare)
    assert "tokenizer" in one_error(capsys, main(rlhf_args(bare, rm, prompts, tmp_path)))


@pytest.mark.parametrize("lines,word", [(['{"text": "a"}'], "prompt"), (["{not json"], "not JSON"),
                                        (['{"prompt": 3}'], "string"), (['["a"]'], "prompt")])
def test_bad_prompt_lines_are_named(models, tmp_path, capsys, lines, word):
    policy, rm, _ = models
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("\n".join(['{"prompt": "the movie was"}', *lines]) + "\n")
    line = one_error(capsys, main(rlhf_args(policy, rm, prompts, tmp_path)))
    assert f"{prompts}:2" in line and word in line


def test_bad_preference_lines_and_outputs_are_one_line(models, tmp_path, capsys):
    policy, _, _ = models
    data = tmp_path / "prefs.jsonl"
    data.write_text(json.dumps(["a", "b"]) + "\n")
    line = one_error(capsys, main(["rm", "train", "--backbone", str(policy), "--data", str(data),
                                   "--output", str(tmp_path / "out")]))
    assert f"{data}:1" in line


def test_bad_lora_targets_are_one_line(models, tmp_path, capsys):
    policy, rm, prompts = models
    line = one_error(capsys, main(rlhf_args(policy, rm, prompts, tmp_path, "--lora-r", "2", "--lora-targets",
                                            "no_such_module")))
    assert "lora_targets" in line


@pytest.mark.parametrize("args,word", [(["--device", "cuda"], "device"), (["--device", "foo"], "device"),
                                       (["--seed", "-1"], "seed")])
def test_bad_rlhf_values_are_one_line(models, tmp_path, capsys, args, word):
    import torch

    if "cuda" in args and torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    policy, rm, prompts = models
    assert word in one_error(capsys, main(rlhf_args(policy, rm, prompts, tmp_path, *args)))


def test_an_rlhf_run_resumes_from_another_directory_and_after_its_model_moved(models, tmp_path, capsys,
                                                                             monkeypatch):
    policy, rm, prompts = models
    monkeypatch.chdir(tmp_path)
    args = ["rlhf", "--policy", "policy", "--reward-model", "rm", "--prompts", "prompts.txt", "--iterations", "1",
            "--num-envs", "2", "--num-minibatches", "1", "--max-new-tokens", "2", "--logdir", "runs", "--run-name", "r",
            "--torch-threads", "1", "--checkpoint-every", "1", "--no-save-model"]
    assert main(args) == 0
    stored = json.loads((tmp_path / "runs" / "r" / "config.json").read_text())
    assert stored["policy"] == str(policy.resolve()) and os.path.isabs(stored["prompts"])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    moved = tmp_path / "moved_policy"
    shutil.move(str(policy), moved)
    run = str(tmp_path / "runs" / "r")
    capsys.readouterr()
    assert main(["rlhf", "--resume", run, "--iterations", "2"]) == 2  # the model is gone from where it was
    assert "cannot load model" in capsys.readouterr().err
    assert main(["rlhf", "--resume", run, "--iterations", "2", "--policy", str(moved)]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["iterations"] == 2
    assert "kl_coef" in one_error(capsys, main(["rlhf", "--resume", run, "--kl-coef", "0.5"]))


def test_a_damaged_rlhf_checkpoint_is_one_line(models, tmp_path, capsys):
    policy, rm, prompts = models
    assert main(rlhf_args(policy, rm, prompts, tmp_path, "--run-name", "r", "--checkpoint-every", "1")) == 0
    tensors = next((tmp_path / "runs" / "r" / "checkpoints").glob("iteration-*/tensors.safetensors"))
    tensors.write_bytes(tensors.read_bytes()[:64])
    capsys.readouterr()
    assert "unreadable checkpoint" in one_error(capsys, main(["rlhf", "--resume", str(tmp_path / "runs" / "r")]))
    capsys.readouterr()
    gym_line = one_error(capsys, main(["train", "--resume", str(tmp_path / "runs" / "r")]))
    assert "unreadable checkpoint" in gym_line


def test_a_reward_model_as_the_policy_is_refused(models, tmp_path, capsys):
    _, rm, prompts = models
    line = one_error(capsys, main(rlhf_args(rm, rm, prompts, tmp_path)))
    assert "not a trained causal language model" in line and "lm_head" in line
    assert not (tmp_path / "runs").exists()


def test_a_policy_name_neither_folder_nor_cached_says_so_without_the_hub(models, tmp_path, capsys, monkeypatch):
    _, rm, prompts = models
    monkeypatch.chdir(tmp_path)
    line = one_error(capsys, main(rlhf_args("polcy", rm, prompts, tmp_path)))
    assert "no such folder, nor a model of that name in the local hub cache" in line
    assert "huggingface.co" not in capsys.readouterr().err


def test_folders_and_binary_files_as_prompts_or_preferences_are_one_line(models, tmp_path, capsys):
    policy, rm, _ = models
    assert "is a folder, not a file" in one_error(capsys, main(rlhf_args(policy, rm, policy, tmp_path)))
    binary = tmp_path / "prefs.jsonl"
    binary.write_bytes(bytes(range(256)) * 4)
    line = one_error(capsys, main(["rm", "train", "--backbone", str(policy), "--data", str(binary),
                                   "--output", str(tmp_path / "out")]))
    assert "not UTF-8 text" in line and not (tmp_path / "out").exists()
    nul = tmp_path / "nul.txt"
    nul.write_text("the movie\x00was\n")
    assert "NUL" in one_error(capsys, main(rlhf_args(policy, rm, nul, tmp_path)))


def test_eval_of_an_rlhf_run_or_a_folder_of_runs_says_what_it_is(models, tmp_path, capsys):
    policy, rm, prompts = models
    assert main(rlhf_args(policy, rm, prompts, tmp_path, "--checkpoint-every", "1")) == 0
    run = next((tmp_path / "runs").iterdir())
    capsys.readouterr()
    assert "is an RLHF run" in one_error(capsys, main(["eval", str(run)]))
    assert "holds 1 run(s)" in one_error(capsys, main(["eval", str(tmp_path / "runs")]))


def test_an_rlhf_run_prints_no_transformers_deprecation_warnings(models, tmp_path):
    """The KV cache goes back to the model under the keyword this transformers version takes (the
    renamed ``cache`` printed a FutureWarning and a deprecation line in every run); four responses
    to two prompts also take the shared-prompt path of the training forward."""
    from tests.robustness.helpers import run_cli

    policy, rm, prompts = models
    args = [a for a in rlhf_args(policy, rm, prompts, tmp_path, "--no-progress")]
    args[args.index("--num-envs") + 1] = "4"
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "FutureWarning" not in proc.stderr and "deprecated" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("extra", [["--lora-r", "2"], ["--gradient-checkpointing"]], ids=["lora", "checkpointing"])
def test_lora_and_gradient_checkpointing_runs_meet_no_future_warning(models, tmp_path, extra):
    """rlkit calls transformers by the names it does not deprecate (and keeps peft's read of a
    deprecated one quiet): a FutureWarning turned into an error here stops nothing."""
    import warnings

    policy, rm, prompts = models
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        assert main(rlhf_args(policy, rm, prompts, tmp_path, *extra)) == 0


@pytest.mark.parametrize("args", [["--group-form", "rloo"], ["--group-size", "1"], ["--group-size=1", "--group-form", "rloo"],
                                  ["--group-form", "grpo"], ["--group-size", "1", "--group-form", "grpo"]])
def test_a_group_option_that_would_not_take_effect_is_refused(models, tmp_path, capsys, args):
    """``--group-form rloo`` (the default form) or ``--group-size 1`` alone left the variant off: the
    run was plain PPO with a value head. Every group flag named takes effect or is refused."""
    policy, rm, prompts = models
    line = one_error(capsys, main(rlhf_args(policy, rm, prompts, tmp_path, *args)))
    assert "group" in line and ("stays off" in line or "group_size >= 2" in line), line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("args,hint", [(["--outer-lr", "1.0"], "--outer"), (["--hp3o-buffer-size", "20"], "--hp3o")])
def test_a_gym_variant_option_named_at_its_default_alone_is_refused(tmp_path, capsys, args, hint):
    line = one_error(capsys, main(["train", *args, "--logdir", str(tmp_path / "runs")]))
    assert "stays off" in line and f"turn it on ({hint})" in line
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("args", [["--num-envs", "8", "--num-minibatches", "8", "--max-new-tokens", "4"],
                                  ["--num-envs", "8", "--num-minibatches", "8", "--group-size", "4", "--group-form", "grpo"],
                                  ["--num-envs", "2", "--num-minibatches", "2", "--group-size", "2"],
                                  ["--hp3o", "--hp3o-trajectories", "2", "--num-minibatches", "2"]])
def test_minibatches_of_one_response_are_refused_before_anything_is_written(models, tmp_path, capsys, args):
    """A response may end after its first token: a minibatch of one response could hold one token,
    whose advantage has no standard deviation to be normalized by (the run died mid-way, leaving its folder)."""
    policy, rm, prompts = models
    line = one_error(capsys, main([*rlhf_args(policy, rm, prompts, tmp_path), *args]))
    assert "minibatches of one response" in line and "--no-norm-adv" in line, line
    assert not (tmp_path / "runs").exists()


def test_outputs_that_cannot_be_written_are_one_line(models, tmp_path, capsys):
    """A reward model's output folder is checked before training; an RLHF run's final policy file
    that cannot be replaced is one line naming it (root's immutable flag: permissions do not stop root)."""
    from tests.robustness.test_run_lock import unwritable

    policy, rm, prompts = models
    prefs = tmp_path / "prefs.jsonl"
    prefs.write_text('{"prompt": "the movie was", "chosen": "good", "rejected": "bad"}\n' * 4)
    parent = tmp_path / "models"
    parent.mkdir()
    with unwritable(parent):
        code = main(["rm", "train", "--backbone", str(policy), "--data", str(prefs), "--output", str(parent / "rm")])
    assert f"cannot write in {parent}" in one_error(capsys, code)
    if os.geteuid() != 0:
        return
    args = [a for a in rlhf_args(policy, rm, prompts, tmp_path, "--run-name", "r", "--checkpoint-every", "1")
            if a != "--no-save-model"]
    assert main(args) == 0
    final = tmp_path / "runs" / "r" / "policy.safetensors"
    with unwritable(final):
        line = one_error(capsys, main(["rlhf", "--resume", str(tmp_path / "runs" / "r"), "--iterations", "2"]))
    assert line.startswith(f"rlkit: error: could not write {final}"), line
