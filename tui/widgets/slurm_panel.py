"""The Slurm table: one row per job on this node, keyed by job id, updated cell by cell."""

from __future__ import annotations

from rich.text import Text
from textual.reactive import reactive
from textual.widgets import DataTable

from tui.slurm_view import SlurmRow
from tui.widgets.keyed_table import update_rows

COLUMNS = (("job", "JOB", 10), ("user", "USER", 10), ("name", "NAME", 16),
           ("partition", "PARTITION", 10), ("state", "STATE", 10), ("gpus", "GPUS", 7),
           ("vram", "GPU MEM", 10), ("util", "UTIL", 5), ("left", "TIME LEFT", 10))


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
    return [(key, Text(text, style=row.style if key == "state" else ""))
            for key, text in row.cells]
