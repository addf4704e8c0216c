"""`record --tui` keys: `q` and Ctrl-C leave the viewer, the recording goes on; `k` stops the
command after a confirmation; SIGTERM stops it and quits."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from pathlib import Path

import pytest

from collectors.logs.logtail import LogTailCollector
from gpuherd.dashboard.monitor_record import close, exit_on_signals, record_after_dashboard
from gpuherd.engine.gate import EarlyCollectors
from gpuherd.record.dashboard import DashboardRecording, record_options
from gpuherd.tasks.hints import TaskHint
from tests.app.helpers import T0, ScriptedCollector, gpu_source, tick, until
from tests.app.test_record_tui import SIZE, cell, read_csv_rows
from tui.app import GpuherdApp, make_app
from tui.screens.confirm import ConfirmScreen

SCRIPT = """
import os, sys, time
for step in range(1, 9):
    print(f"step={step * 10} loss={2.0 / step:.4f}", flush=True)
    time.sleep(0.05)
deadline = time.monotonic() + 60
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.02)
for step in range(90, 100):  # written after the dashboard was left
    print(f"step={step} loss=0.5", flush=True)
sys.exit(3)
"""


def started(tmp_path: Path, go: Path) -> tuple[DashboardRecording, GpuherdApp, ScriptedCollector]:
    session = DashboardRecording(
        tmp_path / "session",
        record_options([], [], [sys.executable, "-c", SCRIPT, str(go)], 1.0, 0.0),
    )
    session.start()
    task = session.command_task
    assert task is not None
    gpus = ScriptedCollector("nvml")
    app = make_app(
        [gpus, LogTailCollector(task, poll=True, poll_interval_s=0.05)],
        clock=lambda: T0,
        hostname="box",
        tap=session.tap,
        recording=session,
        task_hints=[TaskHint(task, label="command", owns_pid=session.owns_pid)],
    )
    return session, app, gpus


@pytest.mark.parametrize("key", ["q", "ctrl+c"])
async def test_leaving_the_viewer_leaves_the_command_running_and_recorded_to_its_end(
    tmp_path: Path, key: str
) -> None:
    go = tmp_path / "go"
    session, app, gpus = started(tmp_path, go)
    task = session.command_task
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: cell(app, task, "progress") == "step 80")
        gpus.push(tick(t=T0))
        await pilot.press(key)
        await until(pilot, lambda: not app.is_running, timeout_s=20)
    assert session.child is not None and session.child.poll() is None  # never signalled
    assert not app.running.stopped  # the dashboard left its sources running
    assert any(name.startswith("log:") for name in app.threads.alive())  # still reading
    threading.Timer(0.3, go.touch).start()
    assert record_after_dashboard(session, EarlyCollectors(app.running, app.gate)) == 3
    assert app.threads.alive() == []
    meta = json.loads((session.directory / "meta.json").read_text())
    assert meta["exit_code"] == 3 and meta["ended_at"] is not None
    steps = [
        int(r["step"])
        for r in read_csv_rows(session.directory / "metrics.csv")
        if r["metric"] in ("loss", "train/loss")
    ]
    assert steps == [10 * s for s in range(1, 9)] + list(range(90, 100))
    events = [
        json.loads(line)["kind"]
        for line in (session.directory / "events.jsonl").read_text().splitlines()
    ]
    assert "signal" not in events and events.count("exit") == 1


async def test_ctrl_c_quits_the_plain_dashboard_without_a_hint() -> None:
    app = make_app([gpu_source(tick())], clock=lambda: T0, hostname="box")
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.state.gpu_tick is not None)
        await pilot.press("ctrl+c")
        await until(pilot, lambda: not app.is_running)
        assert not [n for n in app._notifications if "quit" in n.message]


async def test_the_stop_key_asks_first_then_stops_the_command_and_the_dashboard_stays(
    tmp_path: Path,
) -> None:
    go = tmp_path / "never"
    session, app, gpus = started(tmp_path, go)
    task = session.command_task
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: cell(app, task, "progress") == "step 80")
        await pilot.press("k")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")  # keep it running
        await until(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        await pilot.pause(0.3)
        assert session.child is not None and session.child.poll() is None
        await pilot.press("k")
        await until(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await until(
            pilot, lambda: app.record is not None and app.record.result is not None, timeout_s=30
        )
        assert app.is_running  # the dashboard stays, saying where the session is
        assert session.exit_code == 128 + signal.SIGTERM
        await until(pilot, lambda: cell(app, task, "status") == "stopped")
        assert any("recording saved in" in line for line in app.state.notices)
        await pilot.press("q")
        await until(pilot, lambda: not app.is_running)
        gpus.finish()
    assert app.running.stopped
    assert close(session) == 128 + signal.SIGTERM


async def test_sigterm_stops_the_command_closes_the_recording_and_quits(tmp_path: Path) -> None:
    session, app, gpus = started(tmp_path, tmp_path / "never")
    task = session.command_task
    with exit_on_signals(app, session):
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: cell(app, task, "progress") == "step 80")
            os.kill(os.getpid(), signal.SIGTERM)
            await until(pilot, lambda: not app.is_running, timeout_s=30)
            gpus.finish()
    assert session.exit_code == 128 + signal.SIGTERM
    assert close(session) == 143
    meta = json.loads((session.directory / "meta.json").read_text())
    assert meta["exit_code"] == 143 and meta["ended_at"] is not None
