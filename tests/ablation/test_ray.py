"""The Ray backend on a local Ray instance: the same runs, the same results as the local pool."""

import csv

import pytest

from rlkit.ablation.sweep import run_sweep
from tests.ablation.test_sweep import SPEC, write_spec

ray = pytest.importorskip("ray")


def test_ray_backend_gives_the_local_backends_results(tmp_path):
    text = SPEC.replace('"sb3:ppo" = {}\n"sb3-contrib:trpo" = {}\n', "").replace("seeds = 2", "seeds = 1")
    spec = write_spec(tmp_path, text)
    local = run_sweep(spec, str(tmp_path / "local"), workers=2, progress=False)
    remote = run_sweep(spec, str(tmp_path / "ray"), workers=2, backend="ray", progress=False)
    assert local.done == remote.done == 2

    def returns(path):
        with open(path / "results.csv") as f:
            return {(r["variant"], r["step"]): r["eval_return_mean"] for r in csv.DictReader(f)}

    assert returns(tmp_path / "local") == returns(tmp_path / "ray")
