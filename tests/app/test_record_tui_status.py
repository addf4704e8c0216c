"""`record --tui`: the command row ends at its exit; the banner then says where the session is."""

from __future__ import annotations

import sys
from pathlib import Path

from collectors.logs.logtail import LogTailCollector
from gpuherd.record.dashboard import DashboardRecording, record_options
from gpuherd.tasks.hints import TaskHint
from tests.app.helpers import T0, ScriptedCollector, until
from tests.app.test_record_tui import SCRIPT, SIZE, cell
from tui.app import make_app


async def test_the_command_row_ends_at_the_exit_and_the_banner_is_replaced(tmp_path: Path) -> None:
    directory = tmp_path / "session"
    go = tmp_path / "go"
    session = DashboardRecording(
        directory, record_options([], [], [sys.executable, "-c", SCRIPT, str(go)], 1.0, 0.0)
    )
    session.start()
    task = session.command_task
    assert task is not None
    notice = f"recording into {directory} until the command ends"
    gpus = ScriptedCollector("nvml")
    app = make_app(
        [gpus, LogTailCollector(task, poll=True, poll_interval_s=0.05)],
        clock=lambda: T0,
        hostname="box",
        tap=session.tap,
        recording=session,
        notices=[notice],
        task_hints=[TaskHint(task, label="command", owns_pid=session.owns_pid)],
    )
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: cell(app, task, "progress") == "step 80")
        assert cell(app, task, "status") == "running"
        assert app.state.notices == [notice]
        go.touch()  # the command exits with status 3
        await until(
            pilot, lambda: app.record is not None and app.record.result is not None, timeout_s=20
        )
        # at once, not 60 s after its last line
        await until(pilot, lambda: cell(app, task, "status") == "failed", timeout_s=5)
        assert cell(app, task, "speed") == ""
        assert app.state.notices == [f"recording saved in {directory} (command exit code 3)"]
        gpus.finish()
