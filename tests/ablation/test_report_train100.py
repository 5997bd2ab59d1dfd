"""The PPO paper's score: a run records the mean return of its last 100 training episodes in
``result.json``, and ``rlkit report --metric train100`` scores each run by it."""

import json

import numpy as np

import rlkit
from rlkit.cli import main
from rlkit.gym.episodes import Episodes
from tests.ablation.test_hostile_sweeps import fake_sweep


def test_a_run_records_the_mean_return_of_its_last_100_training_episodes(tmp_path, monkeypatch):
    finished = []
    pop = Episodes.pop

    def kept(self):
        out = pop(self)
        finished.extend(ret for ret, _ in out)
        return out

    monkeypatch.setattr(Episodes, "pop", kept)
    result = rlkit.train(rlkit.preset("cartpole", total_steps=4096, num_envs=4, num_steps=128, update_epochs=1,
                                      eval_episodes=0, progress=False, logdir=str(tmp_path), run_name="r"))
    assert len(finished) > 100  # so the last 100 are a part of them
    recorded = json.loads((tmp_path / "r" / "result.json").read_text())["train_return_last100"]
    assert recorded == result.train_return_last100 == float(np.mean(finished[-100:]))


def test_the_report_scores_runs_by_their_last_100_training_episodes(tmp_path):
    finals = {(v, "CartPole-v1", s): [100.0, 200.0] for v in "ab" for s in (1, 2, 3)}
    out = fake_sweep(tmp_path, finals)
    train = {("a", 1): 10.0, ("a", 2): 20.0, ("a", 3): 30.0, ("b", 1): 40.0, ("b", 2): 50.0}  # b seed 3: none recorded
    for (variant, seed), value in train.items():
        path = next(out.glob(f"runs/{variant}__CartPole-v1__s{seed}/result.json"))
        path.write_text(json.dumps({**json.loads(path.read_text()), "train_return_last100": value}))
    assert main(["report", str(out), "--baseline", "a", "--metric", "train100", "--reps", "200"]) == 0
    summary = json.loads((out / "report" / "summary.json").read_text())
    means = {r["variant"]: (r["runs"], r["mean"]) for r in summary["per_env"]}
    assert means == {"a": (3, 20.0), "b": (2, 45.0)}
    assert summary["non_finite"] == [{"variant": "b", "env": "CartPole-v1", "seed": 3}]
    assert "mean of the last 100 training episodes" in (out / "report" / "report.md").read_text()
