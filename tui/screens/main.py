"""The dashboard screen: composition of the panels and the process table's sort and filter."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from collectors.container_gpu import ContainerGpuUse, container_names, gpu_use_by_container
from collectors.roles import CONTAINERS, GPU, HOST, LOG, QUEUE, SLURM
from collectors.samples import QueueSnapshot
from gpuherd.format import visible
from tui.containers import build_container_rows, first_tick
from tui.processes import (
    SORT_KEYS,
    SortKey,
    build_rows,
    filter_rows,
    in_container,
    next_sort_key,
    sort_rows,
)
from tui.screens.task_detail import TaskDetailScreen
from tui.slurm_view import SlurmView, job_labels, latest_slurm
from tui.state import MonitorState
from tui.tasks import TaskRow
from tui.views import chart_series, chart_title, gap_note, process_subtitle
from tui.widgets.banner import Banner
from tui.widgets.container_panel import ContainerPanel
from tui.widgets.gpu_panel import GpuPanel
from tui.widgets.header_bar import HeaderBar
from tui.widgets.host_panel import HostPanel
from tui.widgets.plot import Plot
from tui.widgets.process_table import ProcessTable
from tui.widgets.queue_panel import QueuePanel, queue_rows, queue_title
from tui.widgets.slurm_panel import SlurmPanel
from tui.widgets.tasks_panel import TasksPanel

CHART_STEP_S = 5.0
"""Seconds of sample time between chart redraws: a chart point spans about 13 s, so the picture
lags by less than half a point, and the chart, the costliest widget to draw, is redrawn on one
tick in five."""

PROCESS_STEP_S = 2.0
"""Seconds of sample time between two redraws of the process table while the same processes
stay on it (htop's default delay is 1.5 s). Any update of a DataTable cell re-renders every
visible row, so on a busy 8-GPU box the table costs more than the rest of the frame; a
process that starts or ends, a new sort or filter, and fresh user details show at once."""

HISTORY_TICKS = ((-600.0, "-10 min"), (-300.0, "-5 min"), (0.0, "now"))
"""The history chart's x axis: seconds before the newest sample, labelled with their unit."""

CHART_ROWS = 16
"""Height of the chart and host row on a tall terminal (`app.tcss`, `#middle`)."""
NARROW_CHART_ROWS = 19
"""On a narrow tall terminal: the chart (12) with the host panel under it."""
HOST_ROWS = 5
"""The host panel with its figures flowing over three lines, on a short terminal."""
PROCESS_ROWS = 6
"""The process panel's least height: its header and a few rows."""
CROWDED_REST = 7
"""Host (one line: three rows) and processes (its header, a row and the note under it: four)
when crowded, borders included."""
TASK_PANEL_MAX = 12


def arrangement(height: int, gpus: int, task_rows: int, banner: int, middle_rows: int,
                ) -> tuple[bool, bool, int | None]:
    """How the dashboard fits `height` rows: (compact GPUs, crowded, the GPU panel's most rows).

    Two lines per GPU while they fit beside the chart or host, the processes and the tasks
    (and take at most half the screen); else one line per GPU; when even that leaves no room
    the screen is crowded: the chart goes, the host panel keeps one line and the processes
    table shrinks, so every GPU and the tasks stay in view (8 GPUs at 80x24). `None` keeps the
    GPU panel's own limit.
    """
    tasks = min(TASK_PANEL_MAX, 3 + task_rows) if task_rows else 0
    free = height - 2 - banner - tasks  # header and footer
    two, one = 2 * gpus + 2, gpus + 2
    if two + middle_rows + PROCESS_ROWS <= free and two <= height // 2:
        return False, False, None
    if one + middle_rows + PROCESS_ROWS <= free:
        return True, False, None
    return True, True, max(3, free - CROWDED_REST)


GPU_ACTIONS = frozenset({"filter", "cycle_sort", "clear_filter", "next_gpu"})
"""Keys that act on the process table and the GPU chart: gone with them when there is no GPU."""

PANEL_FOR_ROLE: dict[str, str] = {GPU: "#gpus", HOST: "#host", LOG: "#tasks",
                                  CONTAINERS: "#containers", QUEUE: "#queue", SLURM: "#slurm"}
"""The bordered panel that subscribes to each role: it shows the role's samples (`show`) and
marks the failures of its sources. A source of any other role, or of none, has its failures on
the banner as `source: reason` until it recovers."""


class MainScreen(Screen[None]):
    """GPUs on top, history chart and host beside each other, processes below."""

    BINDINGS = [
        Binding("slash", "filter", "Filter"),
        Binding("s", "cycle_sort", "Sort"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("g", "next_gpu", "Next GPU"),
        Binding("G", "next_gpu(-1)", "Previous GPU", show=False),
        Binding("t", "focus_tasks", "Tasks"),
        Binding("c", "focus_containers", "Containers"),
    ]

    sort_key: reactive[SortKey] = reactive(SORT_KEYS[0])
    """How the process table is ordered; `s` cycles it."""
    filter_text: reactive[str] = reactive("")
    """Substring matched against user, command, container and pid."""

    def __init__(self, state: MonitorState, *, hostname: str, replay_label: str | None) -> None:
        super().__init__()
        self.state = state
        self.hostname = hostname
        self.replay_label = replay_label
        self._subtitles: dict[str, str | None] = {}
        self._titles: dict[str, str] = {}
        self._gap_note = Text("")
        self._chart_drawn: tuple[str | None, float | None] = (None, None)
        self._has_tasks = False
        self._task_labels: dict[int, str] = {}
        """pid -> label of the task whose log it writes, for the process table."""
        self._task_rows = 0
        self._arranged: tuple[object, ...] | None = None
        self._detailed_pids: frozenset[int] = frozenset()
        """Pids whose host details the process table shows."""
        self._processes_drawn: tuple[frozenset[tuple[str, int]], float | None] = (
            frozenset(), None)
        """The (GPU uuid, pid) pairs on the table, and the tick time they were drawn at."""
        self._names: dict[str, str] = {}
        """Short container id -> name, as the process table shows them."""
        self._container: tuple[str, str] | None = None
        """(short id, name) of the container the process table is filtered to (Enter on it)."""
        self._queue_drawn: QueueSnapshot | None = None
        self._queue_note: str | None = None
        self._containers_drawn: tuple[object, dict[str, ContainerGpuUse]] = (None, {})
        """The container tick on the panel and its containers' GPU use when it was drawn."""
        self._slurm = SlurmView()

    def compose(self) -> ComposeResult:
        """Lay out the panels; `app.tcss` sizes them and hides some on small terminals."""
        yield HeaderBar()
        yield Banner()
        with Vertical(id="gpus", classes="panel"):
            yield GpuPanel()
        with Horizontal(id="middle"):
            with Vertical(id="chart", classes="panel"):
                yield Plot()
            with Vertical(id="host", classes="panel"):
                yield HostPanel()
        yield ContainerPanel(id="containers", classes="panel")  # shown once an engine answers
        with Vertical(id="slurm", classes="panel"):  # shown on a Slurm node
            yield SlurmPanel()
        with Vertical(id="processes", classes="panel"):
            with Vertical(id="table-box"):
                yield ProcessTable()
            yield Static(id="gap-note")
            yield Input(placeholder="filter by user, command or pid (Enter: keep, Esc: clear)",
                        id="filter")
        with Vertical(id="tasks", classes="panel"):  # shown once a training log is followed
            yield TasksPanel()
        with Vertical(id="queue", classes="panel"):  # shown once this user has a job queue
            yield QueuePanel()
            yield Static(id="queue-note")
        yield Footer()

    def on_mount(self) -> None:
        """Titles that never change, and the table takes the keyboard."""
        self.query_one("#gpus").border_title = "GPUs"
        self.query_one("#host").border_title = "Host"
        self.query_one("#processes").border_title = "Processes"
        header = self.query_one(HeaderBar)
        header.hostname = self.hostname
        header.replay_label = self.replay_label
        self.query_one(ProcessTable).focus()
        self.show()

    def show(self, changed: str | None = None) -> None:
        """Push state into the widgets after a message.

        `changed` names the only role whose data moved (`GPU` or `HOST`); anything else
        refreshes everything. While GPU ticks flow, a host sample waits for the next tick so
        the screen is redrawn once a second, not twice: Textual repaints the bounding box of
        everything that changed, so a second frame costs nearly as much as the first. The
        exception is a host sample that details a GPU process the table shows bare (a job
        just started, or the dashboard just did): its user and command go up at once.
        """
        state = self.state
        if changed == CONTAINERS:
            self._show_containers()
            self._show_health()
            return
        if changed == QUEUE:
            self._show_queue()
            self._show_health()
            return
        if changed == SLURM:
            self._show_slurm()
            self._show_processes()
            self._show_header()
            return
        fresh = changed == HOST and self._details_new()
        if changed == HOST and state.gpu_streaming() and not fresh:
            return
        if fresh:
            self._show_processes()
        if changed != HOST:
            self._arrange()
            gpus = self.query_one(GpuPanel)
            gpus.tick = state.gpu_tick
            gpus.selected_uuid = state.selected_uuid
            self._show_chart()
            self._show_processes(force=False)
            self._show_containers(gpu_tick=True)
            self._show_slurm()
        self.query_one(HostPanel).sample = state.host_sample
        if changed is None:
            self._show_queue()
        self._show_header()
        self._show_health()

    def _show_queue(self) -> None:
        """The queue panel: shown once a queue database exists (or its look fails)."""
        looks = [s for s in self.state.samples(QUEUE) if isinstance(s, QueueSnapshot)]
        snapshot = looks[-1] if looks else None
        shown = (snapshot is not None and snapshot.exists) or bool(self.state.problems(QUEUE))
        self.query_one("#queue").set_class(shown, "-shown")
        if snapshot is None or snapshot == self._queue_drawn:
            return
        self._queue_drawn = snapshot
        self.query_one(QueuePanel).rows_shown = queue_rows(snapshot)
        self._set_title("#queue", queue_title(snapshot))
        note = snapshot.runner_note
        if note != self._queue_note:
            self._queue_note = note
            widget = self.query_one("#queue-note", Static)
            # wrapped, not cut: the runner's last word is why nothing starts
            widget.update(Text(visible(f"runner: {note}") if note else "",
                               overflow="ellipsis"))
            widget.display = bool(note)

    def _show_slurm(self) -> None:
        """The Slurm panel: shown once this node's Slurm answers (or fails after answering)."""
        tick = latest_slurm(self.state.samples(SLURM))
        box = self.query_one("#slurm")
        box.set_class(tick is not None or bool(self.state.problems(SLURM)), "-shown")
        if tick is None:
            return
        now = self.state.now if self.state.now is not None else tick.taken_at
        self.query_one(SlurmPanel).rows_shown = self._slurm.update(tick, self.state.gpu_tick, now)
        self._set_title("#slurm", self._slurm.title(tick))

    def _show_header(self) -> None:
        state = self.state
        tick = state.gpu_tick
        header = self.query_one(HeaderBar)
        header.driver = tick.driver_version if tick else None
        header.cuda = tick.cuda_driver_version if tick else None
        header.now = state.now
        header.finished = state.replay_over()
        self.query_one(Banner).lines = (*state.notices, *state.problems_outside(PANEL_FOR_ROLE),
                                        *self._slurm.findings)

    def _show_chart(self, force: bool = False) -> None:
        plot = self.query_one(Plot)
        uuid = self.state.selected_uuid
        history = self.state.history.get(uuid) if uuid else None
        newest = history.taken_at[-1] if history else None
        drawn_uuid, drawn_at = self._chart_drawn
        # A chart point spans several seconds of the 10-minute window, so redrawing every
        # CHART_STEP_S of recorded time shows the same picture at a fraction of the cost.
        if (not force and uuid == drawn_uuid and newest is not None and drawn_at is not None
                and newest - drawn_at < CHART_STEP_S and newest >= drawn_at):
            return
        self._chart_drawn = (uuid, newest)
        plot.series = chart_series(history)
        plot.x_range = (-600.0, 0.0)
        plot.x_ticks = HISTORY_TICKS
        plot.y_range = (0.0, 100.0)
        self._set_title("#chart", chart_title(self.state.gpu_tick, uuid))

    def _details_new(self) -> bool:
        host = self.state.host_sample
        return host is not None and any(info.pid not in self._detailed_pids
                                        for info in host.processes)

    def _show_processes(self, force: bool = True) -> None:
        tick = self.state.gpu_tick
        host = self.state.host_sample
        keys = frozenset((gpu.uuid, p.pid) for gpu in tick.devices
                         for p in gpu.processes or ()) if tick else frozenset()
        now = tick.taken_at if tick else None
        drawn_keys, drawn_at = self._processes_drawn
        if (not force and keys == drawn_keys and now is not None and drawn_at is not None
                and 0 <= now - drawn_at < PROCESS_STEP_S):
            return
        self._processes_drawn = (keys, now)
        self._names = container_names(first_tick(self.state.samples(CONTAINERS)))
        every = build_rows(tick, host, self._names, self._task_labels,
                           job_labels(latest_slurm(self.state.samples(SLURM))))
        self._detailed_pids = frozenset(p.pid for p in host.processes) if host else frozenset()
        short_id, name = self._container or (None, None)
        shown = sort_rows(filter_rows(in_container(every, short_id), self.filter_text),
                          self.sort_key)
        self.query_one(ProcessTable).rows_shown = tuple(shown)
        self._set_subtitle("#processes", process_subtitle(self.sort_key, self.filter_text,
                                                          len(shown), len(every), name))
        note = gap_note(tick, bool(every))
        widget = self.query_one("#gap-note", Static)
        if note != self._gap_note:
            # Static.update re-lays out the screen; do it only when the line count changed.
            lines_changed = note.plain.count("\n") != self._gap_note.plain.count("\n")
            self._gap_note = note
            widget.update(note, layout=lines_changed)
        # Crowded, the table's one row goes first: the note only stands in for an empty table.
        shown_note = bool(note.plain) and not (self.has_class("-crowded") and shown)
        if widget.display != shown_note:
            widget.display = shown_note

    def _show_containers(self, gpu_tick: bool = False) -> None:
        """The containers panel: shown while an engine answers (or fails after answering).

        On a GPU tick (`gpu_tick`) the panel is left alone unless its containers' GPU memory
        or processes moved: uptimes and stats advance with the engine's own ticks.
        """
        state = self.state
        ticks = state.samples(CONTAINERS)
        panel = self.query_one(ContainerPanel)
        shown = bool(ticks or state.problems(CONTAINERS))
        if shown != panel.has_class("-shown"):
            panel.set_class(shown, "-shown")
            self.refresh_bindings()  # `c` appears in the footer with the panel
        latest = first_tick(ticks)
        use = gpu_use_by_container(state.gpu_tick, state.host_sample.processes
                                   if state.host_sample else ()) if latest else {}
        if gpu_tick and self._containers_drawn == (latest, use):
            return
        self._containers_drawn = (latest, use)
        panel.container_rows = tuple(build_container_rows(
            latest, state.gpu_tick, state.host_sample, state.now))
        if container_names(first_tick(ticks)) != self._names:
            self._show_processes()  # a container came or went: name its processes at once

    def show_task_pids(self, labels: dict[int, str]) -> None:
        """Name the task of each process in the process table (pid -> task label)."""
        if labels != self._task_labels:
            self._task_labels = labels
            self._show_processes()

    def show_tasks(self, rows: tuple[TaskRow, ...]) -> None:
        """Show the training-log tasks; the panel stays hidden while there are none."""
        self.query_one(TasksPanel).task_rows = rows
        if self._task_rows != len(rows):
            self._task_rows = len(rows)
            self._arrange()
        if self._has_tasks != bool(rows):
            self._has_tasks = bool(rows)
            self.query_one("#tasks").set_class(self._has_tasks, "-shown")
            self.refresh_bindings()  # `t` appears in the footer with the first task
        self._set_title("#tasks", f"Tasks ({len(rows)})  Enter: details")

    def on_resize(self) -> None:
        """A new terminal size: fit the panels again."""
        self._arrange()

    def _arrange(self) -> None:
        """Compact or crowded layout for the screen's size, GPUs, tasks and banner lines."""
        tick = self.state.gpu_tick
        gpus = len(tick.devices) if tick is not None else 0
        banner = len(self.query_one(Banner).lines)
        tall = self.has_class("-tall")
        middle = (CHART_ROWS if not self.has_class("-narrow") else NARROW_CHART_ROWS) \
            if tall else HOST_ROWS
        key = (self.size.height, middle, gpus, self._task_rows, banner)
        if key == self._arranged or not self.size.height:
            return
        self._arranged = key
        compact, crowded, most = arrangement(self.size.height, gpus, self._task_rows, banner,
                                             middle)
        self.query_one(GpuPanel).compact = compact
        if crowded != self.has_class("-crowded"):
            self.set_class(crowded, "-crowded")
            self._show_processes()  # the note under the table gives way, or comes back
        self.query_one("#gpus").styles.max_height = most

    def _show_health(self) -> None:
        state = self.state
        for role, selector in PANEL_FOR_ROLE.items():
            problems = state.problems(role)
            self.query_one(selector).set_class(bool(problems), "-error")
            self._set_subtitle(selector, "; ".join(problems) if problems else None)
        no_gpu = bool(state.unavailable(GPU)) and state.gpu_tick is None
        no_host = bool(state.unavailable(HOST)) and state.host_sample is None
        if no_gpu != self.has_class("-no-gpu"):
            self.set_class(no_gpu, "-no-gpu")
            self.refresh_bindings()  # the process and GPU keys go with their panels
        self.set_class(no_host, "-no-host")

    def _set_subtitle(self, selector: str, text: str | None) -> None:
        # Assigning a border subtitle repaints the panel even when the text is the same.
        if self._subtitles.get(selector, "") != text:
            self._subtitles[selector] = text
            # A Text, never markup: reasons and the container filter quote what others wrote.
            self.query_one(selector).border_subtitle = None if text is None else Text(
                visible(text))

    def _set_title(self, selector: str, text: str) -> None:
        if self._titles.get(selector) != text:
            self._titles[selector] = text
            self.query_one(selector).border_title = Text(visible(text))

    def watch_sort_key(self) -> None:
        """Re-sort at once rather than on the next tick."""
        if self.is_mounted:
            self._show_processes()

    def watch_filter_text(self) -> None:
        """Re-filter at once as the user types."""
        if self.is_mounted:
            self._show_processes()

    def action_filter(self) -> None:
        """Open the filter input (never while the process panel is hidden: no GPU)."""
        if self.has_class("-no-gpu"):
            return
        box = self.query_one("#filter", Input)
        box.add_class("-shown")
        box.focus()

    def action_clear_filter(self) -> None:
        """Clear and hide the filter, give the keyboard back to the table."""
        box = self.query_one("#filter", Input)
        box.value = ""
        box.remove_class("-shown")
        self.filter_text = ""
        if self._container is not None:
            self._container = None
            self._show_processes()
        self.query_one(ProcessTable).focus()

    def action_cycle_sort(self) -> None:
        """Next sort key."""
        self.sort_key = next_sort_key(self.sort_key)

    def action_next_gpu(self, step: int = 1) -> None:
        """Chart the next (or previous) GPU."""
        self.state.select_next_gpu(step)
        self.show()

    def action_focus_tasks(self) -> None:
        """Give the keyboard to the tasks table."""
        self.query_one(TasksPanel).focus()

    def action_focus_containers(self) -> None:
        """Give the keyboard to the containers panel."""
        self.query_one(ContainerPanel).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Which keys work now.

        `t` only once there are tasks to go to, `c` only while containers are shown, no process
        or GPU keys without a GPU.
        """
        if action == "focus_tasks":
            return self._has_tasks
        if action == "focus_containers":
            return self.query_one(ContainerPanel).has_class("-shown")
        if action in GPU_ACTIONS:
            return not self.has_class("-no-gpu")
        return True

    @on(TasksPanel.Opened)
    def _task_opened(self, event: TasksPanel.Opened) -> None:
        self.app.push_screen(TaskDetailScreen(self.state, event.task_id))

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        if not event.value:
            self.action_clear_filter()
            return
        self.query_one(ProcessTable).focus()

    @on(ContainerPanel.Selected)
    def _container_selected(self, event: ContainerPanel.Selected) -> None:
        self._container = (event.short_id, event.name)
        self._show_processes()
        self.query_one(ProcessTable).focus()

    @on(GpuPanel.Selected)
    def _gpu_selected(self, event: GpuPanel.Selected) -> None:
        self.state.selected_uuid = event.uuid
        self.show()
