"""`--tui --record` stopped by SIGTERM or by `q` twice: the logs are read to their end or the gap is
reported."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from collectors.logs.logtail import LogTailCollector
from gpuherd.dashboard.monitor_record import close, exit_on_signals
from gpuherd.record.dashboard import DashboardRecording, record_options
from tests.app.helpers import ScriptedCollector, until
from tests.recorded import loss_steps as steps
from tui.app import make_app

SIZE = (140, 40)


def write_log(path: Path, lines: int) -> None:
    with open(path, "w") as f:
        for first in range(0, lines, 50_000):
            f.write(
                "".join(
                    f"step={i} loss={1 / (i + 1):.6f}\n"
                    for i in range(first, min(lines, first + 50_000))
                )
            )


def dashboard(session: DashboardRecording, log: Path):
    # Polling, so the tail reads its backlog without file events, as slowly as it must.
    tail = LogTailCollector(str(log), poll=True, poll_interval_s=0.05)
    return make_app(
        [ScriptedCollector("nvml"), tail],
        tap=session.tap,  # type: ignore[list-item]
        recording=session,
        hostname="box",
    )


async def test_sigterm_closes_the_recording_with_every_line_before_the_dashboard(
    tmp_path: Path,
) -> None:
    # SIGTERM used to exit the dashboard at once: its tails stopped, and the recording then
    # waited 3 s for them in vain, losing the rest of the log without a word.
    log, root = tmp_path / "train.log", tmp_path / "s"
    write_log(log, 300_000)
    session = DashboardRecording(root, record_options([str(log)], [], [], 1.0, 0.0))
    session.start()
    app = dashboard(session, log)
    with exit_on_signals(app, session):
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: session.recording.log_sink.offsets.get(str(log), 0) > 0)
            os.kill(os.getpid(), signal.SIGTERM)
            await until(pilot, lambda: not app.is_running, timeout_s=120)
    assert close(session) == 0
    assert steps(root) == list(range(300_000))
    kinds = [json.loads(line)["kind"] for line in (root / "events.jsonl").read_text().splitlines()]
    assert "signal" in kinds and "log_dropped" not in kinds


async def test_q_twice_quits_at_once_and_reports_what_was_not_read(tmp_path: Path) -> None:
    log, root = tmp_path / "train.log", tmp_path / "s"
    write_log(log, 3_000_000)
    size = log.stat().st_size
    session = DashboardRecording(root, record_options([str(log)], [], [], 1.0, 0.0))
    session.start()
    app = dashboard(session, log)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: session.recording.log_sink.offsets.get(str(log), 0) > 0)
        await pilot.press("q")  # closing starts: the tails go on reading
        await pilot.pause(0.5)
        await pilot.press("q")  # quit now
        await until(pilot, lambda: not app.is_running, timeout_s=60)
    result = session.finish()
    [dropped] = [
        e
        for e in map(json.loads, (root / "events.jsonl").read_text().splitlines())
        if e["kind"] == "log_dropped"
    ]
    assert dropped["reason"] == "interrupted"
    recorded = size - dropped["unread_bytes"]
    with open(log, "rb") as f:
        assert steps(root) == list(range(f.read(recorded).count(b"\n")))
    assert result.warnings == [dropped["msg"]]
