"""`gpuherd parse` on a tracker's store: every run of a TensorBoard, MLflow or W&B store.

Each run is read to its end by the collector that follows it live
(`collectors.trackers.collector.TrackerRunCollector`), so a store prints what the dashboard
and a recording would show; the records are those of a log, with the run's name added.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from collectors.base import CollectorError, CollectorUnavailable
from collectors.trackers import stores
from collectors.trackers.collector import TrackerRunCollector
from collectors.trackers.wandb_run import MISSING as WANDB_MISSING
from gpuherd.parse.trends import TrendHistory
from gpuherd.tasks.view import label_of

Emit = Callable[[dict[str, Any]], None]
Warn = Callable[[str], None]
Number = Callable[[float], Any]


def store_runs(path: str) -> list[stores.TrackerRun] | None:
    """The runs of `path` when it is a tracker's store (or one of its files); else `None`."""
    name = os.path.basename(path)
    if os.path.isfile(path):
        if stores.is_events_file(name) or (name.startswith("run-") and name.endswith(".wandb")):
            return stores.find_runs(os.path.dirname(os.path.abspath(path)))
        with open(path, "rb") as handle:
            if handle.read(16) != b"SQLite format 3\x00":
                return None
        return stores.runs_in_database(os.path.abspath(path))
    if os.path.isdir(path):
        return stores.find_runs(path) or None
    return None


def parse_runs(runs: list[stores.TrackerRun], emit: Emit, warn: Warn, number: Number) -> int:
    """Emit every run's points and findings; the number of points emitted.

    Args:
        runs: the runs, from `store_runs`.
        emit: takes each record (as `gpuherd parse` emits a log's).
        warn: takes each line to say on stderr (a library missing, a damaged file).
        number: a value as strict JSON allows (`parse_command.json_number`).
    """
    total = 0
    for run in runs:
        try:
            total += _parse_run(run, emit, warn, number)
        except CollectorUnavailable as error:
            warn(f"{run.task_id}: {error}")
            break  # the same library is missing for the next run
        except CollectorError as error:
            warn(str(error))
    return total


def _parse_run(run: stores.TrackerRun, emit: Emit, warn: Warn, number_of: Number) -> int:
    collector = TrackerRunCollector(run.task_id, poll_interval_s=0.0)
    collector.open()
    history = TrendHistory()
    count, last_number, label = 0, 0, run.label or label_of(run.task_id)
    if run.kind == stores.WANDB and getattr(collector.reader, "record_class", 1) is None:
        warn(f"{run.task_id}: {WANDB_MISSING}; its console is read")
    try:
        while True:
            try:
                batch = collector.sample()
            except CollectorError as error:  # a damaged file: said, and the rest read
                warn(str(error))
                continue
            label = batch.label or label
            base = {"file": run.task_id, "run": label, "format": batch.format}
            findings = list(batch.findings)
            for number, metric in batch.metrics:
                while findings and findings[0][0] < number:
                    at, finding = findings.pop(0)
                    emit(
                        {**base, "line": at, "finding": finding.kind, "evidence": finding.evidence}
                    )
                for name, value in metric.values:
                    record = {**base, "line": number, "metric": name, "value": number_of(value)}
                    if metric.step is not None:
                        record["step"] = metric.step
                    if metric.taken_at is not None:
                        record["taken_at"] = metric.taken_at
                    emit(record)
                history.add(number, metric)
                count, last_number = count + 1, number
            for number, finding in findings:  # after the last point
                emit(
                    {**base, "line": number, "finding": finding.kind, "evidence": finding.evidence}
                )
            if not collector.backlog:
                break
    finally:
        collector.close()
    history.end_line = history.last_metric_line  # a store holds the run's points to its end
    for number, finding in history.findings():
        emit(
            {
                "file": run.task_id,
                "run": label,
                "line": number or last_number,
                "finding": finding.kind,
                "evidence": finding.evidence,
            }
        )
    return count
