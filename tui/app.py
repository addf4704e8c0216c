"""The Textual app: a sink of one running set of sources; routes their events into state."""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from textual.binding import Binding
from textual.notifications import SeverityLevel

from collectors.base import (
    Collector,
    CollectorEvent,
    Crashed,
    Failed,
    Finished,
    Recovered,
    Sampled,
    Unavailable,
)
from collectors.machine.containers import NoEngine
from collectors.machine.writers import WriterWatch
from collectors.roles import DISCOVERY, GPU, LOG, WRITERS, role_of, sample_role
from collectors.samples import GpuTick
from gpuherd.engine.gate import EarlyCollectors
from gpuherd.engine.threads import CollectorThread
from gpuherd.present.format import visible
from gpuherd.sources import TailSupervisor
from tui.messages import CollectorEventReceived, RecordingClosed, RecordingEnding
from tui.options import DashboardOptions
from tui.quiet_input import QuietInputApp
from tui.screens.error import ErrorScreen
from tui.screens.help import HelpScreen
from tui.screens.main import MainScreen
from tui.state import MonitorState
from tui.task_feed import TaskFeed

if TYPE_CHECKING:
    from tui.record_link import RecordLink

DEMO_HINT = "try `gpuherd --demo`"


class GpuherdApp(QuietInputApp):
    """The dashboard. Build it with `make_app`."""

    CSS_PATH = "app.tcss"
    TITLE = "gpuherd"
    ENABLE_COMMAND_PALETTE = False  # a monitor's keys fit on the footer and the `?` screen
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        # Ctrl-C quits, as in every monitor: not Textual's "press ctrl+q" hint, nor copy.
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
        Binding("k", "stop_command", "Stop command"),
        Binding("question_mark", "help", "Help"),
    ]
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-tiny"), (22, "-short"), (30, "-tall")]

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """A toast; its text is shown as written, never as markup, its controls made visible.

        Toasts carry sources' reasons, which quote log paths and collectors' errors.
        """
        super().notify(
            visible(message), title=visible(title), severity=severity, timeout=timeout, markup=False
        )

    def __init__(self, options: DashboardOptions) -> None:
        super().__init__()
        self.title = options.title
        self.collectors = list(options.collectors)
        self.clock = options.clock
        self.hostname = options.hostname
        self.replay_label = options.replay_label
        self.state = MonitorState()
        self.state.notices.extend(options.notices)
        self.help_notes: list[str] = []
        """Why a source that is simply absent here (no container engine) shows nothing."""
        self._main = MainScreen(self.state, hostname=self.hostname, replay_label=self.replay_label)
        early = options.early if options.early is not None else _own_set(options)
        self.tasks = TaskFeed(self, self._main, self.state, early.running, options.task_hints)
        self.record: RecordLink | None = None
        if options.recording is not None:
            from tui.record_link import RecordLink  # the recorder loads only with --record

            self.record = RecordLink(self, options.recording)
        self.gate = early.gate
        """Holds the collectors' events until the app is mounted."""
        self.running = early.running
        """The source set this dashboard shows: each source on its own thread
        (`gpuherd.engine`), wired to the others there."""
        self.threads = early.threads
        self._event_handlers: dict[type, Callable[[Any], None]] = {
            Sampled: self._sampled,
            Failed: self._failed,
            Recovered: self._recovered,
            Unavailable: self._unavailable,
            Finished: self._finished,
            Crashed: self._crashed,
        }
        """The one place a collector event is routed by its type."""
        self._feeds: dict[str | None, Callable[[str, Any], None]] = {
            LOG: self.tasks.batch,
            DISCOVERY: lambda _source, found: self.tasks.discovered(found),
            WRITERS: lambda _source, found: self.tasks.writers(found),
        }
        """Roles whose samples go to the task feed instead of the state's latest samples."""

    def get_default_screen(self) -> MainScreen:
        """The dashboard is the base screen."""
        return self._main

    def on_mount(self) -> None:
        """Take the events of collectors started early, then start one thread per other one.

        The held events are handled here, before the first frame, so a live dashboard shows
        its first GPU tick and the user of each GPU process from its first frame on.
        """
        self._refresh_view()
        self.tasks.adopt(self.collectors)
        for collector in self.collectors:
            self.state.add_source(collector.name, role_of(collector))
        for event in self.gate.open(self._post, self.thread_crashed):
            if isinstance(event, Crashed):
                self.thread_crashed(event.source, event.error)
            else:
                self._event_handlers[type(event)](event)
        self.running.run()  # the sources not started early
        if self.record is not None:
            self.record.start()

    def start_collector(self, collector: Collector[Any]) -> CollectorThread | bool:
        """Run one more source in the set, on a thread of its own."""
        self.state.add_source(collector.name, role_of(collector))
        return self.running.start(collector)

    def on_unmount(self) -> None:
        """Stop the collector threads, waiting a few seconds for them to close their sources.

        While a recorded command runs they are left running: the recording goes on without
        the dashboard (`gpuherd.dashboard.monitor_record`), and stops them when it closes.
        """
        if self.record is not None and self.record.goes_on():
            return
        for name in self.running.stop():
            self.state.notices.append(f"the {name} collector did not stop; abandoned at exit")

    def thread_crashed(self, source: str, error: BaseException) -> None:
        """Runs on the dying thread: record the bug, then show it on the UI thread."""
        if not self.post_message(CollectorEventReceived(Crashed(source, error))):
            # The app has stopped: the line is printed on stderr after the dashboard.
            self.state.notices.append(f"the {source} collector stopped: {error!r}")

    def _post(self, event: CollectorEvent) -> None:
        """Runs on the collector thread: hand the event to the UI thread."""
        self.post_message(CollectorEventReceived(event))

    def on_collector_event_received(self, message: CollectorEventReceived) -> None:
        """Route a collector event to its handler by the event's type."""
        self._event_handlers[type(message.event)](message.event)

    def _sampled(self, event: Sampled[Any]) -> None:
        """Hand the sample to whoever subscribes to its source's role.

        Log batches and scans go to the task feed; everything else is stored in the state
        (per source and host) for the panels, and a GPU tick also feeds the tasks and tells
        the host collector which pids to detail.
        """
        role = self.state.role(event.source) or sample_role(event.sample)
        feed = self._feeds.get(role)
        if feed is not None:
            feed(event.source, event.sample)
            return
        changes = self.state.apply_sample(event.source, event.sample)
        if role == GPU and self.state.gpu_tick is not None:
            self.tasks.gpu_tick(self.state.gpu_tick)
            for gpu in changes.lost:
                self.notify(
                    f"GPU {gpu.index} ({gpu.uuid[:12]}): {gpu.error}",
                    title="GPU error",
                    severity="error",
                )
            for gpu in changes.back:
                self.notify(f"GPU {gpu.index} reads again", title="GPU recovered")
        self._refresh_view(role, event.sample)

    def _failed(self, event: Failed) -> None:
        """Mark the source's panel; notify once per outage."""
        error = event.error
        if self.state.mark_failed(event.source, error.msg):
            self.notify(error.msg, title=f"{error.title} ({event.source})", severity="error")
        self.tasks.failed(event.source, error.msg)
        self._refresh_view()

    def _recovered(self, event: Recovered) -> None:
        """Clear the error mark."""
        if self.state.mark_recovered(event.source):
            self.notify(f"{event.source} is reading again", title="Recovered")
        self.tasks.recovered(event.source)
        self._refresh_view()

    def _unavailable(self, event: Unavailable) -> None:
        """Explain on the banner why the source cannot run here.

        A machine without a container engine is no problem: its panel stays hidden and the
        reason is one line of the help screen, not of the banner.
        """
        line = event.error.msg
        if isinstance(event.error, NoEngine):
            status = self.state.status_of(event.source)
            status.health, status.reason = "unavailable", line
            self.help_notes.append(line)
            self._refresh_view()
            return
        gpu_role = self.state.role(event.source) == GPU
        # the demo helps a person looking around, not a recording (which needs the GPU)
        if gpu_role and self.replay_label is None and self.record is None and "--demo" not in line:
            line = f"{line} — {DEMO_HINT}"
        self.state.mark_unavailable(event.source, event.error.msg, notice=line)
        self.tasks.failed(event.source, event.error.msg)  # a log's row says why, too
        self._refresh_view()

    def _finished(self, event: Finished) -> None:
        """A replay ended: say so in the header and once as a notification."""
        over = self.state.replay_over()
        self.state.mark_finished(event.source)
        if self.replay_label and not over and self.state.replay_over():
            self.notify("replay finished; q quits", title="Replay")
        self._refresh_view()

    def _crashed(self, event: Crashed) -> None:
        """A collector that died of a bug: mark its panel and show the traceback."""
        source, error = event.source, event.error
        self.state.mark_crashed(source, f"crashed: {error!r}")
        self.tasks.failed(source, f"crashed: {error!r}")
        details = "".join(traceback.format_exception(error))
        self.push_screen(ErrorScreen(f"The {source} collector stopped: {error!r}", details))
        self._refresh_view()

    def on_recording_ending(self, message: RecordingEnding) -> None:
        """The recorded command exited (or --duration ran out): close the session."""
        if self.record is not None:
            self.record.ending(message.ended)
            self._refresh_view()

    def on_recording_closed(self, message: RecordingClosed) -> None:
        """The session is closed: say where it is."""
        if self.record is not None:
            self.record.closed(message.result)
            self._refresh_view()

    def _refresh_view(self, changed: str | None = None, sample: object = None) -> None:
        """Push state into the screen; `changed` is the role of the sample that just came."""
        if self.replay_label is None:
            self.state.now = self.clock()
        elif changed == GPU and isinstance(sample, GpuTick):
            self.state.now = sample.taken_at
        # Collector threads keep posting while the app shuts down and prunes the screen's
        # widgets; a late message must not query half-removed panels.
        if self.is_running and self._main.is_mounted:
            self._main.show(changed)

    async def action_quit(self) -> None:
        """Leave the dashboard; a recorded command runs on, recorded (see `RecordLink.leave`)."""
        if self.record is None or self.record.leave():
            self.exit()

    async def stop_and_quit(self) -> None:
        """SIGTERM to gpuherd while recording: stop the command, close the session, quit."""
        if self.record is None or self.record.stop_and_quit():
            self.exit()

    def action_stop_command(self) -> None:
        """Ask, then stop the recorded command (`record --tui -- CMD` only)."""
        record = self.record
        if record is None or not record.command_running() or record.stopping:
            return
        from tui.screens.confirm import ConfirmScreen  # only recordings with a command ask

        question = (
            "Stop the recorded command? Its process group gets SIGTERM (SIGKILL "
            "10 s later); the recording closes once it has ended."
        )
        self.push_screen(
            ConfirmScreen("Stop the command", question),
            lambda yes: record.stop_command() if yes else None,
        )

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The stop key only while a recorded command runs."""
        if action == "stop_command":
            return (
                self.record is not None
                and self.record.command_running()
                and not self.record.stopping
            )
        return True

    def action_help(self) -> None:
        """Show the keys."""
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen((*self.state.notices, *self.help_notes)))


def make_app(collectors: Sequence[Collector[Any]], **options: Any) -> GpuherdApp:
    """Build the dashboard over `collectors`; `options` are `DashboardOptions`' other fields."""
    return GpuherdApp(DashboardOptions(collectors, **options))


def _own_set(options: DashboardOptions) -> EarlyCollectors:
    """The running set of a dashboard given no started one (tests, replays): started on mount."""
    tails = options.tail
    if tails is not None and not isinstance(tails, TailSupervisor):
        tails = TailSupervisor(tails)
    writers = next(
        (w for c in options.collectors if isinstance(w := getattr(c, "watch", None), WriterWatch)),
        None,
    )
    return EarlyCollectors.create(
        options.collectors,
        taps=[options.tap] if options.tap is not None else [],
        pid_watch=options.pid_watch,
        tails=tails,
        writers=writers,
    )
