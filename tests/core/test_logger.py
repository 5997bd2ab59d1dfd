"""The TensorBoard event files rlkit writes in the calling thread: TensorBoard reads back what was
written, the CRC is TFRecord's, and nothing waits on a writer thread."""

import threading

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as tensorboards_crc

from rlkit.io.logger import Logger, masked_crc32c


@pytest.mark.parametrize("data", [b"", b"abc", bytes(range(256)) * 5])
def test_the_crc_is_tensorboards_masked_crc32c(data):
    assert masked_crc32c(data) == tensorboards_crc(data)


def test_tensorboard_reads_back_every_scalar_at_its_step_with_no_writer_thread(tmp_path):
    before = threading.active_count()
    log = Logger(str(tmp_path))
    assert threading.active_count() == before
    for step in range(1, 6):
        log.scalars({"losses/loss": 0.5 * step, "charts/steps_per_second": 1000.0 + step}, step * 128)
    log.config_table({"lr": 3e-4, "env": "CartPole-v1"})
    log.hparams({"lr": 3e-4, "env": "CartPole-v1"})
    log.close()
    acc = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0})
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("losses/loss")] == [(s * 128, 0.5 * s) for s in range(1, 6)]
    assert [e.value for e in acc.Scalars("charts/steps_per_second")] == [1000.0 + s for s in range(1, 6)]
    assert "hyperparameters/text_summary" in acc.Tags()["tensors"]


def test_a_resumed_runs_purge_drops_the_killed_runs_later_events(tmp_path):
    first = Logger(str(tmp_path))
    for step in (100, 200, 300):
        first.scalars({"losses/loss": float(step)}, step)
    first.close()
    second = Logger(str(tmp_path), purge_step=200)
    second.scalars({"losses/loss": -1.0}, 200)
    second.close()
    acc = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0})
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("losses/loss")] == [(100, 100.0), (200, -1.0)]


def test_each_event_is_on_disk_as_soon_as_it_is_logged(tmp_path):
    log = Logger(str(tmp_path))
    path = next(tmp_path.glob("events.out.tfevents.*"))
    sizes = [path.stat().st_size]
    for step in (1, 2):
        log.scalars({"losses/loss": float(step)}, step)
        sizes.append(path.stat().st_size)
    acc = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0})
    acc.Reload()  # read while the logger is still open
    assert sizes[0] < sizes[1] < sizes[2] and [e.value for e in acc.Scalars("losses/loss")] == [1.0, 2.0]
    log.close()


def test_a_fresh_runs_config_is_written_before_its_first_event_file(tmp_path, monkeypatch):
    """A run killed once its event file exists holds its ``config.json`` too, so a resume (a sweep's
    rerun) starts it again from its beginning instead of finding no run there."""
    import rlkit
    from rlkit.core import loop

    seen = []

    class Checked(Logger):
        def __init__(self, run_dir, purge_step=None):
            seen.append((tmp_path / "r" / "config.json").is_file())
            super().__init__(run_dir, purge_step)

    monkeypatch.setattr(loop, "Logger", Checked)
    rlkit.train(rlkit.preset("cartpole", total_steps=512, eval_episodes=0, progress=False, logdir=str(tmp_path),
                             run_name="r"))
    assert seen == [True]


def test_a_resumed_runs_file_sorts_after_a_file_named_ahead_of_the_clock_without_waiting(tmp_path, monkeypatch):
    """The logger's clock stands still here: waiting for it to pass the other file's second would
    never end (the thread is given a minute, a bound on a hang only), and sleeping is refused."""
    import time
    from types import SimpleNamespace

    from rlkit.io import logger

    now = int(time.time())
    ahead = now + 30  # another host's clock, or a skewed one
    (tmp_path / f"events.out.tfevents.{ahead:010d}.elsewhere.1.0").write_bytes(b"")
    slept = []
    monkeypatch.setattr(logger, "time", SimpleNamespace(time=lambda: float(now), sleep=slept.append))
    monkeypatch.setattr(time, "sleep", slept.append)
    done = threading.Event()

    def resume():
        Logger(str(tmp_path), purge_step=5).close()
        done.set()

    threading.Thread(target=resume, daemon=True).start()
    assert done.wait(60) and slept == []
    names = sorted(p.name for p in tmp_path.glob("events.out.tfevents.*"))
    assert len(names) == 2 and names[-1].split(".")[3] == f"{ahead + 1:010d}"


def test_hyperparameters_take_numpy_numbers_and_nested_values(tmp_path):
    import numpy as np

    log = Logger(str(tmp_path))
    params = {"seed": np.int64(3), "lr": np.float32(3e-4), "sizes": [np.int64(64), 64], "shape": np.arange(2),
              "env": "CartPole-v1", "other": {"a": object}}
    log.config_table(params)
    log.hparams(params)
    log.close()
    acc = EventAccumulator(str(tmp_path), size_guidance={"tensors": 0})
    acc.Reload()
    text = acc.Tensors("hyperparameters/text_summary")[0].tensor_proto.string_val[0].decode()
    assert "|seed|3|" in text and "|sizes|[64, 64]|" in text and "|shape|[0, 1]|" in text and "|env|CartPole-v1|" in text
