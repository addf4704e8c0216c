"""The dashboard's side of `--tui --record`: hears how the recording ends and closes it."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Protocol

from gpuherd.record.dashboard import (
    KILL_GRACE_S,
    DashboardRecording,
    RecordingEnded,
    RecordResult,
)
from tui.messages import RecordingClosed, RecordingEnding

if TYPE_CHECKING:
    from textual.message import Message
    from textual.notifications import SeverityLevel

    from tui.state import MonitorState
    from tui.task_feed import TaskFeed


class RecordingHost(Protocol):
    """What the link needs of the dashboard (the app; no import of it, no cycle)."""

    state: MonitorState
    tasks: TaskFeed

    def post_message(self, message: Message) -> bool:
        """Hand a message to the UI thread (thread-safe)."""

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """A toast."""

    def refresh_bindings(self) -> None:
        """Redraw the footer's keys."""

    def thread_crashed(self, source: str, error: BaseException) -> None:
        """A thread died of a bug: show it."""

    def exit(self, result: Any = None) -> None:
        """Leave the app."""


class RecordLink:
    """Tells the person what the recording does; closes it on a thread, never on the UI thread.

    Closing drains the logs (up to a few seconds) and summarizes the session with pandas. Its
    thread is a plain one, not a thread worker in asyncio's shared executor, where it once
    waited forever behind the long-lived collectors.
    """

    def __init__(self, app: RecordingHost, recording: DashboardRecording) -> None:
        self.app = app
        self.recording = recording
        self.closing = False
        self.result: RecordResult | None = None
        self.stopping = False
        """The command was asked to stop (the stop key, or SIGTERM to gpuherd)."""
        self._quit_asked = False
        self._line = next(
            (
                n
                for n in app.state.notices
                if n.startswith(f"recording into {recording.directory} until")
            ),
            None,
        )
        """The banner line that says what the recording does now; replaced as that changes."""

    def start(self) -> None:
        """Listen for the end of the command, --duration, or a failed write."""
        self.recording.watch(lambda ended: self.app.post_message(RecordingEnding(ended)))

    def ending(self, ended: RecordingEnded) -> None:
        """Close the session once the command exits or --duration runs out."""
        if ended.reason == "write_failed":
            line = f"recording stopped: {ended.msg}"
            self.app.notify(line, title="Recording", severity="error", timeout=30)
            self._say(line)
            return
        task = self.recording.command_task
        if ended.reason == "command" and task is not None and ended.exit_code is not None:
            self.app.tasks.ended(task, ended.exit_code)
        self.app.refresh_bindings()  # the stop key goes with the command
        why = (
            "--duration reached"
            if ended.reason == "duration"
            else f"the command exited with {ended.exit_code}"
        )
        self.app.notify(f"{why}; closing the recording", title="Recording")
        self.close()

    def close(self) -> None:
        """Close the session on a thread of its own (once)."""
        if self.closing:
            return
        self.closing = True
        threading.Thread(target=self._close, name="record:close", daemon=True).start()

    def command_running(self) -> bool:
        """Whether the recorded command still runs."""
        child = self.recording.child
        return child is not None and child.poll() is None

    def goes_on(self) -> bool:
        """Whether leaving the dashboard now leaves the recording running, headless.

        So while the command runs and nobody asked to stop it: `q`, Ctrl-C, a closed terminal
        or a crash of the dashboard leave the viewer, never the recording.
        """
        return not self.stopping and self.result is None and self.command_running()

    def leave(self) -> bool:
        """`q` or Ctrl-C: True when the app may exit now; otherwise closing starts first.

        While the command runs the dashboard is left at once: the recording goes on headless
        (`gpuherd.dashboard.monitor_record` says how to stop it), the command is never signalled.
        Without a command (or once it ended) `q` closes the recording, letting the tails read
        to the end of each log, then exits; a second `q` exits at once (the session is still
        closed, after the dashboard, and says how much of the logs was not read).
        """
        if self.goes_on():
            return True
        if self.result is not None or self._quit_asked:
            self.recording.cancel_drain()  # the tails stop with the app: stop waiting for them
            return True
        self._quit_asked = True
        self.app.notify("closing the recording; q again quits at once", title="Recording")
        self.close()
        return False

    def stop_and_quit(self) -> bool:
        """SIGTERM to gpuherd: stop the command, close the recording, then quit (the old `q`).

        True when the app may exit now; a second call exits at once.
        """
        if self.result is not None or self._quit_asked:
            self.recording.cancel_drain()
            return True
        self._quit_asked = self.stopping = True
        what = "stopping the command and closing" if self.command_running() else "closing"
        self.app.notify(f"{what} the recording; q again quits at once", title="Recording")
        self.close()
        return False

    def stop_command(self) -> None:
        """The person confirmed: SIGTERM to the command's group (SIGKILL after 10 s).

        The dashboard stays; the session closes when the command has ended, as when it ends
        by itself.
        """
        if self.stopping or not self.command_running():
            return
        self.stopping = True
        self.app.refresh_bindings()
        self.app.notify(
            f"stopping the command (SIGTERM; SIGKILL after {KILL_GRACE_S:g} s); "
            "the recording closes when it has ended",
            title="Recording",
        )
        threading.Thread(
            target=self.recording.stop_command, name="record:stop", daemon=True
        ).start()

    def _say(self, line: str) -> None:
        """Put `line` on the banner in place of what it said about the recording before."""
        notices = self.app.state.notices
        if self._line in notices:
            notices[notices.index(self._line)] = line
        else:
            notices.append(line)
        self._line = line

    def _close(self) -> None:
        try:
            result = self.recording.finish()
        except BaseException as error:  # a bug: shown like a crashed collector
            self.app.thread_crashed("record:close", error)
            return
        self.app.post_message(RecordingClosed(result))

    def closed(self, result: RecordResult) -> None:
        """Say where the session is, or why it could not be closed."""
        if result.error is not None:
            line = f"recording into {result.directory} failed: {result.error}"
            self.app.notify(line, title="Recording", severity="error", timeout=30)
        else:
            code = self.recording.exit_code
            ended = "" if code is None else f" (command exit code {code})"
            line = f"recording saved in {result.directory}{ended}"
            self.app.notify(f"{line}; q quits", title="Recording", timeout=30)
        self._say(line)
        self.result = result
        if self._quit_asked:
            self.app.exit()
