"""Session-directory columns and the pure conversions between samples and CSV rows."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from collectors.base import GpuherdError
from collectors.samples import GpuProcess, GpuSample, GpuTick, HostSample, ProcessInfo

GPU_FILE = "gpu.csv"
PROCESSES_FILE = "processes.csv"
HOST_FILE = "host.csv"

GPU_REQUIRED = (
    "t", "gpu", "uuid", "name", "mem_used_bytes", "mem_total_bytes",
    "util_gpu_pct", "util_mem_pct", "temp_c", "power_w",
)
GPU_COLUMNS = GPU_REQUIRED + (
    "mem_reserved_bytes", "power_limit_w", "sm_clock_mhz", "mem_clock_mhz", "fan_pct", "pstate",
    "ecc_corrected", "ecc_uncorrected", "mig_mode", "mem_peak_bytes", "process_count", "error",
)
PROCESS_REQUIRED = ("t", "gpu", "pid", "used_bytes")
PROCESS_COLUMNS = PROCESS_REQUIRED + (
    "kind", "user", "command", "container", "cpu_pct", "rss_bytes", "started_at",
)
HOST_REQUIRED = ("t", "cpu_pct", "mem_used_bytes", "mem_total_bytes")
HOST_COLUMNS = HOST_REQUIRED + (
    "cpu_count", "swap_used_bytes", "swap_total_bytes", "load_1m", "load_5m", "load_15m",
    "disk_read_bytes_s", "disk_write_bytes_s", "net_rx_bytes_s", "net_tx_bytes_s",
)
REQUIRED_COLUMNS = {
    GPU_FILE: GPU_REQUIRED, PROCESSES_FILE: PROCESS_REQUIRED, HOST_FILE: HOST_REQUIRED,
}


class SessionError(GpuherdError):
    """A session directory cannot be used (missing, malformed, locked, unwritable)."""


class SessionFormatError(SessionError):
    """A file of a session directory is malformed; the message names the file and line."""

    def __init__(self, msg: str, path: str, line: int | None = None) -> None:
        where = path if line is None else f"{path}, line {line}"
        super().__init__(f"{where}: {msg}", title="Session format")
        self.path = path
        self.line = line


def cell(value: object) -> str:
    """Format one value as a CSV cell: `None` is the empty cell, booleans are `1`/`0`."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def parse_float(text: str) -> float | None:
    """Read a float cell; empty is `None`. Raises `ValueError` on anything else."""
    return float(text) if text else None


def parse_int(text: str) -> int | None:
    """Read an integer cell, accepting `12.0` as written by spreadsheets and pandas."""
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        value = float(text)
        if not math.isfinite(value) or not value.is_integer():
            raise ValueError(f"{text!r} is not a whole number") from None
        return int(value)


def parse_bool(text: str) -> bool | None:
    """Read a `1`/`0` (or `true`/`false`) cell."""
    if not text:
        return None
    low = text.strip().lower()
    if low in ("1", "true", "yes"):
        return True
    if low in ("0", "false", "no"):
        return False
    raise ValueError(f"{text!r} is not 1 or 0")


def parse_str(text: str) -> str | None:
    """Read a text cell; empty is `None`."""
    return text or None


Parser = Callable[[str], Any]

# column -> (GpuSample field, parser)
_GPU_FIELDS: dict[str, tuple[str, Parser]] = {
    "gpu": ("index", parse_int), "uuid": ("uuid", str), "name": ("name", str),
    "mem_used_bytes": ("memory_used_bytes", parse_int),
    "mem_total_bytes": ("memory_total_bytes", parse_int),
    "mem_reserved_bytes": ("memory_reserved_bytes", parse_int),
    "util_gpu_pct": ("gpu_util_pct", parse_float), "util_mem_pct": ("mem_util_pct", parse_float),
    "temp_c": ("temperature_c", parse_float), "power_w": ("power_w", parse_float),
    "power_limit_w": ("power_limit_w", parse_float), "sm_clock_mhz": ("sm_clock_mhz", parse_int),
    "mem_clock_mhz": ("mem_clock_mhz", parse_int), "fan_pct": ("fan_pct", parse_float),
    "pstate": ("pstate", parse_int), "ecc_corrected": ("ecc_errors_corrected", parse_int),
    "ecc_uncorrected": ("ecc_errors_uncorrected", parse_int), "mig_mode": ("mig_mode", parse_bool),
    "error": ("error", parse_str),
}
_HOST_FIELDS: dict[str, tuple[str, Parser]] = {
    "cpu_pct": ("cpu_pct", parse_float), "cpu_count": ("cpu_count", parse_int),
    "mem_used_bytes": ("mem_used_bytes", parse_int),
    "mem_total_bytes": ("mem_total_bytes", parse_int),
    "swap_used_bytes": ("swap_used_bytes", parse_int),
    "swap_total_bytes": ("swap_total_bytes", parse_int),
    "load_1m": ("load_1m", parse_float), "load_5m": ("load_5m", parse_float),
    "load_15m": ("load_15m", parse_float),
    "disk_read_bytes_s": ("disk_read_bytes_s", parse_float),
    "disk_write_bytes_s": ("disk_write_bytes_s", parse_float),
    "net_rx_bytes_s": ("net_rx_bytes_s", parse_float),
    "net_tx_bytes_s": ("net_tx_bytes_s", parse_float),
}
_DETAIL_FIELDS: dict[str, tuple[str, Parser]] = {
    "user": ("user", parse_str), "command": ("command", parse_str),
    "container": ("container", parse_str), "cpu_pct": ("cpu_pct", parse_float),
    "rss_bytes": ("rss_bytes", parse_int), "started_at": ("started_at", parse_float),
}


def gpu_rows(tick: GpuTick, peaks_by_uuid: Mapping[str, int] | None = None) -> list[list[str]]:
    """The `gpu.csv` rows of one tick, in `GPU_COLUMNS` order."""
    t = cell(tick.taken_at)
    peaks = peaks_by_uuid or {}
    rows = []
    for d in tick.devices:
        count = None if d.processes is None else len(d.processes)
        values = (
            d.index, d.uuid, d.name, d.memory_used_bytes, d.memory_total_bytes, d.gpu_util_pct,
            d.mem_util_pct, d.temperature_c, d.power_w, d.memory_reserved_bytes, d.power_limit_w,
            d.sm_clock_mhz, d.mem_clock_mhz, d.fan_pct, d.pstate, d.ecc_errors_corrected,
            d.ecc_errors_uncorrected, d.mig_mode, peaks.get(d.uuid), count, d.error,
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
                extra = (info.user, info.command, info.container, info.cpu_pct, info.rss_bytes,
                         info.started_at)
            values = (d.index, p.pid, p.used_memory_bytes, p.kind, *extra)
            rows.append([t, *map(cell, values)])
    return rows


def host_row(sample: HostSample) -> list[str]:
    """The `host.csv` row of one host sample, in `HOST_COLUMNS` order."""
    s = sample
    values = (
        s.taken_at, s.cpu_pct, s.mem_used_bytes, s.mem_total_bytes, s.cpu_count,
        s.swap_used_bytes, s.swap_total_bytes, s.load_1m, s.load_5m, s.load_15m,
        s.disk_read_bytes_s, s.disk_write_bytes_s, s.net_rx_bytes_s, s.net_tx_bytes_s,
    )
    return [cell(v) for v in values]


def check_header(header: Sequence[str], file_name: str, where: str | None = None) -> None:
    """Raise `SessionFormatError` when a required column of `file_name` is missing.

    Args:
        header: the column names of the file's first line.
        file_name: the bare file name (`gpu.csv`), which decides the required columns.
        where: the path to name in the message; `file_name` when not given.
    """
    missing = [c for c in REQUIRED_COLUMNS.get(file_name, ()) if c not in header]
    if missing:
        raise SessionFormatError(
            f"missing required column(s): {', '.join(missing)}", where or file_name, 1
        )


@dataclass(frozen=True)
class _Plan:
    """Where each known field sits in a file's rows (unknown columns are skipped)."""

    t: int
    fields: tuple[tuple[int, str, Parser], ...]

    @classmethod
    def build(cls, header: Sequence[str], table: Mapping[str, tuple[str, Parser]]) -> _Plan:
        where = {name: i for i, name in enumerate(header)}
        fields = tuple((where[c], f, p) for c, (f, p) in table.items() if c in where)
        return cls(where["t"], fields)

    def values(self, cells: Sequence[str]) -> dict[str, Any]:
        out = {}
        for i, field, parse in self.fields:
            try:
                out[field] = parse(cells[i])
            except ValueError as error:
                raise ValueError(f"bad value {cells[i]!r} for {field}: {error}") from None
        return out


class GpuRowDecoder:
    """Turns `gpu.csv` rows (lists of cells under `header`) into `GpuSample`s."""

    def __init__(self, header: Sequence[str]) -> None:
        check_header(header, GPU_FILE)
        self._plan = _Plan.build(header, _GPU_FIELDS)
        self._gpu = list(header).index("gpu")
        self._count = header.index("process_count") if "process_count" in header else None
        self._peak = header.index("mem_peak_bytes") if "mem_peak_bytes" in header else None

    def t(self, cells: Sequence[str]) -> float:
        """The row's time; raises `ValueError` when it is not a number."""
        return float(cells[self._plan.t])

    def index(self, cells: Sequence[str]) -> int:
        """The row's GPU index."""
        return int(cells[self._gpu])

    def lists_processes(self, cells: Sequence[str]) -> bool | None:
        """Whether the row says the driver listed processes; `None` when the file cannot tell."""
        if self._count is None:
            return None
        return cells[self._count] != ""

    def peak_bytes(self, cells: Sequence[str]) -> int | None:
        """The row's `mem_peak_bytes`, when the file has that column."""
        return None if self._peak is None else parse_int(cells[self._peak])

    def sample(self, cells: Sequence[str], processes: tuple[GpuProcess, ...] | None) -> GpuSample:
        """Build the GPU sample of one row; raises `ValueError` on a bad cell."""
        values = self._plan.values(cells)
        if values["index"] is None:
            raise ValueError("empty gpu index")
        return GpuSample(processes=processes, **values)


class ProcessRowDecoder:
    """Turns `processes.csv` rows into `GpuProcess` and `ProcessInfo` objects."""

    def __init__(self, header: Sequence[str]) -> None:
        check_header(header, PROCESSES_FILE)
        where = {name: i for i, name in enumerate(header)}
        self._t, self._gpu, self._pid, self._used = (where[c] for c in PROCESS_REQUIRED)
        self._kind = where.get("kind")
        self._details = _Plan.build(header, _DETAIL_FIELDS)

    def t(self, cells: Sequence[str]) -> float:
        """The row's time."""
        return float(cells[self._t])

    def gpu(self, cells: Sequence[str]) -> int:
        """The row's GPU index."""
        return int(cells[self._gpu])

    def process(self, cells: Sequence[str]) -> GpuProcess:
        """The driver's view: pid, used memory and kind."""
        kind = cells[self._kind] if self._kind is not None and cells[self._kind] else "compute"
        return GpuProcess(int(cells[self._pid]), parse_int(cells[self._used]), kind)

    def info(self, cells: Sequence[str]) -> ProcessInfo | None:
        """The host's view of the process, or `None` when the row carries no host details."""
        values = self._details.values(cells)
        if all(v is None for v in values.values()):
            return None
        return ProcessInfo(pid=int(cells[self._pid]), **values)


class HostRowDecoder:
    """Turns `host.csv` rows into `HostSample`s."""

    def __init__(self, header: Sequence[str]) -> None:
        check_header(header, HOST_FILE)
        self._plan = _Plan.build(header, _HOST_FIELDS)

    def t(self, cells: Sequence[str]) -> float:
        """The row's time."""
        return float(cells[self._plan.t])

    def sample(self, cells: Sequence[str], processes: tuple[ProcessInfo, ...] = ()) -> HostSample:
        """Build the host sample of one row; raises `ValueError` on a bad cell."""
        return HostSample(taken_at=self.t(cells), processes=processes, **self._plan.values(cells))
