"""The plain first frame shown while the dashboard loads: GPUs and their processes as text lines.

Pure and free of Textual and Rich: a GPU tick, a host sample and a terminal size in, the lines
of one screen out. The dashboard draws over it a moment later, so it follows the dashboard's
layout (the GPU panel's two lines per GPU, the process table's columns and order).
"""

from __future__ import annotations

import unicodedata

from collectors.samples import GpuSample, GpuTick, HostSample
from gpuherd.present.format import (
    fmt_bytes,
    fmt_duration,
    fmt_gib_pair,
    fmt_pct,
    fmt_text,
    pct_of,
    visible,
)
from tui.processes import SORT_KEYS, ProcessRow, build_rows, sort_rows

PROCESS_COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("gpu", "GPU", 3),
    ("pid", "PID", 7),
    ("user", "USER", 10),
    ("gpu_mem", "GPU MEM", 9),
    ("cpu", "CPU%", 6),
    ("rss", "RSS", 9),
    ("elapsed", "ELAPSED", 10),
)
"""Key, header and width of the process table's columns before COMMAND (its `COLUMNS`)."""
WIDE_ONLY = frozenset({"rss", "elapsed"})
WIDE_FROM = 100
"""From this width the table also shows RSS and elapsed time (as the dashboard's)."""
MIN_PROCESS_ROWS = 4
"""GPUs take one line each instead of two when two would leave fewer process rows."""
_LEFT_ALIGNED = frozenset({"user"})


def render(
    tick: GpuTick, host: HostSample | None, hostname: str, width: int, height: int
) -> list[str]:
    """The lines of one screen of `width` x `height` cells (at most `height` lines).

    Args:
        tick: The first GPU tick.
        host: A host sample with the details (user, command) of the GPU processes, or
            `None` when none came in time (those cells show `N/A`).
        hostname: This machine's name, for the header line.
        width: Terminal columns.
        height: Terminal lines.
    """
    if width < 20 or height < 3:
        return []
    rows = sort_rows(build_rows(tick, host), SORT_KEYS[0])
    top = [_header(tick, hostname, width)]
    # header line, the GPU box's borders, two lines a GPU, the process box's borders and header
    two_lines = height - (3 + 2 * len(tick.devices) + 3) >= min(len(rows), MIN_PROCESS_ROWS)
    gpu_lines = [line for gpu in tick.devices for line in _gpu(gpu, two_lines)]
    top += _box("GPUs", gpu_lines, width)
    room = height - len(top) - 3  # the process box's borders and its header
    if room < 1:
        return top[:height]
    return top + _box("Processes", _process_lines(rows, width - 4)[: room + 1], width)


def _header(tick: GpuTick, hostname: str, width: int) -> str:
    left = f"gpuherd  {visible(hostname)}"
    right = f"driver {fmt_text(tick.driver_version)}"
    if tick.cuda_driver_version:
        right += f"  CUDA {visible(tick.cuda_driver_version)}"
    gap = width - cell_width(left) - cell_width(right)
    return cut(left + " " * gap + right, width) if gap >= 2 else cut(left, width)


def _gpu(gpu: GpuSample, two_lines: bool) -> list[str]:
    head = f"{gpu.index:>3} {visible(gpu.name)}"
    if gpu.error is not None:
        return [f"{head}  ERROR: {visible(gpu.error)}"]
    mem_pct = pct_of(gpu.memory_used_bytes, gpu.memory_total_bytes)
    usage = (
        f"VRAM {fmt_gib_pair(gpu.memory_used_bytes, gpu.memory_total_bytes)} "
        f"{fmt_pct(mem_pct):>4}  UTIL {fmt_pct(gpu.gpu_util_pct):>4}"
    )
    if two_lines:
        return [head, f"    {usage}  MEM {fmt_pct(gpu.mem_util_pct):>4}"]
    return [f"{head}  {usage}"]


def _box(title: str, lines: list[str], width: int) -> list[str]:
    inner = width - 2
    top = f"╭─ {title} " + "─" * (inner - len(title) - 3) + "╮"
    body = ["│" + pad(cut(" " + line, inner), inner) + "│" for line in lines]
    return [top, *body, "╰" + "─" * inner + "╯"]


def _process_lines(rows: list[ProcessRow], width: int) -> list[str]:
    """The table's header and rows at `width` cells, each column padded by one cell a side."""
    wide = width >= WIDE_FROM
    columns = [c for c in PROCESS_COLUMNS if wide or c[0] not in WIDE_ONLY]
    fixed = sum(w + 2 for _, _, w in columns)
    command_w = max(8, width - fixed - 3)
    header = "".join(f" {label:<{w}} " for _, label, w in columns) + " COMMAND"
    lines = [header]
    for row in rows:
        cells = _cells(row)
        line = "".join(
            f" {_aligned(cells[key], w, key in _LEFT_ALIGNED)} " for key, _, w in columns
        )
        lines.append(line + " " + cut(_command(row), command_w))
    return lines


def _aligned(text: str, width: int, left: bool) -> str:
    text = cut(text, width)
    return pad(text, width) if left else " " * (width - cell_width(text)) + text


def _cells(row: ProcessRow) -> dict[str, str]:
    return {
        "gpu": str(row.gpu_index),
        "pid": str(row.pid),
        "user": fmt_text(row.user),
        "gpu_mem": fmt_bytes(row.gpu_memory_bytes),
        "cpu": fmt_pct(row.cpu_pct),
        "rss": fmt_bytes(row.rss_bytes),
        "elapsed": fmt_duration(row.elapsed_s),
    }


def _command(row: ProcessRow) -> str:
    container = f"[{visible(row.container)}] " if row.container else ""
    return container + fmt_text(row.command)


def cell_width(text: str) -> int:
    """Terminal cells `text` takes: wide (CJK) characters two, combining marks none."""
    if text.isascii():
        return len(text)
    return sum(_char_width(char) for char in text)


def _char_width(char: str) -> int:
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def cut(text: str, width: int) -> str:
    """`text` in at most `width` cells, its end replaced by `…` when it is longer."""
    if cell_width(text) <= width:
        return text
    kept, used = [], 0
    for char in text:
        used += _char_width(char)
        if used > width - 1:
            break
        kept.append(char)
    return "".join(kept) + "…"


def pad(text: str, width: int) -> str:
    """`text` (at most `width` cells) filled with spaces to `width` cells."""
    return text + " " * max(0, width - cell_width(text))
