"""A task's status says what its log does now: old logs are idle, ended commands end at once."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from collectors.logs.logtail import LogTailCollector
from collectors.replay.replay import SessionReplay
from collectors.samples import GpuTick, LogBatch
from gpuherd.tasks import TaskTracker
from tests.unit.test_tasks import TASK, batch, metric
from tui.tasks import task_row

SESSIONS = Path(__file__).resolve().parents[1] / "data" / "sessions"
LINES = "".join(f"step={s} loss={2.0 / s:.4f} samples/s=845.0\n" for s in range(1, 41))


def read_all(collector: LogTailCollector, tracker: TaskTracker) -> None:
    for _ in range(100):
        found = collector.sample()
        tracker.add_batch(found)
        if found.size_bytes is not None and found.offset_bytes >= found.size_bytes:
            return


def test_an_old_log_opened_with_log_is_idle_until_it_is_written_again(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(LINES)
    written = time.time() - 3600  # last written an hour ago
    os.utime(log, (written, written))
    tail = LogTailCollector(str(log), poll=True, poll_interval_s=0.01, settle_s=0)
    tail.open()
    tracker = TaskTracker()
    try:
        read_all(tail, tracker)
        view = tracker.view(str(log))
        assert view is not None and view.step == 40
        assert view.status == "idle"
        assert task_row(view, None).cell("speed").plain == ""
        with log.open("a") as f:  # the run writes again: it runs
            f.write("step=41 loss=0.0488 samples/s=850.0\n")
        read_all(tail, tracker)
        view = tracker.view(str(log))
        assert view is not None and (view.step, view.status) == (41, "running")
        assert task_row(view, None).cell("speed").plain == "850 samples/s"
    finally:
        tail.close()


def test_idle_and_failed_rows_show_no_speed_or_eta() -> None:
    tracker = TaskTracker()
    for s in range(10):
        tracker.add_batch(batch(100 + s, [metric(step=s * 10, train__loss=1.0, total_steps=1000)]))
    running = tracker.view(TASK)
    assert running is not None and running.status == "running"
    row = task_row(running, None)
    assert row.cell("speed").plain == "10 steps/s" and row.cell("eta").plain != ""
    tracker.add_gpu_tick(GpuTick(100 + 9 + 120, ()))  # two minutes without a line
    idle = tracker.view(TASK)
    assert idle is not None and idle.status == "idle"
    assert (task_row(idle, None).cell("speed").plain, task_row(idle, None).cell("eta").plain) == (
        "",
        "",
    )
    tracker.ended(TASK, 1)
    failed = tracker.view(TASK)
    assert failed is not None and (failed.status, failed.exit_code) == ("failed", 1)
    assert task_row(failed, None).cell("speed").plain == ""


def test_the_command_task_ends_when_the_command_exits_not_a_minute_later() -> None:
    tracker = TaskTracker()
    tracker.add_batch(batch(100, [metric(step=1, train__loss=1.0)]))
    tracker.add_batch(batch(101, [metric(step=2, train__loss=0.9)]))
    tracker.ended(TASK, 0)
    view = tracker.view(TASK)
    assert view is not None and (view.status, view.exit_code) == ("done", 0)
    tracker.add_batch(batch(101.5, [metric(step=3, train__loss=0.8)]))  # its last lines
    view = tracker.view(TASK)
    assert view is not None and (view.status, view.step) == ("done", 3)


def test_a_replay_ends_the_command_task_at_its_recorded_exit(tmp_path: Path) -> None:
    session = tmp_path / "s"
    shutil.copytree(SESSIONS / "tasks", session)
    with (session / "events.jsonl").open("a") as f:
        f.write(json.dumps({"t": 1764130036.0, "kind": "exit", "exit_code": 1}) + "\n")
    replay = SessionReplay(session, speed=1e6)
    metrics = replay.metrics_collector()
    assert metrics is not None
    tracker = TaskTracker()
    statuses: list[tuple[float, str]] = []
    metrics.open()
    try:
        while True:
            try:
                found: LogBatch = metrics.sample()
            except Exception:  # the end of the session
                break
            tracker.add_batch(found)
            view = tracker.view("command")
            if view is not None:
                statuses.append((found.taken_at, view.status))
    finally:
        metrics.close()
    before = [s for t, s in statuses if t < 1764130036.0]
    after = [s for t, s in statuses if t >= 1764130036.0]
    assert before and set(before) == {"running"}
    assert after and set(after) == {"failed"}, statuses
