"""The queue table: one row per job of this user's queue, keyed by job id, updated cell by cell."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import DataTable, Static

from collectors.roles import QUEUE
from collectors.samples import QueueJobRow, QueueSnapshot
from gpuherd.present.format import fmt_duration, format_size, visible
from tui.widgets.composed import composed
from tui.widgets.keyed_table import update_rows
from tui.widgets.panel import SidePanel

if TYPE_CHECKING:
    from tui.state import MonitorState

NONE = "-"
COLUMNS = (
    ("job", "JOB", 4),
    ("name", "NAME", 14),
    ("state", "STATE", 10),
    ("gpu", "GPU", 5),
    ("need", "NEED", 9),
    ("peak", "PEAK", 9),
    ("exit", "EXIT/TIME", 11),
)
"""(key, header, width) of the fixed columns; WHY takes what is left."""
MIN_WHY = 24
"""The WHY column is never narrower (the table scrolls sideways instead)."""
CELL_PADDING = 2
"""A DataTable cell's padding, one on each side."""
STATE_STYLES = {
    "waiting": "yellow",
    "launching": "cyan",
    "running": "green bold",
    "done": "",
    "failed": "red bold",
    "cancelled": "dim",
}


@dataclass(frozen=True, slots=True)
class QueueRow:
    """One job's cells as text, keyed by its id."""

    key: str
    cells: tuple[tuple[str, str], ...]
    """(column key, text) for every column, WHY last."""
    style: str = ""
    """The STATE cell's style."""

    def cell(self, column: str) -> Text:
        """One cell, styled."""
        text = dict(self.cells)[column]
        return Text(text, style=self.style) if column == "state" else Text(text)


def _state(job: QueueJobRow) -> str:
    if job.cancel_requested and job.state in ("launching", "running"):
        return "cancelling"
    return job.state


def _need(job: QueueJobRow) -> str:
    need = format_size(job.need_bytes)
    return need if job.gpus == 1 else f"{job.gpus}x {need}"


def _exit_time(job: QueueJobRow, now: float) -> str:
    """`0 · 1:02` for an ended job (exit code, how long it ran), the time so far while it runs."""
    if job.started_at is None:
        return NONE
    took = fmt_duration(
        max(0.0, (job.ended_at if job.ended_at is not None else now) - job.started_at)
    )
    if job.state in ("waiting", "launching", "running"):
        return took
    return f"{job.exit_code if job.exit_code is not None else NONE} · {took}"


def queue_rows(snapshot: QueueSnapshot) -> tuple[QueueRow, ...]:
    """The table's rows for one look at the queue, in `queue ls` order."""
    rows = []
    for job in snapshot.jobs:
        state = _state(job)
        rows.append(
            QueueRow(
                str(job.id),
                (
                    ("job", str(job.id)),
                    ("name", visible(job.name)),
                    ("state", state),
                    ("gpu", ",".join(map(str, job.gpu_indices)) or NONE),
                    ("need", _need(job)),
                    (
                        "peak",
                        format_size(job.peak_vram_bytes)
                        if job.peak_vram_bytes is not None
                        else NONE,
                    ),
                    ("exit", _exit_time(job, snapshot.taken_at)),
                    (
                        "why",
                        visible(job.reason)
                        if job.reason
                        else (NONE if job.state != "waiting" else "not decided yet"),
                    ),
                ),
                STATE_STYLES.get(job.state, ""),
            )
        )
    return tuple(rows)


def queue_title(snapshot: QueueSnapshot | None) -> str:
    """The panel's title: how many jobs in which state, and who runs the queue."""
    if snapshot is None or not snapshot.exists:
        return "Queue: no queue (gpuherd queue add ...)"
    counts: dict[str, int] = {}
    for job in snapshot.jobs:
        counts[job.state] = counts.get(job.state, 0) + 1
    parts = ", ".join(f"{n} {state}" for state, n in counts.items()) or "empty"
    runner = (
        f"runner pid {snapshot.runner_pid}"
        if snapshot.runner_pid is not None
        else "no runner: jobs wait (gpuherd queue run, or gpuherd --queue)"
    )
    paused = " · paused (gpuherd queue resume)" if snapshot.paused else ""
    return f"Queue ({parts}) · {runner}{paused}"


class QueuePanel(DataTable[Text]):
    """Shows `queue_rows`; never cleared per update, so the cursor and scroll position survive."""

    DEFAULT_CSS = """
    QueuePanel {
        height: 1fr;
        scrollbar-size-vertical: 1;
    }
    """

    rows_shown: reactive[tuple[QueueRow, ...]] = reactive((), always_update=True)
    """The rows to show, in order."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._shown: dict[str, QueueRow] = {}
        self._why_width: int | None = None

    def on_resize(self, event: events.Resize) -> None:
        """Give the WHY column the width the fixed columns leave."""
        self._build_columns(event.size.width)

    def _build_columns(self, width: int) -> None:
        fixed = sum(column_width + CELL_PADDING for _, _, column_width in COLUMNS)
        why = max(MIN_WHY, width - fixed - CELL_PADDING - 1)
        if why == self._why_width:
            return
        self._why_width = why
        self.clear(columns=True)
        for key, label, column_width in COLUMNS:
            self.add_column(label, key=key, width=column_width)
        self.add_column("WHY", key="why", width=why)
        self._shown = {}
        self.watch_rows_shown(self.rows_shown)

    def watch_rows_shown(self, rows: tuple[QueueRow, ...]) -> None:
        """Remove gone rows, add new ones, update the cells that changed."""
        if self._why_width is None:
            # A table without columns is 0 rows high, and one that is 0 high may never get a
            # Resize: lay it out for the width it has (or the screen's) now.
            self._build_columns(self.size.width or self.app.size.width)
            return
        keys = [key for key, _, _ in COLUMNS] + ["why"]
        update_rows(
            self,
            self._shown,
            rows,
            lambda row: [(k, row.cell(k)) for k in keys],
            same_row=lambda a, b: a == b,
        )
        if list(self._shown) != [row.key for row in rows]:
            # A job moved in line or left the waiting ones: few rows, so draw them afresh.
            self.clear()
            self._shown = {}
            update_rows(self, self._shown, rows, lambda row: [(k, row.cell(k)) for k in keys])


class QueueSection(Vertical, SidePanel):
    """The bordered queue panel: shown once this user has a job queue (or its look fails)."""

    ROLES = frozenset({QUEUE})
    HEALTH_ROLE = QUEUE

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._drawn: QueueSnapshot | None = None
        self._note: str | None = None
        self._note_wrap: tuple[str | None, int, int] = (None, 0, 0)
        """The note, the width it was wrapped to and its lines (at most 3, as drawn)."""
        self.draws = 0
        """How many looks redrew the table (a look like the one on screen redraws nothing)."""

    def compose(self) -> ComposeResult:
        """The jobs table and the runner's last word under it."""
        yield QueuePanel()
        yield Static(id="queue-note")

    def body_lines(self) -> int:
        """The header, a line a job and the runner's note (up to three lines, wrapped)."""
        return 1 + len(composed(self, QueuePanel).rows_shown) + self._note_lines()

    def _note_lines(self) -> int:
        width = self.content_size.width
        if not self._note or width <= 0:
            return 1 if self._note else 0
        if self._note_wrap[:2] != (self._note, width):
            text = Text(visible(f"runner: {self._note}"))
            self._note_wrap = (self._note, width, min(3, len(text.wrap(self.app.console, width))))
        return self._note_wrap[2]

    def show_state(self, state: MonitorState, changed: str | None) -> None:
        """The newest look at the queue, when it differs from the one on screen."""
        looks = [s for s in state.samples(QUEUE) if isinstance(s, QueueSnapshot)]
        snapshot = looks[-1] if looks else None
        self.set_class(
            (snapshot is not None and snapshot.exists) or bool(state.problems(QUEUE)), "-shown"
        )
        if snapshot is None:
            return
        # The look's time shows only in the time column of a job under way: without one, a
        # look that found the same queue draws as the one on screen.
        under_way = any(
            job.started_at is not None and job.ended_at is None for job in snapshot.jobs
        )
        seen = snapshot if under_way else replace(snapshot, taken_at=0.0)
        if seen == self._drawn:
            return
        self._drawn = seen
        self.draws += 1
        composed(self, QueuePanel).rows_shown = queue_rows(snapshot)
        self.set_title(queue_title(snapshot))
        note = snapshot.runner_note
        if note != self._note:
            self._note = note
            widget = composed(self, Static, "#queue-note")
            # wrapped, not cut: the runner's last word is why nothing starts
            widget.update(Text(visible(f"runner: {note}") if note else "", overflow="ellipsis"))
            widget.display = bool(note)
