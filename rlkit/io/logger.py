"""The one place rlkit writes TensorBoard scalars, hparams and text.

Tags are grouped: ``charts/`` (returns, lengths, learning rate, steps/s), ``losses/``
(policy, value, entropy, approx_kl, clipfrac, explained variance) and one group per
variant (``outer/``, ``hp3o/``). All of one step's scalars go out as one event (rather than
one event, with its framing and write, per tag as ``add_scalar`` makes them) and read back
exactly like ``add_scalar``'s.

Events are written in the calling thread (:class:`EventFile`), not by TensorBoard's
``FileWriter``, whose writer thread per run computes each record's CRC-32C in pure Python,
holding the GIL: many runs in one process would each keep such a thread busy beside the
training. The record format is
TensorFlow's TFRecord, with the CRC from ``google-crc32c`` where it is installed. Each event goes
to the file in one unbuffered write as it is logged (a few microseconds, once per update), so
TensorBoard sees an update's scalars at once however long the next update takes.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import struct
import time
from pathlib import Path
from typing import Mapping

from tensorboard.compat.proto.event_pb2 import Event, SessionLog
from tensorboard.compat.proto.summary_pb2 import Summary
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as _slow_masked_crc32c
from torch.utils.tensorboard.summary import hparams as hparams_summary
from torch.utils.tensorboard.summary import text as text_summary

try:
    import google_crc32c
except ImportError:  # pragma: no cover - the package is a dependency; the pure-Python CRC is the fallback
    google_crc32c = None

_FILE_NUMBER = itertools.count()


def masked_crc32c(data: bytes) -> int:
    """TFRecord's masked CRC-32C of ``data`` (Castagnoli polynomial, rotated and offset)."""
    if google_crc32c is None:
        return _slow_masked_crc32c(data)
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


class EventFile:
    """One TensorBoard event file of ``run_dir``, written in the calling thread: records framed as
    TFRecords (length, its masked CRC, the serialized event, its masked CRC), named as
    TensorBoard names them (``events.out.tfevents.<second>.<host>.<pid>.<n>``), each record in one
    unbuffered write."""

    def __init__(self, run_dir: str, after: int | None = None) -> None:
        """``after``: a second the file's name must sort after (the newest existing file's)."""
        second = int(time.time())
        if after is not None and after + 1 < 10**10:  # ten digits, as the names sort as text
            second = max(second, after + 1)
        name = f"events.out.tfevents.{second:010d}.{socket.gethostname()}.{os.getpid()}.{next(_FILE_NUMBER)}"
        Path(run_dir).mkdir(parents=True, exist_ok=True)  # as TensorBoard's writer makes a missing one
        self.file = open(Path(run_dir) / name, "ab", buffering=0)
        self.add_event(Event(wall_time=time.time(), file_version="brain.Event:2"))

    def add_event(self, event: Event) -> None:
        data = event.SerializeToString()
        header = struct.pack("<Q", len(data))
        record = memoryview(header + struct.pack("<I", masked_crc32c(header)) + data + struct.pack("<I", masked_crc32c(data)))
        while record:  # a raw write may write part of it
            record = record[self.file.write(record):]

    def add_summary(self, summary: Summary, step: int | None = None) -> None:
        event = Event(wall_time=time.time(), summary=summary)
        if step is not None:
            event.step = int(step)
        self.add_event(event)

    def flush(self) -> None:
        """Nothing is held back: every record is written as it comes."""

    def close(self) -> None:
        if not self.file.closed:
            self.file.close()


class Logger:
    """TensorBoard writer for one run directory.

    ``purge_step`` (on resume) makes TensorBoard drop events a killed run wrote at or after
    that step, so logs are neither duplicated nor lost.
    """

    def __init__(self, run_dir: str, purge_step: int | None = None) -> None:
        self.writer = EventFile(run_dir, _newest_second(run_dir) if purge_step is not None else None)
        if purge_step is not None:  # the events TensorBoard reads as "restart here"
            self.writer.add_event(Event(step=purge_step, file_version="brain.Event:2"))
            self.writer.add_event(Event(step=purge_step, session_log=SessionLog(status=SessionLog.START)))

    def scalars(self, values: Mapping[str, float], step: int) -> None:
        """All of one step's scalars as one event."""
        summary = Summary(value=[Summary.Value(tag=tag, simple_value=float(value)) for tag, value in values.items()])
        self.writer.add_summary(summary, step)

    def config_table(self, config: Mapping[str, object]) -> None:
        """The run's whole config as a markdown table (TensorBoard's TEXT tab, ``hyperparameters``)."""
        rows = "\n".join(f"|{k}|{v}|" for k, v in _flat(config).items())
        self.writer.add_summary(text_summary("hyperparameters", f"|param|value|\n|-|-|\n{rows}"), 0)

    def hparams(self, params: Mapping[str, object]) -> None:
        """``params`` in the HPARAMS tab: the session-start info alone, no experiment summary. With
        no run carrying one, TensorBoard makes the table's columns from every run's session-start
        info and puts the fields whose values differ between runs first (an experiment summary
        would fix the columns as one run wrote them); its metric columns are the runs' scalars.
        Flags read ``true``/``false`` (torch's summary would store them as 1 and 0)."""
        shown = {k: str(v).lower() if isinstance(v, bool) else v for k, v in _flat(params).items()}
        _, session_start, _ = hparams_summary(shown, {})
        self.writer.add_summary(session_start)

    def flush(self) -> None:
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def _flat(params: Mapping[str, object]) -> dict[str, int | float | str | bool]:
    """Each value as TensorBoard keeps it: a number, text or flag as it is, anything else as JSON."""
    return {k: (v if isinstance(v, (int, float, str, bool)) else json.dumps(v, default=_plain))
            for k, v in params.items()}


def _plain(value: object) -> object:
    """What JSON cannot write as it is: numpy numbers and arrays as Python's, anything else as text."""
    tolist = getattr(value, "tolist", None)
    return tolist() if callable(tolist) else str(value)


def _newest_second(run_dir: str) -> int | None:
    """The newest creation second among ``run_dir``'s event file names. TensorBoard reads a run's
    event files in name order, and a resumed run's file must sort after the killed run's for the
    purge to apply to it: it is named one second later (not waited for: another host's clock may
    have named one ahead of this one's)."""
    parts = [p.name.split(".") for p in Path(run_dir).glob("events.out.tfevents.*")]
    stamps = [int(x[3]) for x in parts if len(x) > 3 and x[3].isdigit()]
    return max(stamps) if stamps else None
