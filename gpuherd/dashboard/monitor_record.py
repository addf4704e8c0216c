"""`gpuherd record --tui DIR [--log ...] [-- CMD]`: the live dashboard, recording as it shows.

Builds on gpuherd.dashboard.monitor (the plan and the app); monitor never imports this module back.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from types import FrameType
from typing import Any

from collectors.base import GpuherdError
from collectors.session.session_format import EVENT
from gpuherd.common import exit_codes
from gpuherd.common.argcheck import parse_duration
from gpuherd.common.options import RecordOptions
from gpuherd.dashboard import monitor
from gpuherd.engine.gate import EarlyCollectors
from gpuherd.present.format import visible
from gpuherd.record.dashboard import DashboardRecording, RecordResult, record_options
from gpuherd.record.recording import RecordingOptions
from gpuherd.session.session import SessionUnsafeError
from gpuherd.sources import LogSources
from gpuherd.tasks.hints import COMMAND_TASK, TaskHint

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
POLL_S = 0.5
"""How often the command is looked at while recording after the dashboard."""


def run(args: RecordOptions) -> int:
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
    options = record_options(
        args.log or [], args.watch or [], argv, args.interval, args.peak_interval
    )
    try:
        exporter = _metrics(args, options)
    except GpuherdError as error:
        _say(error.shown)
        return exit_codes.USAGE
    with exporter if exporter is not None else nullcontext():
        return _record(
            args, DashboardRecording(args.record, options, duration_s), argv, duration_s, exporter
        )


def _metrics(args: RecordOptions, options: RecordingOptions) -> Any:
    """`--serve-metrics`: the exporter, fed through the recording (the dashboard's tap)."""
    if getattr(args, "serve_metrics", None) is None:
        return None
    from gpuherd.export.exporter import for_recording  # prometheus-client only when asked

    exporter = for_recording(args, options)
    if exporter is not None:
        exporter.start()
    return exporter


def _record(
    args: RecordOptions,
    session: DashboardRecording,
    argv: list[str],
    duration_s: float | None,
    exporter: Any,
) -> int:
    try:
        session.start()
    except SessionUnsafeError as error:
        _say(error.msg)
        return exit_codes.USAGE
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
    monitor.run_app(plan, guard=lambda app: exit_on_signals(app, session), close_logs=False)
    try:
        assert plan.running is not None
        if not plan.running.running.stopped:  # the dashboard left the recording running
            return record_after_dashboard(session, plan.running)
        return close(session)
    finally:
        if plan.logs is not None:
            plan.logs.close()


def _plan(
    args: RecordOptions, session: DashboardRecording, argv: list[str], duration_s: float | None
) -> monitor.Plan:
    # The session directory is never scanned: its `command.log` is the command's task already,
    # and following its `events.jsonl` would feed the recording into itself.
    plan = monitor.live_plan(
        args.interval, logs=args.log or [], watch=args.watch or [], exclude=[str(session.directory)]
    )
    if session.command_task:
        if plan.logs is None:
            assert plan.sources is not None
            plan.logs = LogSources(plan.sources, [])
        plan.logs.tails.adopt(session.command_task)  # followed from the start, never twice
        plan.collectors = [*plan.collectors, plan.logs.tail(session.command_task)]
    if session.command_task:
        plan.task_hints.append(
            TaskHint(session.command_task, label=COMMAND_TASK, owns_pid=session.owns_pid)
        )
    until = (
        "the command ends" if argv else f"{args.duration} or q" if duration_s is not None else "q"
    )
    plan.notices.append(f"recording into {session.directory} until {until}")
    plan.recording = session
    return plan


@contextmanager
def exit_on_signals(app: Any, session: DashboardRecording) -> Iterator[None]:
    """SIGTERM stops the command and closes the recording, then the dashboard; SIGHUP acts like `q`.

    SIGTERM asks gpuherd to stop: the command gets SIGTERM, the tails go on reading while the
    recording closes, so the logs are recorded to their end; a second signal (or `q`) quits at
    once. SIGHUP (the terminal went away) leaves the dashboard as `q` does: a running command
    is recorded to its end, headless. The handler runs on the main thread, inside the app's
    event loop; it only schedules the action there (`call_soon_threadsafe` is the call that is
    safe from a signal handler).
    """

    def handle(signum: int, frame: FrameType | None) -> None:
        stops = signum == signal.SIGTERM
        session.recording.event(
            EVENT.signal,
            signal=signal.Signals(signum).name,
            forwarded="SIGTERM" if stops and session.child is not None else None,
        )
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise KeyboardInterrupt from None  # not inside the app (yet): stop right here
        action = app.stop_and_quit if stops else app.action_quit
        loop.call_soon_threadsafe(lambda: loop.create_task(action()))

    previous: dict[int, Callable[..., Any] | int | None] = {}
    for signum in STOP_SIGNALS:
        previous[signum] = signal.signal(signum, handle)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def record_after_dashboard(session: DashboardRecording, early: EarlyCollectors) -> int:
    """The dashboard was left while the command runs: record it to its end, headless.

    The running set goes on without the dashboard (`GpuherdApp.on_unmount` left it), its
    recording sink attached and its sources still wired to each other; this process stays
    the recorder, in the foreground of the terminal it was started from, and says how to stop
    the command. SIGINT (Ctrl-C) and SIGTERM go to the command's process group, as with
    `gpuherd record`; SIGHUP (a closed terminal) is noted and the recording goes on. When the
    command has ended the logs are read to their end, the session is closed and the sources
    stopped; the exit status is the command's.
    """
    early.running.detach(early.gate.emit)  # nobody shows events any more
    directory, pid = session.directory, os.getpid()
    _say(f"left the dashboard; still recording into {directory} until the command ends")
    _say(
        f"the command's output goes to {session.recording.command_log}; to stop the "
        f"command: Ctrl-C here, or kill -INT {pid}"
    )
    child = session.child
    try:
        with _forwarding(session):
            while child is not None and child.wait(POLL_S) is None:
                pass
            result = session.finish()  # the tails still run: the logs are read to their end
    finally:
        for name in early.running.stop():
            _say(f"the {name} collector did not stop; abandoned at exit")
    _report(result)
    return session.exit_status(result)


@contextmanager
def _forwarding(session: DashboardRecording) -> Iterator[None]:
    """SIGINT and SIGTERM go to the command's group; SIGHUP is noted (the command runs on).

    Once the command has ended, SIGINT or SIGTERM stops reading the logs to their end: the
    session closes with what was read, and says how much was not.
    """

    def handle(signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        child = session.child
        if signum != signal.SIGHUP and (child is None or child.poll() is not None):
            session.cancel_drain()  # closing: stop reading the logs, close with what was read
            return
        if signum == signal.SIGHUP or child is None:
            session.recording.event(
                EVENT.signal,
                signal=name,
                forwarded=None,
                note="terminal hung up; the command keeps running"
                if signum == signal.SIGHUP
                else None,
            )
            return
        sent = child.forward(signum)
        session.recording.event(
            EVENT.signal, signal=name, forwarded=signal.Signals(sent).name if sent else None
        )
        if sent:
            _say(f"sent {signal.Signals(sent).name} to the command; recording until it ends")

    signums = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {signum: signal.signal(signum, handle) for signum in signums}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


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
        _say_plain(result.summary)


def _say(message: str) -> None:
    _say_plain(visible(f"gpuherd: {message}"))


def _say_plain(text: str) -> None:
    try:
        print(text, file=sys.stderr, flush=True)
    except OSError:
        pass  # the terminal is gone (a closed pane); the session holds what matters
