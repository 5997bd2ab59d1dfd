"""A sweep started from a process that has initialized CUDA spawns its workers (a forked child
cannot use CUDA): the runs finish there as with forked workers."""

import csv

import pytest
import torch

from rlkit.ablation import runner
from rlkit.ablation.sweep import run_sweep
from tests.ablation.test_sweep import SPEC, write_spec


def test_a_sweep_from_a_process_holding_cuda_spawns_its_workers_and_gets_the_same_results(tmp_path, monkeypatch):
    text = SPEC.replace('"sb3:ppo" = {}\n"sb3-contrib:trpo" = {}\n', "").replace("seeds = 2", "seeds = 1")
    spec = write_spec(tmp_path, text)
    assert runner.pool_context().get_start_method() != "spawn" or torch.cuda.is_initialized()
    forked = run_sweep(spec, str(tmp_path / "forked"), workers=2, progress=False)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert runner.pool_context().get_start_method() == "spawn"
    spawned = run_sweep(spec, str(tmp_path / "spawned"), workers=2, progress=False)
    assert forked.done == spawned.done == 2

    def returns(path):
        with open(path / "results.csv") as f:
            return {(r["variant"], r["step"]): r["eval_return_mean"] for r in csv.DictReader(f)}

    assert returns(tmp_path / "forked") == returns(tmp_path / "spawned")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_sweep_after_cuda_is_really_initialized_finishes_in_spawned_workers(tmp_path):
    text = SPEC.replace('"sb3:ppo" = {}\n"sb3-contrib:trpo" = {}\n', "").replace("seeds = 2", "seeds = 1")
    spec = write_spec(tmp_path, text)
    torch.zeros(1, device="cuda")  # the parent now holds a CUDA context
    assert torch.cuda.is_initialized() and runner.pool_context().get_start_method() == "spawn"
    assert run_sweep(spec, str(tmp_path / "sweep"), workers=2, progress=False).done == 2
