"""The Slurm table: one row per job on this node, keyed by job id, updated cell by cell."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import DataTable

from collectors.roles import GPU, SLURM
from tui.slurm_view import SlurmRow, SlurmView, latest_slurm
from tui.widgets.composed import composed
from tui.widgets.keyed_table import update_rows
from tui.widgets.panel import SidePanel

if TYPE_CHECKING:
    from tui.state import MonitorState

COLUMNS = (
    ("job", "JOB", 10),
    ("user", "USER", 10),
    ("name", "NAME", 16),
    ("partition", "PARTITION", 10),
    ("state", "STATE", 10),
    ("gpus", "GPUS", 7),
    ("vram", "GPU MEM", 10),
    ("util", "UTIL", 5),
    ("left", "TIME LEFT", 10),
)


class SlurmPanel(DataTable[Text]):
    """Shows `slurm_rows`; never cleared per update, so the cursor survives."""

    DEFAULT_CSS = """
    SlurmPanel {
        height: auto;
        max-height: 100%;
        scrollbar-size-vertical: 1;
    }
    """

    rows_shown: reactive[tuple[SlurmRow, ...]] = reactive((), always_update=True)
    """The rows to show, in `squeue` order."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._shown: dict[str, SlurmRow] = {}

    def on_mount(self) -> None:
        """The fixed columns."""
        for key, label, width in COLUMNS:
            self.add_column(label, key=key, width=width)
        self.watch_rows_shown(self.rows_shown)

    def watch_rows_shown(self, rows: tuple[SlurmRow, ...]) -> None:
        """Remove gone rows, add new ones, update the cells that changed."""
        if not self.columns:
            return
        update_rows(self, self._shown, rows, _cells, lambda a, b: a == b)


def _cells(row: SlurmRow) -> list[tuple[str, Text]]:
    return [(key, Text(text, style=row.style if key == "state" else "")) for key, text in row.cells]


class SlurmSection(Vertical, SidePanel):
    """The bordered Slurm panel: shown once this node's Slurm answers (or fails after it did)."""

    ROLES = frozenset({SLURM, GPU})
    HEALTH_ROLE = SLURM
    MOST = 10
    """A node runs a few jobs: ten lines show them and leave the processes their room."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._view = SlurmView()

    def compose(self) -> ComposeResult:
        """The jobs table."""
        yield SlurmPanel()

    def body_lines(self) -> int:
        """The header and a line a job."""
        return 1 + len(composed(self, SlurmPanel).rows_shown)

    def show_state(self, state: MonitorState, changed: str | None) -> None:
        """The jobs of the newest Slurm tick, with the GPU use of the newest GPU tick."""
        tick = latest_slurm(state.samples(SLURM))
        self.set_class(tick is not None or bool(state.problems(SLURM)), "-shown")
        if tick is None:
            return
        now = state.now if state.now is not None else tick.taken_at
        composed(self, SlurmPanel).rows_shown = self._view.update(tick, state.gpu_tick, now)
        self.set_title(self._view.title(tick))

    def banner_lines(self) -> tuple[str, ...]:
        """A job that has held a GPU idle for the set time."""
        return tuple(self._view.findings)
