"""The dashboard screen: composes the panels, fits them to the terminal, and routes keys."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen

from collectors.roles import GPU, HOST
from tui.state import MonitorState
from tui.tasks import TaskRow
from tui.widgets.banner import Banner
from tui.widgets.chart_panel import ChartPanel
from tui.widgets.composed import composed
from tui.widgets.container_panel import ContainerPanel
from tui.widgets.gpu_panel import GpuPanel, GpuSection
from tui.widgets.header_bar import HeaderBar
from tui.widgets.host_panel import HostSection
from tui.widgets.kept_lines import KeptFooter, KeptLines
from tui.widgets.panel import Panel, SidePanel
from tui.widgets.process_panel import ProcessPanel
from tui.widgets.process_table import ProcessTable
from tui.widgets.queue_panel import QueueSection
from tui.widgets.slurm_panel import SlurmSection
from tui.widgets.tasks_panel import TasksPanel, TasksSection

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
GPU_LEAST = 3
"""The GPU panel's least height when crowded: one GPU line (more scroll)."""
SIDE_LEAST = 4
"""A side panel's least height when crowded: borders, its header and one row."""


class Arrangement(NamedTuple):
    """How the panels share the screen's rows."""

    compact: bool
    """One line per GPU."""
    crowded: bool
    """The chart steps aside, the host keeps one line, the processes a row or two."""
    gpu_most: int | None
    """The GPU panel's most lines; `None` keeps its own limit."""
    side_most: int | None
    """Each side panel's most lines; `None` keeps their own (`SidePanel.MOST`)."""


def arrangement(
    height: int, gpus: int, sides: Sequence[int], banner: int, middle_rows: int
) -> Arrangement:
    """How the dashboard fits `height` rows, with side panels of `sides` lines each.

    The side panels (tasks, containers, Slurm, queue) keep their lines first. Then two lines
    per GPU while they fit beside the chart or host and the processes (and take at most half
    the screen); else one line per GPU; when even that leaves no room the screen is crowded:
    the chart goes, the host panel keeps one line and the processes table shrinks, so every
    GPU and the tasks stay in view (8 GPUs at 80x24). Side panels that would leave the GPUs
    less than a line share what is left (`shared_most`).
    """
    room = height - 2 - banner  # header and footer
    free = room - sum(sides)
    two, one = 2 * gpus + 2, gpus + 2
    if two + middle_rows + PROCESS_ROWS <= free and two <= height // 2:
        return Arrangement(False, False, None, None)
    if one + middle_rows + PROCESS_ROWS <= free:
        return Arrangement(True, False, None, None)
    side_most = shared_most(sides, room - CROWDED_REST - GPU_LEAST)
    if side_most is not None:
        free = room - sum(min(lines, side_most) for lines in sides)
    return Arrangement(True, True, max(GPU_LEAST, free - CROWDED_REST), side_most)


def shared_most(sides: Sequence[int], room: int) -> int | None:
    """The most lines each side panel may take for all of them to fit `room` lines.

    `None` when they fit whole. A panel that wants fewer leaves the rest to the others; never
    below `SIDE_LEAST`, even when they then do not fit (four side panels at 80x24).
    """
    if not sides or sum(sides) <= room:
        return None
    most = max(sides)
    while most > SIDE_LEAST and sum(min(lines, most) for lines in sides) > room:
        most -= 1
    return most


GPU_ACTIONS = frozenset({"filter", "cycle_sort", "clear_filter", "next_gpu"})
"""Keys that act on the process table and the GPU chart: gone with them when there is no GPU."""


class MainScreen(Screen[None], KeptLines):
    """GPUs on top, history chart and host beside each other, processes below.

    The screen composes the panels and fits them to the terminal; each panel subscribes to
    the roles it shows (`Panel.ROLES`) and keeps its own state (the process table's sort and
    filter live in `ProcessPanel`). Its own lines (the background between panels) are kept
    until repainted (`KeptLines`).
    """

    BINDINGS = [
        Binding("slash", "filter", "Filter"),
        Binding("s", "cycle_sort", "Sort"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
        Binding("g", "next_gpu", "Next GPU"),
        Binding("G", "next_gpu(-1)", "Previous GPU", show=False),
        Binding("t", "focus_tasks", "Tasks"),
        Binding("c", "focus_containers", "Containers"),
    ]

    def __init__(self, state: MonitorState, *, hostname: str, replay_label: str | None) -> None:
        super().__init__()
        self.state = state
        self.hostname = hostname
        self.replay_label = replay_label
        self._has_tasks = False
        self._arranged: tuple[object, ...] | None = None
        self._panels: list[Panel] | None = None

    def compose(self) -> ComposeResult:
        """Lay out the panels; `app.tcss` sizes them and hides some on small terminals."""
        yield HeaderBar()
        yield Banner()
        yield GpuSection(id="gpus", classes="panel")
        with Horizontal(id="middle"):
            yield ChartPanel(id="chart", classes="panel")
            yield HostSection(id="host", classes="panel")
        yield ContainerPanel(id="containers", classes="panel")  # shown once an engine answers
        yield SlurmSection(id="slurm", classes="panel")  # shown on a Slurm node
        yield ProcessPanel(id="processes", classes="panel")
        yield TasksSection(id="tasks", classes="panel")  # shown once a training log is followed
        yield QueueSection(id="queue", classes="panel")  # shown once this user has a job queue
        yield KeptFooter()

    @property
    def panels(self) -> list[Panel]:
        """The panels now on the screen, in the order they are composed (or mounted)."""
        # isinstance, not `query(Panel)`: a query matches CSS type names, which follow only a
        # widget's first bases. One walk serves every change until a panel is mounted (a walk
        # a sample was a tenth of the dashboard's own work).
        if self._panels is None:
            self._panels = [w for w in self.walk_children() if isinstance(w, Panel)]
        return self._panels

    def on_panel_mounted(self) -> None:
        """A panel came: the next change walks the screen again."""
        self._panels = None

    @property
    def processes(self) -> ProcessPanel:
        """The process panel, which the process keys act on."""
        return composed(self, ProcessPanel)

    def on_mount(self) -> None:
        """The header's fixed parts, the table takes the keyboard, a first full draw."""
        header = self.query_one(HeaderBar)
        header.hostname = self.hostname
        header.replay_label = self.replay_label
        self.query_one(ProcessTable).focus()
        self.show()

    def show(self, changed: str | None = None) -> None:
        """Hand a state change to the panels that subscribe to its role (all when `None`).

        While GPU ticks flow, a host sample waits for the next tick (panels that must show it
        at once, as the process table showing a new job's user, say so in their `show_state`),
        and so does the header.
        """
        state = self.state
        if changed in (None, GPU):
            self._arrange()  # one or two lines a GPU, before the GPU panel draws its tick
        panels = self.panels  # found once: a change is made every second
        for panel in panels:
            if changed is None or changed in panel.ROLES:
                panel.show_state(state, changed)
        self._arrange()  # a side panel's rows may have come or gone: it takes its lines
        if changed in (None, GPU) or (changed == HOST and not state.gpu_streaming()):
            self._show_header()
        self._show_health(panels)

    def _show_header(self) -> None:
        state = self.state
        tick = state.gpu_tick
        header = composed(self, HeaderBar)
        header.driver = tick.driver_version if tick else None
        header.cuda = tick.cuda_driver_version if tick else None
        header.now = state.now
        header.finished = state.replay_over()

    def show_task_pids(self, labels: dict[int, str]) -> None:
        """Name the task of each process in the process table (pid -> task label)."""
        self.processes.show_task_pids(labels)

    def show_tasks(self, rows: tuple[TaskRow, ...]) -> None:
        """Show the training-log tasks; the panel stays hidden while there are none."""
        has_tasks = composed(self, TasksSection).show_tasks(rows)
        self._arrange()
        if self._has_tasks != has_tasks:
            self._has_tasks = has_tasks
            self.refresh_bindings()  # `t` appears in the footer with the first task

    def on_resize(self) -> None:
        """A new terminal size: fit the panels again."""
        self._arrange()

    def _arrange(self) -> None:
        """Compact or crowded layout for the screen's size, GPUs, side panels and banner."""
        tick = self.state.gpu_tick
        gpus = len(tick.devices) if tick is not None else 0
        banner = len(composed(self, Banner).lines)
        tall = self.has_class("-tall")
        middle = (
            (CHART_ROWS if not self.has_class("-narrow") else NARROW_CHART_ROWS)
            if tall
            else HOST_ROWS
        )
        sides = [panel for panel in self.panels if isinstance(panel, SidePanel)]
        wanted = [panel.lines_wanted() for panel in sides]
        no_gpu = self.has_class("-no-gpu")
        key = (self.size.height, middle, gpus, tuple(wanted), banner, no_gpu)
        if key == self._arranged or not self.size.height:
            return
        self._arranged = key
        fit = (
            # no GPU, chart or processes to make room for: the host and side panels have it
            Arrangement(False, False, None, None)
            if no_gpu
            else arrangement(
                self.size.height, gpus, [lines for lines in wanted if lines], banner, middle
            )
        )
        composed(self, GpuPanel).compact = fit.compact
        if fit.crowded != self.has_class("-crowded"):
            self.set_class(fit.crowded, "-crowded")
            self.processes.redraw()  # the note under the table gives way, or comes back
        self.query_one("#gpus").styles.max_height = fit.gpu_most
        most = fit.side_most
        for panel, lines in zip(sides, wanted, strict=True):
            panel.fit(lines if most is None else min(lines, most))

    def _show_health(self, panels: list[Panel]) -> None:
        """Each panel marks its role's failures; the others' go on the banner."""
        state = self.state
        for panel in panels:
            panel.show_health(state)
        marked = {panel.HEALTH_ROLE for panel in panels if panel.HEALTH_ROLE}
        found = tuple(line for panel in panels for line in panel.banner_lines())
        composed(self, Banner).lines = (*state.notices, *state.problems_outside(marked), *found)
        no_gpu = bool(state.unavailable(GPU)) and state.gpu_tick is None
        no_host = bool(state.unavailable(HOST)) and state.host_sample is None
        if no_gpu != self.has_class("-no-gpu"):
            self.set_class(no_gpu, "-no-gpu")
            self.refresh_bindings()  # the process and GPU keys go with their panels
            self._arrange()  # their lines are free, or wanted again
        if no_host != self.has_class("-no-host"):
            self.set_class(no_host, "-no-host")

    def action_filter(self) -> None:
        """Open the filter input (never while the process panel is hidden: no GPU)."""
        if not self.has_class("-no-gpu"):
            self.processes.open_filter()

    def action_clear_filter(self) -> None:
        """Clear and hide the filter, give the keyboard back to the table."""
        self.processes.clear_filter()

    def action_cycle_sort(self) -> None:
        """Next sort key of the process table."""
        self.processes.cycle_sort()

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
        # Only now: the details screen is no part of the first frame.
        from tui.screens.task_detail import TaskDetailScreen

        self.app.push_screen(TaskDetailScreen(self.state, event.task_id))

    @on(ContainerPanel.Selected)
    def _container_selected(self, event: ContainerPanel.Selected) -> None:
        self.processes.show_container(event.short_id, event.name)
        self.query_one(ProcessTable).focus()

    @on(GpuPanel.Selected)
    def _gpu_selected(self, event: GpuPanel.Selected) -> None:
        self.state.selected_uuid = event.uuid
        self.show()
