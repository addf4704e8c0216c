"""`gpuherd fleet`: a Textual app of its own over one `FleetSource` (Prometheus)."""

from __future__ import annotations

import time
import traceback

from rich.text import Text
from textual.app import ComposeResult, ScreenStackError
from textual.binding import Binding
from textual.widgets import Footer, Static

from collectors.base import Collector, CollectorEvent, Crashed, Failed, Recovered, Sampled
from gpuherd.engine.threads import SourceThreads as CollectorThreads
from gpuherd.fleet.model import FleetSnapshot
from gpuherd.present.format import fmt_timestamp, visible
from tui.messages import CollectorEventReceived
from tui.quiet_input import QuietInputApp
from tui.widgets.fleet_table import FleetTable


class FleetApp(QuietInputApp):
    """One table of every host's GPUs, refreshed from Prometheus on a thread of its own."""

    TITLE = "gpuherd fleet"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS = [Binding("q", "quit", "Quit"), Binding("question_mark", "help", "Help")]
    DEFAULT_CSS = """
    #fleet-title { height: 1; padding: 0 1; background: $primary 30%; }
    #fleet-problem { height: auto; padding: 0 1; color: $error; display: none; }
    #fleet-problem.-shown { display: block; }
    FleetTable { height: 1fr; }
    """

    def __init__(
        self,
        source: Collector[FleetSnapshot],
        first: FleetSnapshot | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__()
        self.source = source
        self.url: str = url or str(getattr(getattr(source, "client", None), "url", "") or "")
        self.snapshot = first
        self.problem: str | None = None
        self.refresh_s: float | None = None
        """From the start of the last query to its rows on the table."""
        self.threads = CollectorThreads(self._emit, self._crashed)

    def compose(self) -> ComposeResult:
        """Title line, problem line, table, keys."""
        yield Static(id="fleet-title")
        yield Static(id="fleet-problem")
        yield FleetTable(id="fleet")
        yield Footer()

    def on_mount(self) -> None:
        """Show the first answer, then refresh on a thread of the source's own."""
        if self.snapshot is not None:
            self._show(self.snapshot)
        self.threads.start(self.source)

    def on_unmount(self) -> None:
        """Stop the refresh thread."""
        self.threads.stop_all()

    def _emit(self, event: CollectorEvent) -> None:
        self.post_message(CollectorEventReceived(event))

    def _crashed(self, source: str, error: BaseException) -> None:
        self.post_message(CollectorEventReceived(Crashed(source, error)))

    def on_collector_event_received(self, message: CollectorEventReceived) -> None:
        """A refresh, a failure, a recovery or a crash of the refresh thread."""
        if not self._shown():
            return  # a late event while the app shuts down and its widgets are gone
        event = message.event
        if isinstance(event, Sampled) and isinstance(event.sample, FleetSnapshot):
            self.problem = None
            self._show(event.sample)
        elif isinstance(event, Failed):
            self.problem = f"{event.error.msg} (showing the last answer; retrying)"
        elif isinstance(event, Recovered):
            self.problem = None
        elif isinstance(event, Crashed):
            self.problem = f"the refresh stopped: {event.error!r}"
            self.log.error("".join(traceback.format_exception(event.error)))
        self._title()

    def action_help(self) -> None:
        """The fleet view's keys and what its rows mean."""
        from tui.screens.help import FLEET_KEYS, FLEET_NOTES, HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(keys=FLEET_KEYS, notes=FLEET_NOTES))

    def _shown(self) -> bool:
        try:
            return self.is_running and bool(self.screen.query("#fleet-title"))
        except ScreenStackError:
            return False

    def _show(self, snap: FleetSnapshot) -> None:
        started = time.perf_counter() - snap.query_s
        self.snapshot = snap
        self.query_one(FleetTable).show(snap.rows)
        self.refresh_s = time.perf_counter() - started
        self._title()

    def _title(self) -> None:
        snap = self.snapshot
        title = Text.assemble(("gpuherd fleet", "bold"), f"  {visible(self.url)}  ")
        if snap is not None:
            gpus = len(snap.rows)
            title.append(f"{_count(snap.hosts, 'host')} · {_count(gpus, 'GPU')}")
            if snap.stale_hosts:
                title.append(f" · {snap.stale_hosts} stale", style="bold red")
            refresh = "" if self.refresh_s is None else f" in {self.refresh_s * 1000:.0f} ms"
            title.append(f"  updated {fmt_timestamp(snap.taken_at)}{refresh}", style="dim")
        self.query_one("#fleet-title", Static).update(title)
        problem = self.query_one("#fleet-problem", Static)
        # The reason may quote the server: a Text (never markup), its controls made visible.
        problem.update(Text(visible(self.problem or "")))
        problem.set_class(self.problem is not None, "-shown")


def _count(number: int, noun: str) -> str:
    """`1 host`, `2 hosts`."""
    return f"{number} {noun}{'' if number == 1 else 's'}"
