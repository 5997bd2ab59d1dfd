"""The one place rlkit writes TensorBoard scalars, hparams and text.

Tags are grouped: ``charts/`` (returns, lengths, learning rate, steps/s), ``losses/``
(policy, value, entropy, approx_kl, clipfrac, explained variance) and one group per
variant (``outer/``, ``hp3o/``). Written through TensorBoard's public ``FileWriter``:
all of one step's scalars go out as one event (one ``add_scalar`` per tag cost ~1 ms per
update on CartPole, ~3% of a run, when profiled) and read back exactly like ``add_scalar``'s.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Mapping

from tensorboard.compat.proto.event_pb2 import Event, SessionLog
from tensorboard.compat.proto.summary_pb2 import Summary
from torch.utils.tensorboard.summary import hparams as hparams_summary
from torch.utils.tensorboard.summary import text as text_summary
from torch.utils.tensorboard.writer import FileWriter


class Logger:
    """TensorBoard writer for one run directory.

    ``purge_step`` (on resume) makes TensorBoard drop events a killed run wrote at or after
    that step, so logs are neither duplicated nor lost.
    """

    def __init__(self, run_dir: str, purge_step: int | None = None) -> None:
        if purge_step is not None:
            _wait_until_newer_than_existing_event_files(run_dir)
        self.writer = FileWriter(run_dir, max_queue=10, flush_secs=30)
        if purge_step is not None:  # the events TensorBoard reads as "restart here"
            self.writer.add_event(Event(step=purge_step, file_version="brain.Event:2"))
            self.writer.add_event(Event(step=purge_step, session_log=SessionLog(status=SessionLog.START)))

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        """All of one step's scalars as one event."""
        summary = Summary(value=[Summary.Value(tag=tag, simple_value=float(value)) for tag, value in values.items()])
        self.writer.add_summary(summary, step)

    def hparams(self, params: Mapping[str, object], metric_tags: list[str]) -> None:
        """The run's hyperparameters as a markdown table and in the hparams plugin."""
        flat = {k: (v if isinstance(v, (int, float, str, bool)) else json.dumps(v)) for k, v in params.items()}
        rows = "\n".join(f"|{k}|{v}|" for k, v in flat.items())
        self.writer.add_summary(text_summary("hyperparameters", f"|param|value|\n|-|-|\n{rows}"), 0)
        for summary in hparams_summary(flat, {tag: 0.0 for tag in metric_tags}):
            self.writer.add_summary(summary)

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def _wait_until_newer_than_existing_event_files(run_dir: str) -> None:
    """TensorBoard reads a run's event files in name order, and names start with the creation
    second. A resumed run's file must sort after the killed run's for the purge to apply to it,
    so wait (at most a second) until the clock has passed every existing file's second."""
    stamps = [int(p.name.split(".")[3]) for p in Path(run_dir).glob("events.out.tfevents.*")
              if p.name.split(".")[3].isdigit()]
    while stamps and time.time() < max(stamps) + 1:
        time.sleep(0.05)
