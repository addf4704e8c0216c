"""Pure functions from state to what a panel shows: chart series, titles, notes."""

from __future__ import annotations

from collections.abc import Iterable

from rich.text import Text

from collectors.samples import GpuTick
from gpuherd.present.format import GIB, MIB, fmt_bytes_gib
from tui.processes import SortKey, memory_gaps
from tui.state import GpuHistory
from tui.widgets.plot import Series

GAP_REASONS = "driver reservation, another PID namespace, or hidden"
SHOWN_GAP_BYTES = -(-GIB // 20)
"""The least unaccounted memory worth a line: what `fmt_bytes_gib` shows as 0.1 GiB."""


def _amount(size: int) -> str:
    """`2.3 GiB`, or `40 MiB` where GiB would read 0.0."""
    return fmt_bytes_gib(size) if size >= SHOWN_GAP_BYTES else f"{size / MIB:.0f} MiB"


def chart_series(history: GpuHistory | None) -> tuple[Series, ...]:
    """VRAM % and GPU util % against seconds before the newest point; unknown points skipped."""
    if history is None or not history.taken_at:
        return ()
    newest = history.taken_at[-1]
    return (
        _series("VRAM %", history.taken_at, history.mem_used_pct, newest, "cyan"),
        _series("util %", history.taken_at, history.gpu_util_pct, newest, "green"),
    )


def _series(
    label: str, times: Iterable[float], values: Iterable[float | None], newest: float, color: str
) -> Series:
    points = [(t - newest, v) for t, v in zip(times, values, strict=True) if v is not None]
    return Series(label, tuple(p[0] for p in points), tuple(p[1] for p in points), color)


def chart_title(tick: GpuTick | None, uuid: str | None) -> str:
    """`GPU 0 NVIDIA H200: VRAM and util, last 10 min` (or a hint before data arrives)."""
    gpu = next((g for g in tick.devices if g.uuid == uuid), None) if tick else None
    if gpu is None:
        return "History"
    return f"GPU {gpu.index} {gpu.name} · VRAM and util % · last 10 min"


def gap_note(tick: GpuTick | None, any_rows: bool) -> Text:
    """The line under the table: memory no visible process accounts for.

    Never let an empty table read as "nobody is using the GPU": an idle GPU still holds the
    driver's reservation, and a monitor in a container cannot see the host's pids.
    """
    if tick is None:
        return Text("")
    gaps = memory_gaps(tick.devices)
    # A gap that would read "0.0 GiB" is the driver's accounting of a few MiB, not memory
    # someone hides: it is left out (a GPU whose processes the driver would not list is not).
    hidden = [
        f"{fmt_bytes_gib(g.unattributed_bytes)} on GPU {g.gpu_index}"
        for g in gaps
        if g.listed and g.unattributed_bytes >= SHOWN_GAP_BYTES
    ]
    unlisted = [
        f"GPU {g.gpu_index} ({_amount(g.unattributed_bytes)} in use)" for g in gaps if not g.listed
    ]
    lines = []
    if hidden:
        lines.append(f"{', '.join(hidden)} in use by processes not visible here ({GAP_REASONS})")
    if unlisted:
        lines.append(f"The driver would not list the processes of {', '.join(unlisted)}")
    if not lines and not any_rows:
        return Text("No processes are using the GPUs.", style="dim")
    return Text("\n".join(lines), style="yellow")


def process_subtitle(
    key: SortKey, filter_text: str, shown: int, total: int, container: str | None = None
) -> str:
    """`sort: GPU memory ▼ (s)` plus the filters and how many rows they hide."""
    arrow = "▼" if key.descending else "▲"
    text = f"sort: {key.label} {arrow} (s)"
    if container:
        text += f"  container: {container}"
    if filter_text:
        text += f"  filter: {filter_text!r}"
    if container or filter_text:
        text += f" ({shown} of {total}, Esc clears)"
    return text
