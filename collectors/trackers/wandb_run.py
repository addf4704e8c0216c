"""Follow one W&B run directory (`wandb/offline-run-*/`, `wandb/run-*/`).

The metric history is in `run-<id>.wandb`, W&B's record log of protobuf `Record` messages:
the log is cut by `framing.WandbLogReader`, history rows are read in place
(`wandb_wire.HistoryReader`) and the other records it reads are decoded with the `Record`
class the `wandb` package ships (`wandb.proto.wandb_internal_pb2`), whose descriptors give
the field numbers the in-place reading uses; without the package only the
console (`files/output.log`) and `files/wandb-summary.json` are read, and the task says what
to install. The console is digested as a log, by the same code that follows any log.
"""

from __future__ import annotations

import glob
import importlib
import json
import os
from typing import Any

from collectors.trackers.common import READ_BUDGET_BYTES, RunRead
from collectors.trackers.framing import FramingError, WandbLogReader, record_intact
from collectors.trackers.wandb_wire import HistoryReader, RecordNumbers, RecordTags, row_metric
from parsers.model import LogMetric
from parsers.text import metric_name

MISSING = "the W&B history (run-*.wandb) needs the wandb package: install 'gpuherd[wandb]'"


def load_record_class() -> Any | None:
    """The `Record` message class of wandb, or `None` when wandb is not installed."""
    try:
        # the module picks its generated code by protobuf's version: its names are dynamic
        module = importlib.import_module("wandb.proto.wandb_internal_pb2")
    except ImportError:
        return None
    return getattr(module, "Record", None)


def is_run_dir(path: str) -> bool:
    """A W&B run directory: `offline-run-*` or `run-*` holding a `run-<id>.wandb` file."""
    name = os.path.basename(path.rstrip(os.sep))
    return name.startswith(("offline-run-", "run-")) and bool(
        glob.glob(os.path.join(glob.escape(path), "run-*.wandb"))
    )


class WandbRun:
    """The history, exit and name of one W&B run, read by offset from its `.wandb` file."""

    def __init__(self, run_dir: str) -> None:
        self.run_dir = run_dir
        self.record_class = load_record_class()
        self._history = (
            None
            if self.record_class is None
            else HistoryReader(RecordTags.of(RecordNumbers.of(self.record_class)))
        )
        self._log = WandbLogReader()
        self._path: str | None = None
        self._label = os.path.basename(run_dir.rstrip(os.sep))
        self._status: str | None = None
        self.damaged: str | None = None
        self._summary_stamp: int | None = None

    def read(self, budget_bytes: int = READ_BUDGET_BYTES) -> RunRead:
        """New history rows; the run's name and, once it exited, its end state."""
        if self._path is None:
            found = sorted(glob.glob(os.path.join(glob.escape(self.run_dir), "run-*.wandb")))
            self._path = found[-1] if found else None
        out = RunRead(label=self._label, file_path=self._path)
        if self.record_class is None:
            self._read_summary(out)  # the final values, at least, without the history
            return out
        if self._path is None:
            return out
        try:
            with open(self._path, "rb") as handle:
                stat = os.fstat(handle.fileno())
                out.size_bytes, out.modified_at = stat.st_size, stat.st_mtime
                handle.seek(self._log.offset)
                data = b"" if self.damaged else handle.read(budget_bytes)
        except OSError:
            return out
        unchecked: list[int] = []  # the records read are checked as they are read
        try:
            records, used = self._log.feed(data, unchecked)
        except FramingError as error:
            self.damaged, records, used = f"{os.path.basename(self._path)}: {error}", [], 0
        try:
            self._read_records(records, unchecked, out)
        except FramingError as error:  # the rows before it are kept; reading stops there
            self.damaged = (
                f"{os.path.basename(self._path)}: {error} (before byte {self._log.offset})"
            )
        out.label, out.status = self._label, self._status
        out.read_bytes = self._log.offset
        out.more = not self.damaged and used > 0 and len(data) >= budget_bytes
        return out

    def _read_summary(self, out: RunRead) -> None:
        path = os.path.join(self.run_dir, "files", "wandb-summary.json")
        try:
            stamp = os.stat(path).st_mtime_ns
        except OSError:
            return
        if stamp != self._summary_stamp:
            self._summary_stamp = stamp
            summary = read_summary(self.run_dir)
            if summary is not None:
                out.metrics.append(summary)

    def _read_records(self, records: list[bytes], unchecked: list[int], out: RunRead) -> None:
        """Read `records` in their order: history rows in place, the rest by wandb's class.

        Run and exit records, and any record of a layout the walk does not follow, are
        decoded by wandb's class. Each record read is checked against its checksum
        (`unchecked`, from the log reader); one passed over is not.

        Raises:
            FramingError: a record read whose checksum does not match.
        """
        assert self._history is not None
        index, count, metrics = 0, len(records), out.metrics
        while index < count:
            index = self._history.read(records, index, metrics, unchecked)
            if index < count:
                if not record_intact(records[index], unchecked[index]):
                    raise FramingError("W&B chunk checksum does not match")
                self._decode_record(records[index], out)
                index += 1

    def _decode_record(self, raw: bytes, out: RunRead) -> None:
        assert self.record_class is not None
        try:
            record = self.record_class.FromString(raw)
        except Exception:  # noqa: BLE001 - protobuf's DecodeError: one damaged record
            return
        kind = record.WhichOneof("record_type")
        if kind == "history":
            assert self._history is not None
            metric = _decoded_row(record.history, self._history.names)
            if metric is not None:
                out.metrics.append(metric)
        elif kind == "run":
            run = record.run
            name = run.display_name or run.run_id
            self._label = f"{run.project}/{name}" if run.project else name
        elif kind == "exit":
            self._status = "FINISHED" if record.exit.exit_code == 0 else "FAILED"


def read_summary(run_dir: str) -> LogMetric | None:
    """The run's final values from `files/wandb-summary.json`, when W&B wrote it."""
    path = os.path.join(run_dir, "files", "wandb-summary.json")
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    step = data.get("_step")
    values = tuple(
        (metric_name(str(k)), float(v))
        for k, v in data.items()
        if not str(k).startswith("_") and isinstance(v, int | float) and not isinstance(v, bool)
    )
    stamp = data.get("_timestamp")
    return (
        LogMetric(
            values,
            step if isinstance(step, int) else None,
            taken_at=float(stamp) if isinstance(stamp, int | float) else None,
        )
        if values
        else None
    )


def _decoded_row(history: Any, names: dict[bytes, str]) -> LogMetric | None:
    """The metric of a `HistoryRecord` decoded by wandb's class, as read in place."""
    items: list[tuple[bytes, bytes]] = []
    step_values: list[bytes] = []
    timestamp: bytes | None = None
    for item in history.item:
        keys = item.nested_key
        key = keys[0] if len(keys) == 1 else ("/".join(keys) or item.key)
        value = item.value_json.encode()
        if key and key[0] != "_":
            items.append((key.encode(), value))
        elif key == "_timestamp":
            timestamp = value
        elif key == "_step":
            step_values.append(value)
    step = history.step.num if history.HasField("step") else None
    return row_metric(items, step, step_values, timestamp, names)
