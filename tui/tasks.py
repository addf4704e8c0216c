"""Pure functions from a task's view to what the tasks panel and the detail screen show."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from rich.text import Text

from collectors.samples import GpuSample, GpuTick
from gpuherd.present.chart_values import spread_repeats
from gpuherd.present.format import fmt_bytes, fmt_duration, fmt_metric, fmt_pct, visible
from gpuherd.tasks import TaskView
from gpuherd.tasks.health import Finding
from gpuherd.tasks.view import label_of
from parsers.vocabulary import LOSS_CHART, LOSS_NAMES, UNITS, VAL_LOSS, VALIDATION_NAMES
from tui.widgets.plot import Series

BADGES = {
    "nan": "NaN",
    "inf": "Inf",
    "oom": "OOM",
    "traceback": "traceback",
    "nccl": "NCCL",
    "cuda_error": "CUDA error",
    "killed": "killed",
    "stalled": "stalled",
    "chance": "chance",
    "zero_metric": "metric=0",
    "overfitting": "overfit",
    "gpu_low": "input-bound",
    "gpu_swing": "input-bound",
    "download": "download",
}
"""Short badge per finding kind; kinds not listed show under their own name."""
SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
STATUS_STYLE = {
    "running": "green",
    "waiting": "dim",
    "idle": "dim",
    "done": "cyan",
    "stopped": "yellow",
    "failed": "bold red",
    "error": "bold red",
    "stalled": "bold yellow",
    "finished": "cyan",
}
VAL_SHORT = {
    "val/acc": "acc",
    "val/map": "mAP",
    "val/miou": "mIoU",
    "val/acc_top5": "top5",
    "val/map_50": "mAP50",
    "val/pixel_acc": "pix",
    "val/loss": "loss",
}
THROUGHPUT_UNITS = {**UNITS, "throughput/tokens_s": "tok/s", "steps_s": "steps/s"}
"""Units as a row shows them: `tok/s` is short for the column; `steps_s` is the tracker's own."""


@dataclass(frozen=True)
class TaskRow:
    """One row of the tasks panel: its key and a text per column key."""

    key: str
    cells: tuple[tuple[str, Text], ...]
    path: str = ""
    """The whole path of a task named after its path (the task cell shows as much of it as
    the column holds); empty for a task with a name of its own (`command`)."""

    def cell(self, column: str) -> Text:
        """The text of `column` (empty when the row has none)."""
        return dict(self.cells).get(column, Text(""))

    def task_cell(self, width: int) -> Text:
        """The task cell for a column `width` cells wide: as much of the path as fits."""
        label = self.cell("task")
        tail = path_tail(self.path, width) if self.path else ""
        if len(tail) <= label.cell_len:
            return label
        return Text(tail, style=label.style, no_wrap=True, overflow="ellipsis")


def path_tail(path: str, width: int) -> str:
    """The end of `path` in `width` cells, cut at a `/`: `…/version_3/metrics.csv`."""
    if len(path) <= width:
        return path
    parts = path.split("/")
    tail = parts[-1]
    for part in reversed(parts[:-1]):
        longer = f"{part}/{tail}"
        if len(longer) + 2 > width:
            break
        tail = longer
    return f"…/{tail}"


def loss_of(view: TaskView) -> tuple[str, float] | None:
    """The training loss the row shows, with its name."""
    values = dict(view.latest)
    return next(((n, values[n]) for n in LOSS_NAMES if n in values), None)


def val_of(view: TaskView) -> tuple[str, float] | None:
    """The validation metric the row shows, with its name."""
    values = dict(view.latest)
    return next(((n, values[n]) for n in VALIDATION_NAMES if n in values), None)


def progress_text(view: TaskView) -> str:
    """`step 1,200 · ep 3` (either part may be missing)."""
    parts = []
    if view.step is not None:
        parts.append(f"step {view.step:,}")
    if view.epoch is not None:
        parts.append(f"ep {view.epoch:.4g}")
    return " · ".join(parts)


def throughput_text(view: TaskView) -> str:
    """`11.8 it/s`, `845 samples/s`, `0.52 steps/s`; empty when unknown or not running.

    An idle, failed or finished task has no speed: its last rate would read as progress.
    """
    rate = view.throughput
    if not view.running or rate is None or not math.isfinite(rate):
        return ""
    unit = THROUGHPUT_UNITS.get(view.throughput_name or "") or visible(view.throughput_name or "")
    if rate >= 10_000:
        return f"{rate / 1000:.0f}k {unit}"
    return f"{rate:.3g} {unit}"


def gpus_of(view: TaskView, tick: GpuTick | None) -> list[GpuSample]:
    """The GPUs of the newest tick that the task runs on."""
    if tick is None or not view.gpu_uuids:
        return []
    return [gpu for gpu in tick.devices if gpu.uuid in view.gpu_uuids]


def gpu_text(view: TaskView, tick: GpuTick | None) -> str:
    """`0 87%`, `0,1 91%`; empty when the task's GPU is not known."""
    gpus = gpus_of(view, tick)
    if not gpus:
        return ""
    indices = ",".join(str(gpu.index) for gpu in gpus)
    util = view.gpu_util_pct
    return indices if util is None else f"{indices} {fmt_pct(util)}"


def pid_text(view: TaskView) -> str:
    """`4242`, `4242+3` (three more processes); empty when no process is known."""
    if not view.pids:
        return ""
    more = len(view.pids) - 1
    return f"{view.pids[0]}+{more}" if more else str(view.pids[0])


def vram_bytes(view: TaskView, tick: GpuTick | None) -> int | None:
    """GPU memory the task's processes use on its GPUs now; `None` when none is listed."""
    if not view.pids:
        return None
    pids = set(view.pids)
    used = [
        p.used_memory_bytes
        for gpu in gpus_of(view, tick)
        for p in gpu.processes or ()
        if p.pid in pids and p.used_memory_bytes is not None
    ]
    return sum(used) if used else None


def vram_text(view: TaskView, tick: GpuTick | None) -> str:
    """`30.0 GiB`; empty when no process of the task is listed on a GPU."""
    used = vram_bytes(view, tick)
    return "" if used is None else fmt_bytes(used)


def process_facts(view: TaskView, tick: GpuTick | None) -> list[tuple[str, str]]:
    """The detail screen's lines on the task's processes: pid, VRAM, when it reads stalled."""
    if not view.pids:
        return []
    pids = ", ".join(str(pid) for pid in view.pids)
    vram = vram_text(view, tick)
    rows = [("process", f"pid {pids}" + (f"  VRAM {vram}" if vram else ""))]
    if view.writer_pids and view.writer_pids != view.pids:
        rows.append(("log writer", "pid " + ", ".join(str(pid) for pid in view.writer_pids)))
    if view.stall_after_s is not None:
        usual = (
            ""
            if view.usual_interval_s is None
            else f" (usually a line every {view.usual_interval_s:.3g} s)"
        )
        rows.append(("stalled after", f"{view.stall_after_s:.0f} s without a line{usual}"))
    return rows


def badge_label(finding: Finding) -> str:
    """The short badge of a finding: `NaN`, `OOM`, `stalled`, ..."""
    return BADGES.get(finding.kind) or visible(finding.kind)


def health_text(view: TaskView) -> Text:
    """The error of an unreadable log, one badge per finding kind, unparsed and lost lines."""
    text = Text(no_wrap=True, overflow="ellipsis")
    if view.error:
        text.append(visible(view.error), style="bold red")
    seen: set[str] = set()
    for finding in view.findings:
        label = badge_label(finding)
        if label in seen:
            continue
        seen.add(label)
        if text.plain:
            text.append(" ")
        text.append(f" {label} ", style=f"{SEVERITY_STYLE.get(finding.severity, '')} reverse")
    if view.unparsed_lines:
        if text.plain:
            text.append(" ")
        text.append(f"{view.unparsed_lines:,} unparsed", style="dim")
    if view.lost_bytes:
        if text.plain:
            text.append(" ")
        lost = (
            f"{view.lost_lines:,} lost" if view.lost_lines else f"{view.lost_bytes:,} B lost"
        )  # lines cut away by a copytruncate
        text.append(lost, style="yellow")
    return text


def task_row(view: TaskView, tick: GpuTick | None) -> TaskRow:
    """Every cell of one task's row."""
    worst = view.worst_severity
    label_style = "bold red" if view.status in ("error", "failed") or worst == "error" else ""
    loss, val = loss_of(view), val_of(view)
    eta = fmt_duration(view.eta_s) if view.eta_s is not None and view.running else ""
    cells = (
        ("task", Text(visible(view.label), style=label_style, no_wrap=True, overflow="ellipsis")),
        ("status", Text(view.status, style=STATUS_STYLE.get(view.status, ""))),
        ("progress", Text(progress_text(view), no_wrap=True, overflow="ellipsis")),
        (
            "loss",
            Text(
                fmt_metric(loss[1]) if loss else "",
                justify="right",
                style="bold red" if loss and not math.isfinite(loss[1]) else "",
            ),
        ),
        (
            "val",
            Text(
                f"{VAL_SHORT.get(val[0]) or visible(val[0])} {fmt_metric(val[1])}" if val else "",
                no_wrap=True,
            ),
        ),
        ("speed", Text(throughput_text(view), justify="right", no_wrap=True)),
        ("eta", Text(eta, justify="right")),
        ("gpu", Text(gpu_text(view, tick), no_wrap=True)),
        ("pid", Text(pid_text(view), justify="right", no_wrap=True)),
        ("vram", Text(vram_text(view, tick), justify="right", no_wrap=True)),
        ("health", health_text(view)),
    )
    named = view.label == label_of(view.task_id)
    # The path is a file name anyone may have chosen: the row keeps it as shown.
    return TaskRow(view.task_id, cells, visible(view.task_id) if named else "")


def task_rows(views: Sequence[TaskView], tick: GpuTick | None) -> tuple[TaskRow, ...]:
    """The panel's rows, in the order tasks were first seen."""
    return tuple(task_row(view, tick) for view in views)


def finding_lines(findings: Sequence[Finding]) -> Text:
    """The detail screen's findings: badge, how often, the line, the evidence."""
    text = Text()
    if not findings:
        return Text("No findings.", style="dim")
    for finding in findings:
        if text.plain:
            text.append("\n")
        style = SEVERITY_STYLE.get(finding.severity, "")
        text.append(f" {badge_label(finding)} ", style=f"{style} reverse")
        where = f" line {finding.line_no:,}" if finding.line_no else ""
        times = f" ×{finding.count}" if finding.count > 1 else ""
        text.append(f" {finding.severity}{where}{times}: ", style=style)
        text.append(visible(finding.evidence))
    return text


COLORS = ("cyan", "orange", "green", "magenta", "yellow", "blue", "red")


def chart_names(names: Sequence[str]) -> tuple[list[str], list[str]]:
    """Which metrics go on the loss chart and which on the validation chart."""
    loss = [n for n in LOSS_CHART if n in names]
    val = [n for n in names if n.startswith("val/") and n != VAL_LOSS]
    return loss, val


def chart_line(
    name: str, points: Sequence[tuple[float, float]], color: str, x_kind: str | None = None
) -> Series:
    """One metric as a chart line; non-finite values are left out (they show as findings).

    A step counter that went backwards (one per epoch) would fold the line over itself, so such
    a series is drawn against the point's index instead. Points of one epoch (a log without a
    step) are spread across it, at fractional epochs, instead of stacking in one column.
    """
    xs = [x for x, _ in points]
    if any(b < a for a, b in zip(xs, xs[1:], strict=False)):
        xs = [float(i) for i in range(len(points))]
    elif x_kind == "epoch":
        xs = spread_repeats(xs)
    kept = [(x, y) for x, (_, y) in zip(xs, points, strict=True) if math.isfinite(y)]
    return Series(name, tuple(p[0] for p in kept), tuple(p[1] for p in kept), color)


def x_label(kind: str | None) -> str:
    """`steps`, `epochs` or `points` for a chart title."""
    return {"step": "steps", "epoch": "epochs"}.get(kind or "", "points")
