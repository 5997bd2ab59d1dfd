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
