"""The composition root: one tail rule and one discovery interval for every sink."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from collectors.logs.discovery import DiscoveredLog, DiscoveredLogs, DiscoveryCollector
from gpuherd.cli import parse_args
from gpuherd.commands.monitor import options
from gpuherd.dashboard import monitor
from gpuherd.record.recording import RecordingOptions
from gpuherd.sources import DISCOVERY_INTERVAL_S, LiveSources, SourceOptions, TailSupervisor


def log(path: str) -> DiscoveredLog:
    return DiscoveredLog(path, "log", "/runs")


def test_dashboard_and_recording_scan_at_the_same_interval(tmp_path: Path) -> None:
    # Before, the dashboard scanned every 10 s and the recorder every 2 s.
    plan = monitor.build_plan(options(parse_args(["--watch", str(tmp_path)])))
    try:
        scans = [c for c in plan.collectors if isinstance(c, DiscoveryCollector)]
        assert [c.base_interval_s for c in scans] == [DISCOVERY_INTERVAL_S]
    finally:
        assert plan.logs is not None
        plan.logs.close()
    assert RecordingOptions().discovery_interval_s == DISCOVERY_INTERVAL_S == 2.0


def test_each_log_gets_one_tail_and_a_vanished_run_loses_it_where_the_sink_stops_tails(
    tmp_path: Path,
) -> None:
    a, b = str(tmp_path / "a.log"), str(tmp_path / "b.log")
    sources = LiveSources(SourceOptions(logs=[a, b]))
    started: list[Any] = []
    stopped: list[Any] = []
    sources.tails.attach(lambda tail: started.append(tail) or tail.path, stopped.append)
    try:
        first = sources.tails.discovered(DiscoveredLogs(1.0, (log(a),)))
        assert first.first_scan and [x.task_id for x in first.started] == [a]
        second = sources.tails.discovered(DiscoveredLogs(2.0, (log(a), log(b))))
        assert not second.first_scan and [x.task_id for x in second.started] == [b]
        assert [t.name for t in started] == [f"log:{a}", f"log:{b}"]
        gone = sources.tails.discovered(DiscoveredLogs(3.0, (log(b),), removed=(a,)))
        assert gone.stopped == (a,) and stopped == [a] and not sources.tails.is_followed(a)
        back = sources.tails.discovered(DiscoveredLogs(4.0, (log(a), log(b))))
        assert [x.task_id for x in back.started] == [a]  # the run came back: a fresh tail
    finally:
        sources.close()


def test_a_sink_without_stop_keeps_following_a_vanished_run() -> None:
    supervisor = TailSupervisor()  # bookkeeping only, as the dashboard's recording uses it
    supervisor.discovered(DiscoveredLogs(1.0, (log("/runs/a.log"),)))
    gone = supervisor.discovered(DiscoveredLogs(2.0, (), removed=("/runs/a.log",)))
    assert gone.stopped == () and supervisor.is_followed("/runs/a.log")
    again = supervisor.discovered(DiscoveredLogs(3.0, (log("/runs/a.log"),)))
    assert again.started == ()


def test_an_adopted_log_and_a_refused_start_are_not_started_again(tmp_path: Path) -> None:
    a, b = str(tmp_path / "a.log"), str(tmp_path / "b.log")
    sources = LiveSources(SourceOptions(headless=True))
    sources.tails.adopt(a)
    sources.tails.attach(lambda tail: False)  # the recording is stopping
    try:
        changed = sources.tails.discovered(DiscoveredLogs(1.0, (log(a), log(b))))
        assert changed.started == ()
        assert sources.tails.followed == {a, b}
    finally:
        sources.close()
