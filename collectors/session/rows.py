"""Samples into session CSV rows (columns in `collectors.session.session_format`), and errors."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from collectors.base import GpuherdError
from collectors.samples import ContainerTick, GpuTick, HostSample, ProcessInfo
from collectors.session.session_format import REQUIRED_COLUMNS, WRITTEN_COLUMNS


class SessionError(GpuherdError):
    """A session directory cannot be used (missing, malformed, locked, unwritable)."""

    @property
    def shown(self) -> str:
        """The message alone: it names the directory or file, which says more than a title.

        `replay` and `summarize` print the same line.
        """
        return self.msg


class SessionFormatError(SessionError):
    """A file of a session directory is malformed; the message names the file and line."""

    def __init__(self, msg: str, path: str, line: int | None = None) -> None:
        where = path if line is None else f"{path}:{line}"
        super().__init__(f"{where}: {msg}", title="Session format")
        self.path = path
        self.line = line


class RowError(ValueError):
    """A row that cannot be placed (no valid time, GPU index or pid): it is skipped."""


class CellTally(Protocol):
    """Where a decoder reports a bad cell (it reads as `None`)."""

    def bad_cell(self, line: int, column: str, why: str) -> None:
        """Count one bad cell of `column` on `line`."""


def cell(value: object) -> str:
    """Format one value as a CSV cell: `None` is the empty cell, booleans are `1`/`0`."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return repr(value)
    return str(value)


NAME_CACHE_SIZE = 10_000
"""Distinct metric names whose quoted form is kept (a log has a few dozen)."""


class QuotedCells(dict[str, str]):
    """A string to its `metrics.csv` cell, quoted exactly as the `csv` module quotes it.

    A dict, so a name seen before costs one lookup in C (`quoted[name]`), no call.
    """

    def __init__(self) -> None:
        super().__init__()
        self._buffer = io.StringIO()
        # The terminator the session's writer uses: it decides whether `\n` needs quotes.
        self._writer = csv.writer(self._buffer, lineterminator="\n")

    def __missing__(self, text: str) -> str:
        self._buffer.seek(0)
        self._buffer.truncate()
        self._writer.writerow((text, None))  # a second cell: a lone "" is quoted alone
        quoted = self._buffer.getvalue()[:-2]  # less the empty cell and the terminator
        if len(self) >= NAME_CACHE_SIZE:
            self.clear()
        self[text] = quoted
        return quoted


def metric_lines(
    t_text: str,
    task_cell: str,
    line: int,
    values: Iterable[tuple[str, float]],
    step: int | None,
    epoch: float | None,
    quoted: QuotedCells,
) -> list[str]:
    """The `metrics.csv` lines of one parsed log line: one per (name, value), `METRICS_COLUMNS`.

    Text, not lists of cells: the recorder writes thousands of these a second and joins them
    into one write. Each line is what `csv.writer` writes of `cell` of each value (floats by
    `repr`, `None` as the empty cell); `task_cell` is the task already quoted (`quoted[task]`)
    and `t_text` the time as `cell` writes it.
    """
    head = f"{t_text},{task_cell},{line},"
    tail = f",{'' if step is None else step},{'' if epoch is None else repr(epoch)}\n"
    return [f"{head}{quoted[name]},{value!r}{tail}" for name, value in values]


def gpu_rows(tick: GpuTick, peaks_by_uuid: Mapping[str, int] | None = None) -> list[list[str]]:
    """The `gpu.csv` rows of one tick, in `GPU_COLUMNS` order."""
    t = cell(tick.taken_at)
    peaks = peaks_by_uuid or {}
    rows = []
    for d in tick.devices:
        count = None if d.processes is None else len(d.processes)
        values = (
            d.index,
            d.uuid,
            d.name,
            d.memory_used_bytes,
            d.memory_total_bytes,
            d.gpu_util_pct,
            d.mem_util_pct,
            d.temperature_c,
            d.power_w,
            d.memory_reserved_bytes,
            d.power_limit_w,
            d.sm_clock_mhz,
            d.mem_clock_mhz,
            d.fan_pct,
            d.pstate,
            d.ecc_errors_corrected,
            d.ecc_errors_uncorrected,
            d.mig_mode,
            peaks.get(d.uuid),
            count,
            d.error,
        )
        rows.append([t, *map(cell, values)])
    return rows


def process_rows(
    tick: GpuTick, details_by_pid: Mapping[int, ProcessInfo] | None = None
) -> list[list[str]]:
    """The `processes.csv` rows of one tick, joined with host details where known."""
    t = cell(tick.taken_at)
    details = details_by_pid or {}
    rows = []
    for d in tick.devices:
        for p in d.processes or ():
            info = details.get(p.pid)
            extra: tuple[object, ...] = (None,) * 6
            if info is not None:
                extra = (
                    info.user,
                    info.command,
                    info.container,
                    info.cpu_pct,
                    info.rss_bytes,
                    info.started_at,
                )
            values = (d.index, p.pid, p.used_memory_bytes, p.kind, *extra)
            rows.append([t, *map(cell, values)])
    return rows


def host_row(sample: HostSample) -> list[str]:
    """The `host.csv` row of one host sample, in `HOST_COLUMNS` order."""
    s = sample
    values = (
        s.taken_at,
        s.cpu_pct,
        s.mem_used_bytes,
        s.mem_total_bytes,
        s.cpu_count,
        s.swap_used_bytes,
        s.swap_total_bytes,
        s.load_1m,
        s.load_5m,
        s.load_15m,
        s.disk_read_bytes_s,
        s.disk_write_bytes_s,
        s.net_rx_bytes_s,
        s.net_tx_bytes_s,
    )
    return [cell(v) for v in values]


def container_rows(
    tick: ContainerTick, gpu_memory: Mapping[str, int | None] | None = None
) -> list[list[str]]:
    """The `containers.csv` rows of one tick, in `CONTAINER_COLUMNS` order.

    Args:
        tick: every running container at one moment.
        gpu_memory: GPU memory per short container id (`collectors.machine.container_gpu`); a
            container it does not list holds none. `None` when GPU processes are not known:
            the column is then empty.
    """
    t = cell(tick.taken_at)
    rows = []
    for c in tick.containers:
        gpu_mem = None if gpu_memory is None else gpu_memory.get(c.short_id, 0)
        values = (
            c.id,
            c.name,
            c.image,
            c.status,
            c.cpu_pct,
            c.memory_used_bytes,
            c.memory_limit_bytes,
            c.started_at,
            c.net_rx_bytes_per_s,
            c.net_tx_bytes_per_s,
            c.block_read_bytes_per_s,
            c.block_write_bytes_per_s,
            c.pids,
            " ".join(c.gpu_devices),
            gpu_mem,
        )
        rows.append([t, *map(cell, values)])
    return rows


def check_header(header: Sequence[str], file_name: str, where: str | None = None) -> None:
    """Raise `SessionFormatError` when a column `file_name` cannot do without is missing.

    Args:
        header: the column names of the file's first line.
        file_name: the bare file name (`gpu.csv`), which decides the required columns.
        where: the path to name in the message; `file_name` when not given.
    """
    missing = [col for col in REQUIRED_COLUMNS.get(file_name, ()) if col not in header]
    if missing:
        raise SessionFormatError(
            f"missing required column(s): {', '.join(missing)}", where or file_name, 1
        )


def missing_written(header: Sequence[str], file_name: str) -> list[str]:
    """Columns every recorder writes that this header lacks (they read as empty)."""
    return [col for col in WRITTEN_COLUMNS.get(file_name, ()) if col not in header]


def column_index(header: Sequence[str]) -> dict[str, int]:
    """Column name -> position; a name given twice is read from its first column."""
    where: dict[str, int] = {}
    for i, name in enumerate(header):
        where.setdefault(name, i)
    return where
