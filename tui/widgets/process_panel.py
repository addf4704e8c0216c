"""The processes panel: the GPU process table with its own sort, filter and container filter."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Input, Static

from collectors.machine.container_gpu import container_names
from collectors.roles import CONTAINERS, GPU, HOST, SLURM
from tui.containers import first_tick
from tui.processes import (
    SORT_KEYS,
    SortKey,
    build_rows,
    filter_rows,
    in_container,
    next_sort_key,
    sort_rows,
)
from tui.slurm_view import job_labels, latest_slurm
from tui.views import gap_note, process_subtitle
from tui.widgets.composed import composed
from tui.widgets.panel import Panel
from tui.widgets.process_table import ProcessTable

if TYPE_CHECKING:
    from tui.state import MonitorState

PROCESS_STEP_S = 2.0
"""Seconds of sample time between two redraws of the process table while the same processes
stay on it (htop's default delay is 1.5 s). A busy process's CPU % and elapsed time change on
every tick, and each changed row is built and drawn again, so on a busy 8-GPU box a redraw a
second costs twice what this one does; a process that starts or ends, a new sort or filter,
and fresh user details show at once."""


class ProcessPanel(Vertical, Panel):
    """GPU processes: `s` sorts, `/` filters, Enter on a container narrows them to it.

    It redraws on a GPU tick (at most every `PROCESS_STEP_S` while the same processes stay),
    at once on a host sample that details a process it shows bare (a job just started, or the
    dashboard just did), on a container tick that names or un-names a process, and on a Slurm
    tick that names a process's job (`job 4711.0`).
    """

    ROLES = frozenset({GPU, HOST, CONTAINERS, SLURM})

    sort_key: reactive[SortKey] = reactive(SORT_KEYS[0])
    """How the process table is ordered; `s` cycles it."""
    filter_text: reactive[str] = reactive("")
    """Substring matched against user, command, container and pid."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._state: MonitorState | None = None
        self._gap_note = Text("")
        self._task_labels: dict[int, str] = {}
        """pid -> label of the task whose log it writes."""
        self._detailed_pids: frozenset[int] = frozenset()
        """Pids whose host details the table shows."""
        self._drawn: tuple[frozenset[tuple[str, int]], float | None] = (frozenset(), None)
        """The (GPU uuid, pid) pairs on the table, and the tick time they were drawn at."""
        self._names: dict[str, str] = {}
        """Short container id -> name, as the table shows them."""
        self._jobs: dict[int, str] = {}
        """pid -> its Slurm job and step (`job 4711.0`), as the table shows them."""
        self._container: tuple[str, str] | None = None
        """(short id, name) of the container the table is narrowed to (Enter on it)."""

    def compose(self) -> ComposeResult:
        """The table, the note on GPU memory no process accounts for, the filter box."""
        with Vertical(id="table-box"):
            yield ProcessTable()
        yield Static(id="gap-note")
        yield Input(
            placeholder="filter by user, command or pid (Enter: keep, Esc: clear)", id="filter"
        )

    def on_mount(self) -> None:
        """Its title never changes."""
        self.border_title = "Processes"

    def show_state(self, state: MonitorState, changed: str | None) -> None:
        """Redraw as the class says; anything else waits for the next GPU tick."""
        self._state = state
        if changed == HOST:
            if self._details_new(state):
                self.redraw()
        elif changed == CONTAINERS:
            if container_names(first_tick(state.samples(CONTAINERS))) != self._names:
                self.redraw()  # a container came or went: name its processes at once
        elif changed == SLURM:
            if job_labels(latest_slurm(state.samples(SLURM))) != self._jobs:
                self.redraw()  # a process's job is known: name it at once
        else:
            self.redraw(force=False)

    def show_task_pids(self, labels: dict[int, str]) -> None:
        """Name the task of each process (pid -> task label)."""
        if labels != self._task_labels:
            self._task_labels = labels
            self.redraw()

    def show_container(self, short_id: str, name: str) -> None:
        """Narrow the table to one container's processes."""
        self._container = (short_id, name)
        self.redraw()

    def _details_new(self, state: MonitorState) -> bool:
        host = state.host_sample
        return host is not None and any(
            info.pid not in self._detailed_pids for info in host.processes
        )

    def redraw(self, force: bool = True) -> None:
        """Build, filter and sort the rows; unless `force`, only when they can have moved."""
        state = self._state
        if state is None or not self.is_mounted:
            return
        tick, host = state.gpu_tick, state.host_sample
        keys = (
            frozenset((gpu.uuid, p.pid) for gpu in tick.devices for p in gpu.processes or ())
            if tick
            else frozenset()
        )
        now = tick.taken_at if tick else None
        drawn_keys, drawn_at = self._drawn
        if (
            not force
            and keys == drawn_keys
            and now is not None
            and drawn_at is not None
            and 0 <= now - drawn_at < PROCESS_STEP_S
        ):
            return
        self._drawn = (keys, now)
        self._names = container_names(first_tick(state.samples(CONTAINERS)))
        self._jobs = job_labels(latest_slurm(state.samples(SLURM)))
        every = build_rows(tick, host, self._names, self._task_labels, self._jobs)
        self._detailed_pids = frozenset(p.pid for p in host.processes) if host else frozenset()
        short_id, name = self._container or (None, None)
        shown = sort_rows(
            filter_rows(in_container(every, short_id), self.filter_text), self.sort_key
        )
        composed(self, ProcessTable).rows_shown = tuple(shown)
        self.set_subtitle(
            process_subtitle(self.sort_key, self.filter_text, len(shown), len(every), name)
        )
        self._show_note(gap_note(tick, bool(every)), bool(shown))

    def _show_note(self, note: Text, rows: bool) -> None:
        widget = composed(self, Static, "#gap-note")
        if note != self._gap_note:
            # Static.update re-lays out the screen; do it only when the line count changed.
            lines_changed = note.plain.count("\n") != self._gap_note.plain.count("\n")
            self._gap_note = note
            widget.update(note, layout=lines_changed)
        # Crowded, the table's one row goes first: the note only stands in for an empty table.
        shown_note = bool(note.plain) and not (self.screen.has_class("-crowded") and rows)
        if widget.display != shown_note:
            widget.display = shown_note

    def watch_sort_key(self) -> None:
        """Re-sort at once rather than on the next tick."""
        self.redraw()

    def watch_filter_text(self) -> None:
        """Re-filter at once as the user types."""
        self.redraw()

    def cycle_sort(self) -> None:
        """Next sort key."""
        self.sort_key = next_sort_key(self.sort_key)

    def open_filter(self) -> None:
        """Show the filter box and give it the keyboard."""
        box = self.query_one("#filter", Input)
        box.add_class("-shown")
        box.focus()

    def clear_filter(self) -> None:
        """Clear and hide the filter and the container filter; the table takes the keyboard."""
        box = self.query_one("#filter", Input)
        box.value = ""
        box.remove_class("-shown")
        self.filter_text = ""
        if self._container is not None:
            self._container = None
            self.redraw()
        self.query_one(ProcessTable).focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        if not event.value:
            self.clear_filter()
            return
        self.query_one(ProcessTable).focus()
