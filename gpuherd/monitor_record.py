"""`gpuherd record --tui DIR [--log ...] [-- CMD]`: the live dashboard, recording as it shows.

Builds on gpuherd.monitor (the plan and the app); monitor never imports this module back.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from types import FrameType
from typing import Any

from collectors.base import GpuherdError
from collectors.session_format import EVENT
from gpuherd import exit_codes, monitor
from gpuherd.argcheck import parse_duration
from gpuherd.monitor_logs import COMMAND_TASK, TaskHint
from gpuherd.record.dashboard import DashboardRecording, RecordResult, record_options
from gpuherd.record.recording import RecordingOptions
from gpuherd.sources import log_sources

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def run(args: argparse.Namespace) -> int:
    """Record into `args.record` while the dashboard runs; the command's exit status, or 0/1/2."""
    problem = monitor.terminal_problem()
    if problem is not None:
        _say(f"{problem}; drop --tui to record headless")
        return exit_codes.USAGE
    try:
        duration_s = parse_duration(args.duration) if args.duration else None
    except ValueError as error:
        _say(str(error))
        return exit_codes.USAGE
    argv = list(getattr(args, "child_command", []) or [])
    options = record_options(args.log or [], args.watch or [], argv, args.interval,
                             args.peak_interval)
    try:
        exporter = _metrics(args, options)
    except GpuherdError as error:
        _say(f"{error.title}: {error.msg}")
        return exit_codes.USAGE
    with exporter if exporter is not None else nullcontext():
        return _record(args, DashboardRecording(args.record, options, duration_s), argv,
                       duration_s, exporter)


def _metrics(args: argparse.Namespace, options: RecordingOptions) -> Any:
    """`--serve-metrics`: the exporter, fed through the recording (the dashboard's tap)."""
    if getattr(args, "serve_metrics", None) is None:
        return None
    from gpuherd.export.exporter import for_recording  # prometheus-client only when asked

    exporter = for_recording(args, options)
    if exporter is not None:
        exporter.start()
    return exporter


def _record(args: argparse.Namespace, session: DashboardRecording, argv: list[str],
            duration_s: float | None, exporter: Any) -> int:
    try:
        session.start()
    except GpuherdError as error:
        _say(error.msg)
        return exit_codes.FAILED
    try:
        plan = _plan(args, session, argv, duration_s)
    except BaseException:
        _report(session.finish())
        raise
    if exporter is not None:
        exporter.state.add_hints(plan.task_hints)  # the command's pids: its task's GPUs
        plan.notices.append(f"serving metrics on {exporter.url}")
    monitor.run_app(plan, guard=lambda app: exit_on_signals(app, session))
    return close(session)


def _plan(args: argparse.Namespace, session: DashboardRecording, argv: list[str],
          duration_s: float | None) -> monitor.Plan:
    plan = monitor.live_plan(args.interval)
    # The session directory is never scanned: its `command.log` is the command's task already,
    # and following its `events.jsonl` would feed the recording into itself.
    plan.logs = log_sources(args.log or [], args.watch or [], exclude=[str(session.directory)])
    tails = []
    if session.command_task:
        plan.logs.tails.adopt(session.command_task)  # followed from the start, never twice
        tails.append(plan.logs.tail(session.command_task))
    plan.collectors = [*plan.collectors, *plan.logs.collectors, *tails]
    if session.command_task:
        plan.task_hints.append(TaskHint(session.command_task, label=COMMAND_TASK,
                                        owns_pid=session.owns_pid))
    until = ("the command ends" if argv else
             f"{args.duration} or q" if duration_s is not None else "q")
    plan.notices.append(f"recording into {session.directory} until {until}")
    plan.recording = session
    return plan


@contextmanager
def exit_on_signals(app: Any, session: DashboardRecording) -> Iterator[None]:
    """SIGTERM and SIGHUP act like `q`: the first closes the recording, then the dashboard.

    The tails go on reading while the recording closes, so the logs are recorded to their
    end; a second signal (or `q`) quits at once. The handler runs on the main thread, inside
    the app's event loop; it only schedules the quit there (`call_soon_threadsafe` is the call
    that is safe from a signal handler).
    """
    def handle(signum: int, frame: FrameType | None) -> None:
        session.recording.event(EVENT.signal, signal=signal.Signals(signum).name,
                                forwarded="SIGTERM" if session.child is not None else None)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise KeyboardInterrupt from None  # not inside the app (yet): stop right here
        loop.call_soon_threadsafe(lambda: loop.create_task(app.action_quit()))

    previous: dict[int, Callable[..., Any] | int | None] = {}
    for signum in STOP_SIGNALS:
        previous[signum] = signal.signal(signum, handle)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def close(session: DashboardRecording) -> int:
    """After the dashboard: stop the command if it runs, close the session, print the summary."""
    # The dashboard's tails have stopped with it: nothing reads the logs any more, so closing
    # must not wait for them (what was left unread is reported).
    session.cancel_drain()
    child = session.child
    if child is not None and child.poll() is None:
        _say("stopping the recorded command (SIGTERM; SIGKILL after 10 s)")
    result = session.finish()
    _report(result)
    return session.exit_status(result)


def _report(result: RecordResult) -> None:
    for warning in result.warnings:
        _say(warning)
    if result.error is not None:
        _say(result.error)
    if result.summary:
        print(result.summary, file=sys.stderr, flush=True)


def _say(message: str) -> None:
    print(f"gpuherd: {message}", file=sys.stderr, flush=True)
