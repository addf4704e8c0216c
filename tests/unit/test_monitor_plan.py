"""What the dashboard is built from: logs to follow, replayed tasks, and the up-front check."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from collectors.logs.discovery import DiscoveryCollector
from gpuherd.cli import parse_args, typed_options
from gpuherd.common import exit_codes
from gpuherd.dashboard import monitor

SESSIONS = Path(__file__).resolve().parents[1] / "data" / "sessions"


def args(*argv: str) -> Any:
    return typed_options(parse_args(list(argv)))


def test_log_and_watch_add_a_discovery_collector_and_a_tail_supervisor(tmp_path: Path) -> None:
    plan = monitor.build_plan(args("--log", str(tmp_path / "a.log"), "--watch", str(tmp_path)))
    try:
        assert plan.logs is not None and plan.tail is not None
        discovery = [c for c in plan.collectors if isinstance(c, DiscoveryCollector)]
        assert len(discovery) == 1
        found = discovery[0].sample()
        assert [log.task_id for log in found.added] == [str(tmp_path / "a.log")]
        started: list[Any] = []
        plan.tail.attach(started.append)
        assert [log.task_id for log in plan.tail.discovered(found).started] == [
            str(tmp_path / "a.log")
        ]
        assert [tail.name for tail in started] == [f"log:{tmp_path / 'a.log'}"]
        assert plan.tail.discovered(found).started == ()  # one tail per log, never two
        assert len(started) == 1
    finally:
        if plan.logs is not None:
            plan.logs.close()


def test_without_logs_nothing_is_followed() -> None:
    plan = monitor.build_plan(args())
    assert plan.logs is None and plan.tail is None
    assert not any(isinstance(c, DiscoveryCollector) for c in plan.collectors)


def test_a_replay_knows_the_commands_task() -> None:
    plan = monitor.build_plan(args("--replay", str(SESSIONS / "tasks")))
    assert plan.logs is None
    assert [c.name for c in plan.collectors] == ["replay:gpu", "replay:host", "replay:metrics"]
    (hint,) = plan.task_hints
    assert hint.task_id == "command"
    assert hint.gpu_uuids == ("GPU-7a5c0000-1111-2222-3333-444455556666",)
    assert hint.owns_pid is not None and hint.owns_pid(31337) and not hint.owns_pid(1)


def broken_session(tmp_path: Path) -> Path:
    session = Path(shutil.copytree(SESSIONS / "tasks", tmp_path / "s"))
    lines = (session / "metrics.csv").read_text().splitlines(keepends=True)
    lines[-3] = "1764130039.00,command,99,train/loss,not-a-number,400,3\n"
    (session / "metrics.csv").write_text("".join(lines))
    return session


SKIPPED = (
    "metrics.csv: skipped 1 line that could not be read (first: line 85: value: "
    "'not-a-number' is not a number)"
)


def test_a_small_session_is_read_whole_and_its_notes_are_on_the_banner(tmp_path: Path) -> None:
    session = broken_session(tmp_path)
    plan = monitor.build_plan(args("--replay", str(session)))
    assert plan.notices == [f"{session}/{SKIPPED}"]


def test_a_large_session_is_checked_while_it_streams(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = broken_session(tmp_path)
    monkeypatch.setattr(monitor, "CHECK_ALL_MAX_BYTES", 1000)  # the fixture counts as large
    plan = monitor.build_plan(args("--replay", str(session)))
    assert [c.name for c in plan.collectors][-1] == "replay:metrics"
    assert plan.notices == []  # the metrics collector tells it when it gets there


def test_tui_record_refuses_a_replay_and_a_missing_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gpuherd.dashboard import monitor_record

    session = tmp_path / "rec"
    with pytest.raises(SystemExit) as refused:  # the command line refuses it before this
        args("--tui", "--record", str(session), "--replay", str(SESSIONS / "tasks"))
    assert refused.value.code == 2 and "--replay" in capsys.readouterr().err
    # Under pytest stdin is not a terminal: nothing is recorded, nothing is left behind.
    code = monitor_record.run(args("--tui", "--record", str(session), "--", "true"))
    assert code == exit_codes.USAGE == 2
    assert "needs a terminal" in capsys.readouterr().err
    assert not session.exists()


LIVE_DOES_WITHOUT = (
    "collectors.session.session_format",
    "collectors.session.session_reader",
    "collectors.replay.replay",
    "collectors.logs.logtail",
    "parsers.registry",
    "gpuherd.record",
    "gpuherd.session.session",
)
"""Modules the live dashboard's first frame does not need: every one costs start-up time."""


def test_the_live_dashboard_imports_no_session_tail_or_recorder_code() -> None:
    code = (
        "import sys\n"
        "from gpuherd.dashboard import monitor\n"
        "from gpuherd.cli import parse_args, typed_options\n"
        "plan = monitor.build_plan(typed_options(parse_args([])))\n"
        "import tui.app, gpuherd.engine.gate\n"
        f"print([m for m in {LIVE_DOES_WITHOUT!r} if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert out.stdout.strip() == "[]"
