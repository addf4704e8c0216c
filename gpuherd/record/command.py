"""`gpuherd record DIR [--duration T] [--log PATH ...] [-- CMD ARGS...]`, headless.

`record --tui` is gpuherd.dashboard.monitor_record; the router (gpuherd.commands.record) picks one.
"""

from __future__ import annotations

import errno
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from types import FrameType
from typing import Any

from collectors.base import CollectorEvent, Failed, GpuherdError, Unavailable
from collectors.session.session_format import COMMAND_LOG_FILE, EVENT
from gpuherd.common import exit_codes
from gpuherd.common.argcheck import parse_duration
from gpuherd.common.options import RecordOptions
from gpuherd.present.format import visible
from gpuherd.proc.child import ChildCommand, CommandStartError
from gpuherd.record.recording import Recording, RecordingOptions
from gpuherd.session.session import SessionUnsafeError

KILL_GRACE_S = 10.0
"""After --duration runs out, the command gets SIGTERM, then SIGKILL this much later."""
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
POLL_S = 0.5


def _say(message: str) -> None:
    # Messages quote log paths, collectors' errors and the recorder's notes: one shown line.
    _say_plain(visible(f"gpuherd: {message}"))


_SAY_LOCK = threading.Lock()


def _say_plain(text: str) -> None:
    # One write per line, under a lock: collectors say things from their own threads, and
    # print()'s separate write of the newline let two messages run together on one line.
    try:
        with _SAY_LOCK:
            sys.stderr.write(text + "\n")
            sys.stderr.flush()
    except OSError:
        # The terminal is gone (a closed tmux pane): there is nobody to tell, and the
        # recording must go on; everything said here is also in events.jsonl or the summary.
        pass


class _Signals:
    """SIGINT, SIGTERM and SIGHUP from the start of a recording to the end of closing it.

    What a signal does depends on the phase: `on_signal` is swapped as the recording goes on
    (forward to the command, stop recording, or, while the session is closed, stop reading the
    logs to their end and close it with what was read), so a Ctrl-C can never leave a
    half-closed session behind. The default handlers come back for
    the summary, which an interrupt may cut short (it leaves no partial file).
    """

    def __init__(self) -> None:
        self.on_signal: Callable[[int], None] = self.note
        self._previous: dict[int, Any] = {}
        self.pending: list[int] = []

    def note(self, signum: int) -> None:
        """Keep the signal for later (while starting or closing)."""
        self.pending.append(signum)

    def __enter__(self) -> _Signals:
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        self.on_signal(signum)


def record_command(
    recording: Recording,
    argv: Sequence[str],
    deadline: float | None,
    signals: _Signals | None = None,
) -> int:
    """Run the command while recording; its exit status (126/127 when it cannot start).

    A command that --duration stopped is said to be so; `gpuherd record` then exits with
    `exit_codes.OK` (the person asked for that end), while the session keeps the real status.
    """
    signals = signals or _Signals()
    child = ChildCommand(
        argv,
        recording.command_log,
        exit_path=recording.command_exit,
        on_log_error=lambda error: recording.event(
            EVENT.disk_full if error.errno == errno.ENOSPC else EVENT.write_failed,
            file=COMMAND_LOG_FILE,
            msg=str(error),
        ),
    )
    try:
        child.start()
    except CommandStartError as error:
        _say(error.msg)
        recording.event(EVENT.exit, exit_code=error.exit_code, error=error.msg)
        return error.exit_code
    recording.command_started(child.pid)
    done = threading.Event()

    def wait_for_child() -> None:
        child.wait()
        done.set()

    waiter = threading.Thread(target=wait_for_child, daemon=True)
    waiter.start()

    def forward(signum: int) -> None:
        if signum == signal.SIGHUP:
            # Our terminal hung up (a closed pane, a dropped SSH session). The command runs in
            # a session of its own and never saw it; recording goes on until it ends.
            recording.event(
                EVENT.signal,
                signal="SIGHUP",
                forwarded=None,
                note="terminal hung up; the command keeps running",
            )
            return
        sent = child.forward(signum)
        recording.event(
            EVENT.signal,
            signal=signal.Signals(signum).name,
            forwarded=signal.Signals(sent).name if sent else None,
        )

    def stop_for_duration(signum: int) -> None:
        # sent by gpuherd itself: a `signal` event would read as one gpuherd received
        sent = child.forward(signum)
        if sent:  # a command that had ended already was not stopped by the limit
            recording.stopped_at_duration = True
        recording.event(EVENT.duration_reached, sent=signal.Signals(sent).name if sent else None)

    signals.on_signal = forward
    for signum in signals.pending:  # a Ctrl-C while the recording was starting
        forward(signum)
    signals.pending.clear()
    _wait_for_command(recording, done, deadline, stop_for_duration)
    code = child.wait()
    assert code is not None
    child.finish()
    for warning in child.warnings:
        _say(warning)
    dropped = child.log_dropped_bytes
    if dropped:
        _say(
            f"{COMMAND_LOG_FILE} misses {dropped} bytes of the command's output (they could not "
            "be written); they went to the terminal only"
        )
    recording.event(
        EVENT.exit, exit_code=code, **({"log_dropped_bytes": dropped} if dropped else {})
    )
    if recording.stopped_at_duration:
        _say(f"stopped the command at the --duration limit (it exited with code {code})")
    return code


def _wait_for_command(
    recording: Recording, done: threading.Event, deadline: float | None, stop: Callable[[int], None]
) -> None:
    warned = killed = False
    while not done.wait(POLL_S):
        if recording.error is not None and not warned:
            warned = True
            _say(f"{recording.error.msg} The command keeps running; waiting for it.")
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            if not killed:
                _say("--duration reached: stopping the command (SIGTERM)")
                stop(signal.SIGTERM)
                killed, deadline = True, now + KILL_GRACE_S
            else:
                stop(signal.SIGKILL)
                deadline = None


def record_until_stopped(
    recording: Recording, deadline: float | None, signals: _Signals | None = None
) -> bool:
    """Record until --duration, a stop signal or a write failure; True if recording failed."""
    signals = signals or _Signals()
    stop = threading.Event()

    def on_signal(signum: int) -> None:
        recording.event(EVENT.signal, signal=signal.Signals(signum).name, forwarded=None)
        stop.set()

    signals.on_signal = on_signal
    for signum in signals.pending:
        on_signal(signum)
    signals.pending.clear()
    while not stop.is_set() and recording.error is None:
        wait = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
        if wait <= 0:
            break
        stop.wait(wait)
    return recording.error is not None


def finish(recording: Recording, code: int | None, signals: _Signals | None = None) -> int | None:
    """Close the session and write the summary; the recording's exit status if it failed."""
    updates: dict[str, Any] = {}
    if code is not None:
        updates["exit_code"] = code
    if signals is not None:

        def interrupt(signum: int) -> None:  # a stop signal while closing: stop reading logs
            signals.note(signum)
            recording.cancel_drain()

        signals.on_signal = interrupt
    recording.drain_notice = _say
    error = recording.stop(**updates)
    if signals is not None:
        signals.__exit__()
    for warning in recording.warnings:
        _say(warning)
    if error is not None:
        recording.release_directory()
        _say(error.msg)
        return exit_codes.FAILED
    try:
        summary = recording.write_summary()
    except (GpuherdError, OSError) as failure:
        _say(f"could not write the summary: {failure}")
        return None
    # here, not at the top: pandas and the charts cost a third of a second of start-up, and a
    # queued job's launch waits for this command to start
    from gpuherd.summary.report import render_short

    _say_plain(render_short(summary))
    return None


def run(args: RecordOptions) -> int:
    """Record into `args.record`; the recorded command's exit status, or 0/1/2."""
    try:
        deadline_s = None if args.duration is None else parse_duration(args.duration)
    except ValueError as error:
        _say(str(error))
        return exit_codes.USAGE
    argv = list(args.child_command)
    options = RecordingOptions(
        logs=list(args.log or []),
        watch=list(args.watch or []),
        command=argv,
        interval_s=float(args.interval or 1.0),
        peak_interval_s=float(args.peak_interval),
    )
    try:
        exporter = _metrics(args, options)
    except GpuherdError as error:
        _say(error.shown)
        return exit_codes.USAGE
    options.tap = _say_log_problems(options.tap)
    recording = Recording(Path(args.record), options)
    with _Signals() as signals, exporter if exporter is not None else nullcontext():
        try:
            recording.start()
        except SessionUnsafeError as error:
            _say(error.msg)
            return exit_codes.USAGE
        except GpuherdError as error:
            _say(error.msg)
            return exit_codes.FAILED
        try:
            _announce(recording, argv, args.duration if deadline_s else None)
            deadline = None if deadline_s is None else time.monotonic() + deadline_s
            if argv:
                code = record_command(recording, argv, deadline, signals)
                status = finish(recording, code, signals)
                if recording.stopped_at_duration:
                    code = exit_codes.OK  # the person's own limit: no failure
                return code if code != 0 or status is None else status
            failed = record_until_stopped(recording, deadline, signals)
            status = finish(recording, None, signals)
            return exit_codes.FAILED if failed else (status or exit_codes.OK)
        finally:
            recording.stop()  # after an unexpected error: still close the session


def _say_log_problems(
    tap: Callable[[CollectorEvent], None] | None,
) -> Callable[[CollectorEvent], None]:
    """A tap that also says on stderr, once per path and reason, why a log cannot be followed.

    A `--log` that is a FIFO, a directory, unreadable or a symlink loop was only written to
    `events.jsonl`; the person who typed it is told as the recording goes on.
    """
    said: set[tuple[str, str]] = set()

    def on_event(event: CollectorEvent) -> None:
        if tap is not None:
            tap(event)
        if (
            isinstance(event, Failed | Unavailable)
            and event.source.startswith("log:")
            and (event.source, event.error.msg) not in said
        ):
            said.add((event.source, event.error.msg))
            _say(f"not following {event.error.msg}")

    return on_event


def _metrics(args: RecordOptions, options: RecordingOptions) -> Any:
    """`--serve-metrics`: the exporter the recording feeds (serving from now until the end)."""
    if args.serve_metrics is None:
        return None
    from gpuherd.export.exporter import for_recording  # prometheus-client only when asked

    exporter = for_recording(args, options)
    if exporter is not None:
        exporter.start()
        _say(f"serving metrics on {exporter.url}")
    return exporter


def _announce(recording: Recording, argv: Sequence[str], duration: str | None) -> None:
    for warning in recording.writer.warnings if recording.writer else ():
        _say(warning)
    if recording.sampler is not None and recording.sampler.unavailable:
        _say(f"recording without GPU figures: {recording.sampler.unavailable}")
    until = (
        (
            "the command ends"
            if not duration
            else f"the command ends or {duration} (--duration) has passed"
        )
        if argv
        else duration or "Ctrl-C"
    )
    _say(f"recording into {recording.directory} until {until}")
