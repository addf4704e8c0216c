"""`--tui --record`: the dashboard's collectors feed a `Recording`; the command runs as headless."""

from __future__ import annotations

import glob
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from collectors.base import CollectorEvent, Crashed, GpuherdError, Sampled
from collectors.machine.writers import WritersTick
from collectors.samples import DiscoveredLogs, LogBatch
from collectors.session.session_format import COMMAND_LOG_FILE, EVENT
from gpuherd.proc.child import ChildCommand, CommandStartError
from gpuherd.proc.tree import ProcessTree
from gpuherd.record.recording import Recording, RecordingOptions
from gpuherd.sources import TailSupervisor

POLL_S = 0.2
KILL_GRACE_S = 10.0
"""After SIGTERM (quit, --duration), the command gets this long before SIGKILL."""


@dataclass(frozen=True, slots=True)
class RecordingEnded:
    """Why the dashboard's recording is ending (sent from the watching thread)."""

    reason: str
    """`command` (it exited), `duration` (--duration ran out) or `write_failed` (disk full)."""
    exit_code: int | None = None
    msg: str | None = None


@dataclass
class RecordResult:
    """How closing the recording went, for the dashboard and for stderr at exit."""

    directory: Path
    error: str | None = None
    """Why the session could not be closed cleanly (disk full, a hung filesystem)."""
    summary: str | None = None
    """The short summary, as `--record` prints it."""
    warnings: list[str] = field(default_factory=list)


class DashboardRecording:
    """One recording shown live: `start()` before the dashboard, `finish()` when done.

    The dashboard calls `tap` with every collector event (on collector threads) and `watch`
    once it can receive `RecordingEnded` (the command exited, --duration ran out, or a write
    failed). `finish` stops the command if it still runs, then closes the session and writes
    the summary; it is thread-safe and does its work once.
    """

    def __init__(
        self, directory: str | Path, options: RecordingOptions, duration_s: float | None = None
    ) -> None:
        self.recording = Recording(Path(directory), options)
        self.argv = list(options.command)
        self.duration_s = duration_s
        self.child: ChildCommand | None = None
        self.exit_code: int | None = None
        self._tree: ProcessTree | None = None
        self._seen = TailSupervisor()
        """Sees the dashboard's scans: the same rule tells which logs its tails now follow."""
        self._logs: set[str] = set()
        self._lock_logs = threading.Lock()
        self._lock = threading.Lock()
        self._exit_lock = threading.Lock()
        self._result: RecordResult | None = None
        self._deadline: float | None = None

    @property
    def directory(self) -> Path:
        """The session directory."""
        return self.recording.directory

    @property
    def command_task(self) -> str | None:
        """The task id of the command's own output (`command.log`), when there is a command."""
        return str(self.recording.command_log) if self.argv else None

    def start(self) -> None:
        """Open the session and start the command; `GpuherdError` when recording cannot start.

        A command that cannot run at all (127, 126) is recorded as such; the dashboard learns
        it from `watch` as an ended command.
        """
        self.recording.start()
        if self.duration_s is not None:
            self._deadline = time.monotonic() + self.duration_s
        if not self.argv:
            return
        child = ChildCommand(
            self.argv, self.recording.command_log, echo=False, on_log_error=self._log_error
        )
        try:
            child.start()
        except CommandStartError as error:
            self.exit_code = error.exit_code
            self.recording.event(EVENT.exit, exit_code=error.exit_code, error=error.msg)
            return
        self.child = child
        self._tree = ProcessTree(child.pid)
        self.recording.command_started(child.pid)

    def _log_error(self, error: OSError) -> None:
        self.recording.event(
            EVENT.disk_full if error.errno == 28 else EVENT.write_failed,
            file=COMMAND_LOG_FILE,
            msg=str(error),
        )

    def tap(self, event: CollectorEvent) -> None:
        """Record one collector event of the dashboard (thread-safe).

        Discovery scans are not recorded as samples: the dashboard starts the tails (whose
        batches are recorded), and each log found after the start becomes a `log_found` event.
        """
        if isinstance(event, Sampled):
            if isinstance(event.sample, DiscoveredLogs):
                self._discovered(event.sample)
                return
            if isinstance(event.sample, WritersTick):
                return  # who writes a log is the dashboard's business; the session has no column
            if isinstance(event.sample, LogBatch) and event.sample.path not in self._logs:
                with self._lock_logs:
                    self._logs.add(event.sample.path)
        self.recording.emit(event)

    def crashed(self, source: str, error: BaseException) -> None:
        """A dashboard collector died of a bug: record it as `--record` does."""
        self.recording.emit(Crashed(source, error))

    def _discovered(self, found: DiscoveredLogs) -> None:
        # Called on the discovery collector's one thread. What the first scan finds was
        # there at the start; `--record` writes `log_found` only for what came later.
        with self._lock_logs:  # `_drain` reads what is followed from another thread
            changed = self._seen.discovered(found)
        for log in changed.started if not changed.first_scan else ():
            self.recording.event(EVENT.log_found, task=log.task_id, source=log.source)

    def owns_pid(self, pid: int) -> bool:
        """Whether `pid` is the command or one of its descendants (for its task's GPU)."""
        return self._tree is not None and self._tree.contains(pid)

    def watch(self, on_end: Callable[[RecordingEnded], object]) -> threading.Thread:
        """Start the thread that reports the command's exit, --duration and write failures."""
        thread = threading.Thread(
            target=self._watch, args=(on_end,), name="record:watch", daemon=True
        )
        thread.start()
        return thread

    def _watch(self, on_end: Callable[[RecordingEnded], object]) -> None:
        warned = stopping = False
        while True:
            if self.argv and (self.child is None or self.child.poll() is not None):
                on_end(RecordingEnded("command", self._command_ended()))
                return
            error = self.recording.error
            if error is not None and not warned:
                warned = True
                on_end(RecordingEnded("write_failed", msg=error.msg))
                if not self.argv:
                    return
            if self._deadline is not None and time.monotonic() >= self._deadline:
                if not self.argv:
                    on_end(RecordingEnded("duration"))
                    return
                if not stopping:
                    stopping = True
                    threading.Thread(target=self.stop_command, daemon=True).start()
            time.sleep(POLL_S)

    def stop_command(self, grace_s: float = KILL_GRACE_S) -> None:
        """SIGTERM to the command's process group, SIGKILL after `grace_s`; waits for it."""
        child = self.child
        if child is None or child.poll() is not None:
            return
        child.forward(signal.SIGTERM)
        if child.wait(grace_s) is None:
            child.forward(signal.SIGKILL)
            child.wait()

    def _command_ended(self) -> int | None:
        """Record the command's exit once (whoever sees it first); its exit status."""
        with self._exit_lock:
            if self.child is None or self.exit_code is not None:
                return self.exit_code
            code = self.child.wait()
            self.child.finish()
            self.exit_code = code
            self.recording.event(EVENT.exit, exit_code=code)
            return code

    def finish(self) -> RecordResult:
        """Stop the command if it runs, close the session, write the summary (once)."""
        with self._lock:
            if self._result is None:
                self._result = self._finish()
            return self._result

    def _finish(self) -> RecordResult:
        self.stop_command()
        code = self._command_ended()
        self._drain()
        updates = {} if not self.argv else {"exit_code": code}
        error = self.recording.stop(**updates)
        result = RecordResult(self.directory, warnings=list(self.recording.warnings))
        if error is not None:
            self.recording.release_directory()
            result.error = error.msg
            return result
        try:
            # pandas is imported only now, so the dashboard starts without it
            from gpuherd.summary.report import render_short

            result.summary = render_short(self.recording.write_summary())
        except (GpuherdError, OSError) as failure:
            result.warnings.append(f"could not write the summary: {failure}")
        return result

    def _drain(self) -> None:
        """Wait until the dashboard's tails have recorded what the logs hold now.

        The command writes its last lines (an OOM, the final metrics) as it exits, and the
        tails read them only while the dashboard still runs them: the dashboard calls
        `cancel_drain` when it quits without waiting (a second `q`), and what was left unread
        is then reported (`Recording.stop`).
        """
        with self._lock_logs:
            paths = set(self._logs) | self._seen.followed
        # Logs known from the start count even before their tail's first batch arrives.
        paths.update(
            os.path.abspath(os.path.expanduser(p))
            for p in self.recording.options.logs
            if not glob.has_magic(p)
        )
        if self.command_task is not None:
            paths.add(self.command_task)
        self.recording.drain_logs(sorted(paths))

    def cancel_drain(self) -> None:
        """Stop waiting for the tails (they are stopping); safe from any thread."""
        self.recording.cancel_drain()

    def exit_status(self, result: RecordResult) -> int:
        """The command's exit status; else 1 when recording failed, 0 when it went well."""
        if self.argv and self.exit_code:
            return self.exit_code
        return 1 if result.error is not None else 0


def record_options(
    args_log: Sequence[str],
    args_watch: Sequence[str],
    command: Sequence[str],
    interval_s: float,
    peak_interval_s: float,
) -> RecordingOptions:
    """Options of a recording whose collectors the dashboard runs."""
    return RecordingOptions(
        logs=list(args_log),
        watch=list(args_watch),
        command=list(command),
        interval_s=interval_s,
        peak_interval_s=peak_interval_s,
        own_collectors=False,
    )
