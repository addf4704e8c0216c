"""One task in detail: loss and validation charts, findings with evidence, counts, its GPU."""

from __future__ import annotations

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from gpuherd.present.format import (
    fmt_bytes,
    fmt_duration,
    fmt_gib_pair,
    fmt_metric,
    fmt_pct,
    pct_of,
    visible,
)
from gpuherd.tasks import TaskView
from tui.state import MonitorState
from tui.tasks import (
    COLORS,
    STATUS_STYLE,
    chart_line,
    chart_names,
    finding_lines,
    gpus_of,
    process_facts,
    progress_text,
    throughput_text,
    x_label,
)
from tui.widgets.plot import Plot, Series


class TaskDetailScreen(Screen[None]):
    """Charts on the left, facts on the right, findings below; Esc goes back."""

    DEFAULT_CSS = """
    TaskDetailScreen {
        overflow: hidden hidden;
    }
    #task-title {
        height: 1;
        padding: 0 1;
        background: $boost;
    }
    #task-top {
        height: 1fr;
    }
    #task-charts {
        width: 2fr;
    }
    #loss-box, #val-box {
        height: 1fr;
        padding: 0;
    }
    #task-info {
        width: 1fr;
        min-width: 38;
    }
    #task-findings {
        height: auto;
        max-height: 12;
    }
    """

    BINDINGS = [
        Binding("escape", "close", "Back"),
        Binding("backspace", "close", "Back", show=False),
        Binding("l", "toggle_log", "Log scale"),
    ]

    def __init__(self, state: MonitorState, task_id: str) -> None:
        super().__init__()
        self.state = state
        self.task_id = task_id
        self.log_loss = False
        """The loss chart's y axis is log10 (`l` toggles it)."""
        self._shown: dict[str, object] = {}

    def compose(self) -> ComposeResult:
        """Title line, charts beside the facts, findings at the bottom."""
        yield Static(id="task-title")
        with Horizontal(id="task-top"):
            with Vertical(id="task-charts"):
                with Vertical(id="loss-box", classes="panel"):
                    yield Plot(id="loss-chart")
                with Vertical(id="val-box", classes="panel"):
                    yield Plot(id="val-chart")
            with VerticalScroll(id="task-info", classes="panel"):
                yield Static(id="task-facts")
        with VerticalScroll(id="task-findings", classes="panel"):
            yield Static(id="task-findings-text")
        yield Footer()

    def on_mount(self) -> None:
        """Fixed titles, then the first picture."""
        self.query_one("#task-info").border_title = "Task"
        self.query_one("#task-findings").border_title = "Findings"
        self.query_one("#loss-chart", Plot).placeholder = "no loss reported yet"
        self.query_one("#val-chart", Plot).placeholder = "no validation metric reported yet"
        self._show()

    def show(self) -> None:
        """Push the task's current state into the widgets (called after each change)."""
        if self.is_mounted:
            self._show()

    def _show(self) -> None:
        view = self.state.tasks.view(self.task_id)
        if view is None:
            self._set(
                "#task-title", Text(f"{visible(self.task_id)}: no longer followed", style="dim")
            )
            return
        status = Text(view.status, style=STATUS_STYLE.get(view.status, ""))
        path = "" if view.task_id == view.label else visible(view.task_id)
        self._set(
            "#task-title",
            Text.assemble((visible(view.label), "bold"), "  ", status, "  ", (path, "dim")),
        )
        self._show_charts()
        self._show_facts(view)
        self._set("#task-findings-text", finding_lines(view.findings))
        self.query_one("#task-findings").set_class(view.worst_severity == "error", "-error")

    def _show_charts(self) -> None:
        tracker = self.state.tasks
        loss, val = chart_names(tracker.metric_names(self.task_id))
        for selector, box, names, what in (
            ("#loss-chart", "#loss-box", loss, "loss"),
            ("#val-chart", "#val-box", val, "validation"),
        ):
            kind = tracker.series_x_kind(self.task_id, names[0]) if names else None
            series = tuple(
                chart_line(
                    name,
                    tracker.series(self.task_id, name),
                    color,
                    tracker.series_x_kind(self.task_id, name),
                )
                for name, color in zip(names, COLORS, strict=False)
            )
            log = what == "loss" and self.log_loss
            title = f"{what} over {x_label(kind)}{' · log scale (l)' if log else ''}"
            if self._shown.get(box) != title:
                self._shown[box] = title
                self.query_one(box).border_title = title
            plot = self.query_one(selector, Plot)
            plot.x_integer = kind == "step"
            plot.log_y = log
            self._set_plot(selector, series)

    def _set_plot(self, selector: str, series: tuple[Series, ...]) -> None:
        if self._shown.get(selector) != series:
            self._shown[selector] = series
            self.query_one(selector, Plot).series = series

    def _set(self, selector: str, content: RenderableType, key: object = None) -> None:
        """Update a Static only when what it shows changed (an update re-lays it out)."""
        key = key if key is not None else content.plain if isinstance(content, Text) else content
        if self._shown.get(selector) == key:
            return
        self._shown[selector] = key
        self.query_one(selector, Static).update(content)

    def _show_facts(self, view: TaskView) -> None:
        rows = _fact_rows(view) + [
            (visible(name), fmt_metric(value)) for name, value in view.latest
        ]
        rows += process_facts(view, self.state.gpu_tick)
        for gpu in gpus_of(view, self.state.gpu_tick):
            pct = pct_of(gpu.memory_used_bytes, gpu.memory_total_bytes)
            rows.append(
                (
                    f"GPU {gpu.index}",
                    f"{visible(gpu.name)}\nVRAM "
                    f"{fmt_gib_pair(gpu.memory_used_bytes, gpu.memory_total_bytes)} "
                    f"({fmt_pct(pct)})  util {fmt_pct(gpu.gpu_util_pct)}",
                )
            )
        if not view.gpu_uuids:
            rows.append(("GPU", Text("not known for this log", style="dim")))
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="bold", no_wrap=True)
        grid.add_column()
        for name, value in rows:
            # Text, not str: a Rich table reads a str as markup, and metric names come from logs.
            grid.add_row(Text(name), value if isinstance(value, Text) else Text(value))
        key = tuple(
            (name, value.plain if isinstance(value, Text) else value) for name, value in rows
        )
        self._set("#task-facts", grid, key)

    def action_toggle_log(self) -> None:
        """Loss on a log10 axis, or back on a linear one."""
        self.log_loss = not self.log_loss
        self._show_charts()

    def action_close(self) -> None:
        """Back to the dashboard."""
        self.app.pop_screen()


def _fact_rows(view: TaskView) -> list[tuple[str, str | Text]]:
    rows: list[tuple[str, str | Text]] = []
    if view.error:
        rows.append(("error", Text(visible(view.error), style="bold red")))
    rows += [
        ("format", view.format or "not detected yet"),
        ("progress", progress_text(view) or "no step yet"),
        ("speed", throughput_text(view) or ("unknown" if view.running else "not running")),
        (
            "ETA",
            fmt_duration(view.eta_s)
            if view.eta_s is not None and view.running
            else "unknown"
            if view.running
            else "not running",
        ),
        ("lines read", f"{view.lines_read:,}"),
        (
            "unparsed",
            Text(f"{view.unparsed_lines:,}", style="yellow" if view.unparsed_lines else ""),
        ),
    ]
    if view.exit_code is not None:
        rows.append(
            ("exit code", Text(str(view.exit_code), style="bold red" if view.exit_code else ""))
        )
    if view.too_long_lines:
        rows.append(("too long", f"{view.too_long_lines:,} (cut to 64 KiB)"))
    if view.lost_bytes:
        rows.append(
            (
                "lost",
                Text(
                    f"about {view.lost_lines:,} lines ({view.lost_bytes:,} bytes) "
                    "cut away before they were read (copytruncate)",
                    style="yellow",
                ),
            )
        )
    if view.runs > 1:
        rows.append(("runs", f"{view.runs} (history is of the latest)"))
    if view.catching_up and view.size_bytes:
        rows.append(("reading", f"{fmt_bytes(view.offset_bytes)} of {fmt_bytes(view.size_bytes)}"))
    return rows
