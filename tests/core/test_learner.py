"""The trainer skeleton's parts: the learner's passes and checkpoint state, the progress, the
checkpoint cadence, and reading checkpoints written with earlier key names."""

import numpy as np
import pytest
import torch

from rlkit.core.learner import Learner, Progress
from rlkit.core.loop import Schedule
from rlkit.core.optim import FlatParameters
from rlkit.core.parts import Passes, PartState
from rlkit.variants.base import UpdateHook
from rlkit.variants.migrate import migrate_checkpoint


class Recorder(UpdateHook):
    name = "rec"

    def __init__(self, log: list[str]) -> None:
        self.log, self.count = log, 0

    def begin(self) -> None:
        self.log.append("begin")

    def end(self, stats) -> dict[str, float]:
        self.log.append(f"end {stats.get('losses/x')}")  # the pass's own statistics
        self.count += 1
        return {"rec/count": float(self.count)}

    def state(self) -> PartState:
        return PartState({"w": torch.tensor([float(self.count)])}, {"count": self.count})

    def load_state(self, state: PartState) -> None:
        self.count = state.json["count"]


class Source:
    name = "src"

    def __init__(self) -> None:
        self.seen = 0

    def state(self) -> PartState:
        return PartState({}, {"seen": self.seen})

    def load_state(self, state: PartState) -> None:
        self.seen = state.json["seen"]


def learner(seed: int = 0, log: list[str] | None = None) -> Learner:
    p = torch.nn.Parameter(torch.ones(3))
    flat = FlatParameters([p])
    opt = torch.optim.Adam([flat.param], lr=0.1)
    return Learner(flat, opt, torch.Generator().manual_seed(seed), np.random.default_rng(seed),
                   [Recorder(log if log is not None else [])], Source())


def test_passes_run_the_hooks_around_each_pass_and_average_their_scalars():
    log: list[str] = []
    lrn = learner(log=log)
    seen = []

    def optimize(part: float) -> dict[str, float]:
        log.append(f"pass {part}")
        seen.append(part)
        return {"losses/x": part}

    stats = lrn.passes(Passes([1.0, 3.0]), optimize)
    assert log == ["begin", "pass 1.0", "end 1.0", "begin", "pass 3.0", "end 3.0"]
    assert stats == {"losses/x": 2.0, "rec/count": 1.5}
    assert lrn.passes(5.0, optimize) == {"losses/x": 5.0, "rec/count": 3.0}  # one plain pass


def test_learner_checkpoint_restores_every_stream_and_part():
    a = learner(seed=1)
    a.flat.param.grad.fill_(1.0)
    a.optimizer.step()
    torch.randperm(5, generator=a.generator)
    a.rng.random()
    a.hooks[0].count, a.source.seen = 4, 7
    tensors, state = a.checkpoint()
    b = learner(seed=2)
    b.restore(tensors, state)
    assert torch.equal(torch.randperm(9, generator=a.generator), torch.randperm(9, generator=b.generator))
    assert a.rng.random() == b.rng.random()
    assert b.hooks[0].count == 4 and b.source.seen == 7
    assert torch.equal(b.optimizer.state[b.flat.param]["exp_avg"], a.optimizer.state[a.flat.param]["exp_avg"])


def test_progress_round_trips_through_json():
    p = Progress(3, 1536, 2.5)
    assert Progress.from_json(p.to_json()) == p


@pytest.mark.parametrize("every,per_update,cadence", [(0, 512, 0), (100, 512, 1), (1024, 512, 2), (1500, 512, 2)])
def test_checkpoint_every_counts_env_steps_rounded_down_to_whole_updates(every, per_update, cadence):
    assert Schedule.checkpoint_cadence(every, per_update) == cadence


def test_an_earlier_rlhf_checkpoint_reads_in_todays_keys_and_units():
    state = {"config": {"checkpoint_every": 3, "num_envs": 4, "max_new_tokens": 8}, "iteration": 2,
             "tokens": 41.0, "seconds": 1.5, "rng_numpy": {}, "hp3o": {"x": 1}}
    tensors, out = migrate_checkpoint({"flat": torch.zeros(1)}, state)
    assert out["trainer"] == "rlhf" and out["update"] == 2 and out["env_steps"] == 41
    assert out["config"]["checkpoint_every"] == 3 * 4 * 8  # iterations then, env steps now
    assert out["variants"] == {"hp3o": {"x": 1}} and "iteration" in state  # the record itself is unchanged


def test_an_earlier_gym_checkpoint_reads_in_todays_keys():
    gen = torch.Generator().get_state()
    state = {"config": {"checkpoint_every": 512}, "update": 2, "global_step": 1024, "train_seconds": 0.5}
    tensors, out = migrate_checkpoint({"rng.torch_generator": gen}, state)
    assert (out["trainer"], out["env_steps"], out["seconds"]) == ("gym", 1024, 0.5)
    assert out["config"]["checkpoint_every"] == 512 and torch.equal(tensors["rng.generator"], gen)
    assert migrate_checkpoint(tensors, out) == (tensors, out)  # today's checkpoints are read as they are


def test_a_generator_state_from_another_kind_of_device_reseeds_from_it_the_same_way_each_time(caplog):
    """A CUDA generator's state (Philox seed and offset, 16 bytes) restored into a CPU generator
    (and the reverse on a GPU machine): a new stream seeded from the stored bytes, with a warning."""
    cuda_like = torch.tensor(list(range(16)), dtype=torch.uint8)
    draws = []
    for _ in range(2):
        a = learner(seed=3)
        tensors, state = a.checkpoint()
        tensors["rng.generator"] = cuda_like
        with caplog.at_level("WARNING", logger="rlkit"):
            a.restore(tensors, state)
        draws.append(torch.randperm(50, generator=a.generator))
    assert torch.equal(draws[0], draws[1])
    other = learner(seed=3)
    tensors["rng.generator"] = cuda_like.flip(0)
    other.restore(tensors, state)
    assert not torch.equal(torch.randperm(50, generator=other.generator), draws[0])
    assert "another kind of device" in caplog.text


@pytest.mark.parametrize("stored", [torch.zeros(7, dtype=torch.uint8), torch.zeros(16, dtype=torch.float32),
                                    torch.zeros(2, 8, dtype=torch.uint8)], ids=["7 bytes", "floats", "2-D"])
def test_a_damaged_generator_state_is_refused_not_reseeded(stored):
    a = learner(seed=3)
    tensors, state = a.checkpoint()
    tensors["rng.generator"] = stored
    with pytest.raises(ValueError, match="sampling generator"):
        a.restore(tensors, state)


class Scaled:
    """An objective with checkpoint state of its own (a coefficient it changes)."""

    name, is_default, needs_dist_params = "scaled", False, False

    def __init__(self) -> None:
        self.scale = 1.0

    def __call__(self, inputs, hp, dim=None):
        raise AssertionError("not called here")

    def state(self) -> PartState:
        return PartState({"scale": torch.tensor([self.scale], dtype=torch.float64)}, None)

    def load_state(self, state: PartState) -> None:
        self.scale = float(state.tensors["scale"])


def test_an_objectives_own_state_and_name_travel_in_the_checkpoint():
    from rlkit.core.objective import CLIPPED_SURROGATE
    from rlkit.errors import CheckpointError

    a, b = learner(seed=1), learner(seed=2)
    a.objective, b.objective = Scaled(), Scaled()
    a.objective.scale = 0.375
    tensors, state = a.checkpoint()
    assert state["objective"] == "scaled" and torch.equal(tensors["scaled.scale"], torch.tensor([0.375], dtype=torch.float64))
    b.restore(tensors, state)
    assert b.objective.scale == 0.375
    plain = learner(seed=3)
    assert plain.objective is CLIPPED_SURROGATE and plain.checkpoint()[1]["objective"] == "clip"
    with pytest.raises(CheckpointError, match="trained with the objective 'scaled'; this run's objective is 'clip'"):
        plain.restore(tensors, state)
    legacy = {k: v for k, v in plain.checkpoint()[1].items() if k != "objective"}  # written before the slot
    plain.restore(plain.checkpoint()[0], legacy)
    with pytest.raises(CheckpointError, match="trained with the objective 'clip'"):
        b.restore(plain.checkpoint()[0], legacy)
