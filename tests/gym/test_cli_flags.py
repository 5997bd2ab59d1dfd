"""The command line keeps its flat flags although the PPO and variant fields are composed
sub-configs (the flag set from before the package move, plus --kernels)."""

import pytest

from rlkit.cli import main

TRAIN_FLAGS = """--env --env-kwargs --seed --total-steps --num-envs --num-steps --num-minibatches --update-epochs
--learning-rate --anneal-lr --no-anneal-lr --gamma --gae-lambda --norm-adv --clip-coef --clip-vloss
--no-clip-vloss --ent-coef --vf-coef --max-grad-norm --target-kl --norm-obs --norm-reward --async-envs
--hidden-sizes --logdir --run-name --resume --checkpoint-every --eval-episodes --eval-every --device
--torch-threads --progress --outer --outer-lr --outer-momentum --outer-nesterov --outer-bias --outer-params
--outer-optimizer --hp3o --hp3o-buffer-size --hp3o-trajectories --hp3o-samples --hp3o-recompute-values
--hp3o-plus --hp3o-threshold --kernels""".split()
RLHF_FLAGS = """--policy --reward-model --prompts --seed --num-envs --max-new-tokens --separate-critic --lora-r
--lora-alpha --lora-targets --temperature --iterations --update-epochs --num-minibatches --learning-rate
--anneal-lr --gamma --gae-lambda --norm-adv --clip-coef --clip-vloss --ent-coef --vf-coef --max-grad-norm
--target-kl --kl-coef --kl-estimator --kl-target --kl-horizon --missing-eos-penalty --device --dtype
--torch-threads --logdir --run-name --save-model --checkpoint-every --resume --outer-lr --hp3o --kernels""".split()


@pytest.mark.parametrize("command,flags", [("train", TRAIN_FLAGS), ("rlhf", RLHF_FLAGS)])
def test_help_lists_every_flat_flag(capsys, command, flags):
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert [f for f in flags if f not in text] == []
    assert "--ppo." not in text and "--variants." not in text


def test_flat_flags_reach_the_composed_fields(logdir, capsys):
    import json
    from pathlib import Path

    assert main(["train", "--preset", "cartpole", "--total-steps", "1024", "--logdir", logdir, "--run-name", "f",
                 "--clip-coef", "0.1", "--outer-lr", "1.5", "--kernels", "plain", "--eval-episodes", "0"]) == 0
    saved = json.loads((Path(logdir) / "f" / "config.json").read_text())
    assert (saved["clip_coef"], saved["outer_lr"], saved["kernels"]) == (0.1, 1.5, "plain")
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["variant"] == "outer-lr1.5"


def test_repeated_seeds_and_resume_flags_extend_and_repeated_list_fields_are_refused(tmp_path, capsys):
    """``--seeds 1 2 --seeds 3`` trains three members and ``--resume A --resume B C`` resumes three
    (as ``--preset`` extends); a repeated list field would keep only its last values, so it is refused."""
    import json

    tiny = ["--env", "rlkit-test/IdentityDiscrete-v0", "--total-steps", "256", "--num-envs", "2", "--num-steps", "64",
            "--num-minibatches", "2", "--update-epochs", "1", "--eval-episodes", "1", "--no-progress"]
    assert main(["train", "--seeds", "1", "2", "--seeds", "3", *tiny, "--logdir", str(tmp_path), "--run-name", "p"]) == 0
    assert [json.loads(line)["seed"] for line in capsys.readouterr().out.splitlines()] == [1, 2, 3]
    first, second, third = (str(tmp_path / f"p__s{s}") for s in (1, 2, 3))
    assert main(["train", "--resume", first, "--resume", second, third, "--total-steps", "384"]) == 0
    resumed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["seed"], r["total_steps"]) for r in resumed] == [(1, 384), (2, 384), (3, 384)]
    for argv in (["train", "--hidden-sizes", "8", "8", "--hidden-sizes", "16"],
                 ["rlhf", "--lora-targets", "q_proj", "--lora-targets=v_proj"]):
        assert main([*argv, "--logdir", str(tmp_path / "x")]) == 2
        err = capsys.readouterr().err
        assert "given more than once" in err and err.count("\n") == 1, err
    assert not (tmp_path / "x").exists()


def test_an_unknown_flag_is_named_without_its_value_and_points_to_plug_ins(capsys):
    """A plug-in variant's flag (``--cap-norm 0.1`` without RLKIT_VARIANTS) is not a typo the user
    can see: the line names the flags alone and says where plug-ins' flags come from."""
    from rlkit.cli import main

    assert main(["train", "--cap-norm", "0.1", "--total-steps", "64"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unrecognized option: --cap-norm;" in err and "RLKIT_VARIANTS" in err, err
    assert "0.1" not in err


@pytest.mark.parametrize("argv, flag, other", [
    (["rlhf", "--memory", "lstm"], "--memory", "rlkit train"), (["rlhf", "--env", "CartPole-v1"], "--env", "rlkit train"),
    (["rlhf", "--norm-obs"], "--norm-obs", "rlkit train"), (["train", "--kl-coef", "0.1"], "--kl-coef", "rlkit rlhf"),
    (["train", "--policy", "p"], "--policy", "rlkit rlhf")])
def test_the_other_trainers_option_says_whose_it_is(argv, flag, other, capsys):
    from rlkit.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{flag} is an option of {other}, not of this command" in err, err
