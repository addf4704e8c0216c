"""`--tui --record`: the dashboard's collectors feed a real `Recording` into a session directory."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest

from collectors.base import Sampled
from collectors.logs.discovery import DiscoveredLog, DiscoveredLogs
from collectors.logs.logtail import LogTailCollector
from collectors.samples import GpuProcess
from collectors.session.session_reader import SessionReader
from gpuherd.record.dashboard import DashboardRecording, record_options
from gpuherd.sources import log_sources
from gpuherd.tasks.hints import TaskHint
from tests.app.helpers import T0, ScriptedCollector, gpu, tick, until
from tests.fakes import FakeCollector
from tui.app import GpuherdApp, make_app
from tui.screens.error import ErrorScreen
from tui.widgets.tasks_panel import TasksPanel

SIZE = (140, 40)
SCRIPT = """
import os, sys, time
for step in range(1, 9):
    print(f"step={step * 10} loss={2.0 / step:.4f}", flush=True)
    time.sleep(0.05)
# Keep running until the test has seen this process on a GPU (it creates the file).
deadline = time.monotonic() + 60
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.02)
print("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB", file=sys.stderr)
sys.exit(3)
"""


def dashboard(session: DashboardRecording, gpus: ScriptedCollector) -> GpuherdApp:
    collectors: list[object] = [gpus]
    hints = []
    if session.command_task:
        collectors.append(LogTailCollector(session.command_task, poll=True, poll_interval_s=0.05))
        hints.append(TaskHint(session.command_task, label="command", owns_pid=session.owns_pid))
    return make_app(
        collectors,
        clock=lambda: T0,
        hostname="box",  # type: ignore[arg-type]
        tap=session.tap,
        recording=session,
        task_hints=hints,
    )


def cell(app: GpuherdApp, key: str, column: str) -> str:
    """The cell's text; empty while the task has no row yet (a wrong column still raises)."""
    table = app.get_default_screen().query_one(TasksPanel)
    if key not in table.rows:
        return ""
    return str(table.get_cell(key, column))


def read_csv_rows(path: Path) -> list[dict[str, str]]:
    import csv

    with path.open(newline="") as f:
        return list(csv.DictReader(f))


async def test_the_command_is_recorded_shown_as_a_task_and_closed_when_it_exits(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "session"
    go = tmp_path / "go"
    options = record_options([], [], [sys.executable, "-c", SCRIPT, str(go)], 1.0, 0.0)
    session = DashboardRecording(directory, options)
    session.start()
    gpus = ScriptedCollector("nvml")
    app = dashboard(session, gpus)
    task = session.command_task
    assert task is not None and session.child is not None
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: cell(app, task, "progress") == "step 80")
        assert cell(app, task, "task") == "command"
        assert cell(app, task, "loss") == "0.25"
        # The command's own pid on GPU 0: its task shows that GPU.
        for i in range(3):
            gpus.push(tick(gpu(0, processes=(GpuProcess(session.child.pid, 1 << 30),)), t=T0 + i))
        await until(pilot, lambda: cell(app, task, "gpu") == "0 87%")
        go.touch()  # now the command may end
        await until(
            pilot, lambda: app.record is not None and app.record.result is not None, timeout_s=20
        )
        await until(pilot, lambda: "OOM" in cell(app, task, "health"))
        assert any(
            "recording saved in" in line and "exit code 3" in line for line in app.state.notices
        )
        gpus.finish()
    meta = json.loads((directory / "meta.json").read_text())
    assert meta["exit_code"] == 3 and meta["ended_at"] is not None
    assert meta["command"][0] == sys.executable
    SessionReader(directory).check()  # every row readable
    rows = read_csv_rows(directory / "metrics.csv")
    losses = [(r["step"], r["value"]) for r in rows if r["metric"] == "train/loss"]
    assert losses == [(str(10 * s), repr(float(f"{2.0 / s:.4f}"))) for s in range(1, 9)]
    assert {r["task"] for r in rows} == {"command"}
    assert len(read_csv_rows(directory / "gpu.csv")) == 3
    events = [json.loads(line) for line in (directory / "events.jsonl").read_text().splitlines()]
    kinds = [e["kind"] for e in events]
    assert "start" in kinds and [e["exit_code"] for e in events if e["kind"] == "exit"] == [3]
    assert any(e["kind"] == "finding" and e["finding"] == "oom" for e in events)
    summary = json.loads((directory / "summary.json").read_text())
    assert summary["session"]["exit_code"] == 3
    assert session.exit_status(session.finish()) == 3  # closing twice is harmless


async def test_without_a_command_quit_closes_the_session(tmp_path: Path) -> None:
    directory = tmp_path / "session"
    session = DashboardRecording(directory, record_options([], [], [], 1.0, 0.0))
    session.start()
    gpus = ScriptedCollector("nvml")
    app = dashboard(session, gpus)
    async with app.run_test(size=SIZE) as pilot:
        for i in range(4):
            gpus.push(tick(t=T0 + i))
        await until(
            pilot, lambda: app.state.gpu_tick is not None and app.state.gpu_tick.taken_at == T0 + 3
        )
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running, timeout_s=20)
        gpus.finish()
    meta = json.loads((directory / "meta.json").read_text())
    assert meta["ended_at"] is not None and "exit_code" not in meta
    assert len(read_csv_rows(directory / "gpu.csv")) == 4
    assert session.exit_status(session.finish()) == 0


async def test_eight_logs_and_the_command_are_all_recorded_and_the_session_closes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Asyncio's default executor sized as on the 2-core host where thread workers filled it
    # (min(32, cpu_count + 4) = 6 threads), whatever machine runs the test.
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    logs = [tmp_path / "runs" / f"run{d}" / f"rank{i}.log" for d in range(4) for i in range(2)]
    for n, log in enumerate(logs):
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("".join(f"step={s} loss={n + 1 / s:.4f}\n" for s in range(1, 6)))
    go = tmp_path / "go"
    pattern = str(tmp_path / "runs" / "*" / "*.log")
    options = record_options([pattern], [], [sys.executable, "-c", SCRIPT, str(go)], 1.0, 0.0)
    session = DashboardRecording(tmp_path / "session", options)
    session.start()
    sources = log_sources([pattern], [], exclude=[str(session.directory)], interval_s=0.5)
    task = session.command_task
    assert task is not None
    gpus = ScriptedCollector("nvml")
    app = make_app(
        [gpus, *sources.collectors, sources.tail(task)],  # as monitor_record builds
        clock=lambda: T0,
        hostname="box",
        tail=sources.tail,
        tap=session.tap,
        recording=session,
        task_hints=[TaskHint(task, label="command", owns_pid=session.owns_pid)],
    )
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(
                pilot,
                lambda: all(cell(app, str(log), "progress") == "step 5" for log in logs),
                timeout_s=30,
            )
            await until(pilot, lambda: cell(app, task, "progress") == "step 80")
            go.touch()  # the command exits: the recording closes by itself
            await until(
                pilot,
                lambda: app.record is not None and app.record.result is not None,
                timeout_s=30,
            )
            assert any(
                "recording saved in" in line and "exit code 3" in line for line in app.state.notices
            )
            gpus.finish()
    finally:
        sources.close()
    rows = read_csv_rows(tmp_path / "session" / "metrics.csv")
    by_task: dict[str, list[tuple[str, str]]] = {}
    for row in rows:
        if row["metric"] == "loss" or row["metric"] == "train/loss":
            by_task.setdefault(row["task"], []).append((row["step"], row["value"]))
    assert set(by_task) == {"command", *(str(log) for log in logs)}
    for n, log in enumerate(logs):
        assert by_task[str(log)] == [(str(s), repr(round(n + 1 / s, 4))) for s in range(1, 6)]
    assert len(by_task["command"]) == 8
    meta = json.loads((tmp_path / "session" / "meta.json").read_text())
    assert meta["exit_code"] == 3 and meta["ended_at"] is not None
    SessionReader(tmp_path / "session").check()


async def test_a_collector_bug_is_shown_and_recorded(tmp_path: Path) -> None:
    session = DashboardRecording(tmp_path / "s", record_options([], [], [], 1.0, 0.0))
    session.start()
    gpus = ScriptedCollector("nvml")
    broken = FakeCollector([RuntimeError("boom in sample")], name="host", role="host")
    app = make_app(
        [gpus, broken],
        clock=lambda: T0,
        hostname="box",  # type: ignore[list-item]
        tap=session.tap,
        recording=session,
    )
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, ErrorScreen))
        assert "boom in sample" in str(app.screen.query_one("#error-details").render())
        assert app.state.status["host"].reason == "crashed: RuntimeError('boom in sample')"
        gpus.finish()
    assert session.finish().error is None
    events = [
        json.loads(line) for line in (tmp_path / "s" / "events.jsonl").read_text().splitlines()
    ]
    bugs = [(e["source"], e["msg"]) for e in events if e["kind"] == "recorder_bug"]
    assert len(bugs) == 1 and bugs[0][0] == "host" and "boom in sample" in bugs[0][1]


def test_logs_found_after_the_first_scan_are_recorded_as_log_found(tmp_path: Path) -> None:
    session = DashboardRecording(tmp_path / "s", record_options([], ["/w"], [], 1.0, 0.0))
    session.start()
    a, b = DiscoveredLog("/w/a.log", "log", "/w"), DiscoveredLog("/w/b.log", "log", "/w")
    session.tap(Sampled("discovery", DiscoveredLogs(T0, (a,), added=(a,))))
    session.tap(Sampled("discovery", DiscoveredLogs(T0 + 2, (a, b), added=(b,))))
    session.tap(Sampled("discovery", DiscoveredLogs(T0 + 4, (a, b))))
    result = session.finish()
    assert result.error is None
    events = [
        json.loads(line) for line in (tmp_path / "s" / "events.jsonl").read_text().splitlines()
    ]
    found = [(e["task"], e["source"]) for e in events if e["kind"] == "log_found"]
    assert found == [("/w/b.log", "/w")]
    # Discovery scans are never written as samples the recorder does not know.
    assert not any(e["kind"] == "sample_not_recorded" for e in events)


def test_a_command_that_does_not_exist_ends_at_once(tmp_path: Path) -> None:
    session = DashboardRecording(
        tmp_path / "s", record_options([], [], ["/nonexistent/gpuherd-test-command"], 1.0, 0.0)
    )
    session.start()
    ended = []
    done = threading.Event()
    session.watch(lambda e: (ended.append(e), done.set()))
    assert done.wait(5)
    assert ended[0].reason == "command" and ended[0].exit_code == 127
    result = session.finish()
    assert session.exit_status(result) == 127
    meta = json.loads((tmp_path / "s" / "meta.json").read_text())
    assert meta["exit_code"] == 127
