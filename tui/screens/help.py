"""The `?` help screen: keys, what the panels mean, and why a source may be missing."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gpuherd.present.format import visible

KEYS: tuple[tuple[str, str], ...] = (
    (
        "q  Ctrl-C",
        "quit; while `record --tui` runs a command: leave the dashboard, the "
        "recording goes on until the command ends",
    ),
    ("k", "record --tui: stop the recorded command (asks first)"),
    ("?", "this help (Esc or ? closes it)"),
    ("/", "filter processes by user, command or pid"),
    ("Esc", "clear the filter"),
    ("s", "cycle the process sort: GPU memory, CPU %, RSS, elapsed, pid, user, GPU"),
    ("g / G", "chart the next / previous GPU (or click a GPU)"),
    ("↑ ↓ PgUp PgDn Home End", "move in the process table"),
    ("t", "go to the tasks table (training logs followed with --log / --watch)"),
    ("c", "go to the containers panel; there s cycles its sort, r reverses it"),
    ("Enter", "on a container: show only its processes (Esc shows all again)"),
    ("Enter", "on a task: its loss and validation charts, findings and GPU (Esc goes back)"),
    ("l", "on a task's charts: the loss on a log scale, and back"),
)

NOTES = (
    "VRAM bars turn yellow at 60% and red at 85%. N/A means the device or driver does not "
    "report that value, or you may not read it.",
    "The chart shows the last 10 minutes of the selected GPU; each point is the highest "
    "value of the seconds it covers, so short peaks stay visible.",
    "Memory in use that no listed process accounts for is shown under the table: the "
    "driver's own reservation, processes in another PID namespace (a container), or "
    "processes whose details are hidden from you.",
    "Containers: one row per running container, with the figures `docker stats` shows, the "
    "GPUs it was given and the GPU memory of its processes (-: none). The panel is shown only "
    "where a Docker or podman engine answers, or a replay has containers.csv.",
    "Tasks: one row per followed training log. Badges are health findings (NaN, OOM, "
    "stalled, chance, overfit, input-bound, ...), red for errors and yellow for warnings; "
    "the detail view shows each finding's evidence and log line.",
)


FLEET_KEYS: tuple[tuple[str, str], ...] = (
    ("q  Ctrl-C", "quit"),
    ("?", "this help (Esc or ? closes it)"),
    ("↑ ↓ PgUp PgDn", "move in the table"),
)
FLEET_NOTES = (
    "One row per GPU of every host whose exporter Prometheus scrapes, the most free memory "
    "first. A host whose series stopped coming is `stale`: its last figures, dimmed and "
    "listed last.",
    "The view asks Prometheus again at every interval; when it cannot, the last answer stays "
    "and the line above the table says why.",
)


class HelpScreen(ModalScreen[None]):
    """A modal list of keys and notes (the dashboard's, or those given: the fleet view's)."""

    # Here, not in a stylesheet of one app: the fleet view shows it too.
    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
    }
    #help-body {
        width: 80%;
        max-width: 90;
        height: auto;
        max-height: 90%;
        border: round $primary;
        background: $surface;
        padding: 0 1;
    }
    """

    BINDINGS = [
        Binding("escape", "dismiss", "Close"),
        Binding("question_mark", "dismiss", "Close"),
        Binding("q", "dismiss", "Close", show=False),
    ]

    def __init__(
        self,
        unavailable: tuple[str, ...] = (),
        keys: tuple[tuple[str, str], ...] = KEYS,
        notes: tuple[str, ...] = NOTES,
    ) -> None:
        super().__init__()
        self.unavailable = unavailable
        self.keys, self.notes = keys, notes

    def compose(self) -> ComposeResult:
        """Keys table, then notes, then why a source is missing."""
        keys = Table.grid(padding=(0, 2))
        keys.add_column(style="bold cyan", no_wrap=True)
        keys.add_column()
        for key, meaning in self.keys:
            keys.add_row(key, meaning)
        with VerticalScroll(id="help-body"):
            yield Static(Text("gpuherd keys", style="bold"))
            yield Static(keys)
            for note in self.notes:
                yield Static(Text(note, style="dim"), classes="help-note")
            for reason in self.unavailable:
                yield Static(Text(visible(reason), style="yellow"), classes="help-note")

    def on_mount(self) -> None:
        """Titles on the frame."""
        body = self.query_one("#help-body")
        body.border_title = "Help"
        body.border_subtitle = "Esc closes"

    async def action_dismiss(self, result: None = None) -> None:
        """Close the help."""
        self.dismiss(result)
