"""Replaying `metrics.csv` and finding events as log batches, and feeding a task tracker."""

from __future__ import annotations

import math
import shutil
import threading
from pathlib import Path

from collectors.base import Finished, Sampled
from collectors.loop import run_collector
from collectors.replay.replay import SessionReplay
from collectors.replay.replay_metrics import metric_batches
from collectors.samples import LogBatch
from collectors.session.session_reader import SessionReader
from gpuherd.tasks import TaskTracker

SESSIONS = Path(__file__).resolve().parents[1] / "data" / "sessions"
TASKS = SESSIONS / "tasks"
DETR = "/runs/detr/train.log"


def batches(directory: Path, **kwargs: object) -> list[LogBatch]:
    return list(metric_batches(SessionReader(directory), **kwargs))  # type: ignore[arg-type]


def test_rows_of_one_line_become_one_metric_and_findings_come_in_time() -> None:
    found = batches(TASKS)
    first = found[0]
    assert (first.path, first.taken_at, first.lines_read, first.generation) == (
        "command",
        1764130001.0,
        1,
        1,
    )
    line, metric = first.metrics[0]
    assert line == 1 and metric.step == 10 and metric.epoch == 0.0 and metric.taken_at is None
    assert metric.as_dict() == {"train/loss": 2.4661, "throughput/it_s": 11.75}
    times = [b.taken_at for b in found]
    assert times == sorted(times)
    nan = [b for b in found if b.findings]
    assert len(nan) == 1 and nan[0].path == DETR and nan[0].taken_at == 1764130035.75
    assert nan[0].findings[0][0] == 54 and nan[0].findings[0][1].kind == "nan"
    rows = sum(len(m.values) for b in found for _, m in b.metrics)
    assert rows == len((TASKS / "metrics.csv").read_text().splitlines()) - 1


def test_tracker_fed_from_the_replay_shows_metrics_and_the_nan() -> None:
    tracker = TaskTracker()
    for batch in batches(TASKS):
        tracker.add_batch(batch)
    command, detr = tracker.view("command"), tracker.view(DETR)
    assert command is not None and detr is not None
    assert command.step == 300 and dict(command.latest)["val/acc"] == 0.7731
    assert command.throughput_name == "throughput/it_s"
    assert math.isnan(dict(detr.latest)["train/loss"])
    assert "nan" in {f.kind for f in detr.findings}
    assert [x for x, _ in tracker.series("command", "val/acc")] == [100, 200, 300]


def test_a_new_lap_marks_each_task_recreated() -> None:
    again = batches(TASKS, new_lap=True)
    firsts = {}
    for batch in again:
        firsts.setdefault(batch.path, batch)
    assert all(b.recreated for b in firsts.values())
    assert not any(b.recreated for b in again if firsts[b.path] is not b)


def test_log_restart_event_starts_a_new_generation(tmp_path: Path) -> None:
    session = shutil.copytree(TASKS, tmp_path / "s")
    events = (session / "events.jsonl").read_text().splitlines(keepends=True)
    events.insert(
        1, '{"t": 1764130010.75, "kind": "log_restarted", "task": "command", "how": "recreated"}\n'
    )
    (session / "events.jsonl").write_text("".join(events))
    found = [b for b in batches(session) if b.path == "command"]
    after = [b for b in found if b.taken_at > 1764130010.75]
    assert after[0].truncated and after[0].generation == 2
    assert all(b.generation == 1 for b in found if b.taken_at < 1764130010.75)


def test_bad_metric_row_is_skipped_and_counted_with_file_and_line(tmp_path: Path) -> None:
    session = shutil.copytree(TASKS, tmp_path / "s")
    lines = (session / "metrics.csv").read_text().splitlines(keepends=True)
    lines[5] = "1764130003.00,command,3,train/loss,not-a-number,30,0\n"
    lines[6] = lines[6].split(",")
    lines[6][5] = "-7"  # a negative step reads as N/A, the row is kept
    lines[6] = ",".join(lines[6])
    (session / "metrics.csv").write_text("".join(lines))
    reader = SessionReader(session)
    found = list(metric_batches(reader))
    rows = sum(len(m.values) for b in found for _, m in b.metrics)
    assert rows == len(lines) - 2  # the header and the skipped row
    assert reader.warnings == [
        f"{session}/metrics.csv: skipped 1 line that could not be read (first: line 6: value: "
        "'not-a-number' is not a number)",
        f"{session}/metrics.csv: 1 bad cell read as N/A (first: line 7, step: '-7' is outside "
        "0 to 9007199254740991)",
    ]
    assert SessionReplay(session, check_all=True).warnings == reader.warnings


def test_metrics_without_a_required_column_are_ignored_with_a_warning(tmp_path: Path) -> None:
    session = shutil.copytree(TASKS, tmp_path / "s")
    text = (
        (session / "metrics.csv")
        .read_text()
        .replace("t,task,line,metric,value", "t,task,line,name,value", 1)
    )
    (session / "metrics.csv").write_text(text)
    replay = SessionReplay(session)
    assert replay.warnings == [
        f"{session}/metrics.csv:1: missing required column(s): metric; the file is ignored"
    ]
    assert not replay.has_metrics


def test_empty_metrics_file_is_ignored_with_a_warning(tmp_path: Path) -> None:
    session = shutil.copytree(TASKS, tmp_path / "s")
    (session / "metrics.csv").write_text("")
    replay = SessionReplay(session, check_all=True)
    assert any("metrics.csv: empty" in w for w in replay.warnings)
    collector = replay.metrics_collector()
    assert collector is not None  # events.jsonl still has the finding


def test_metrics_collector_replays_in_step_then_finishes() -> None:
    replay = SessionReplay(TASKS, speed=1e6)
    names = [c.name for c in replay.collectors()]
    assert names == ["replay:gpu", "replay:host", "replay:metrics"]
    collector = replay.metrics_collector()
    assert collector is not None
    events: list[object] = []
    run_collector(collector, events.append, threading.Event())
    samples = [e.sample for e in events if isinstance(e, Sampled)]
    assert isinstance(events[-1], Finished)
    assert repr(samples) == repr(batches(TASKS))  # repr: NaN values compare unequal


def test_sessions_without_metrics_have_no_metrics_collector() -> None:
    assert SessionReplay(SESSIONS / "e2e").metrics_collector() is None
