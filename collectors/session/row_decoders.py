"""Rows of a session CSV into samples: which cells each file has, their rules, the decoders."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from collectors.samples import GpuProcess, GpuSample, HostSample, ProcessInfo
from collectors.session import cells as c
from collectors.session.rows import CellTally, RowError, check_header, column_index
from collectors.session.session_format import GPU_FILE, HOST_FILE, METRICS_FILE, PROCESSES_FILE

Kind = c.CellRule | str
"""A `CellRule` for numbers, `"bool"`, `"text"` (kept as written) or `"text?"` (empty is None)."""

# column -> (sample field, kind); the key columns (t, gpu, pid) are read apart
GPU_CELLS: dict[str, tuple[str, Kind]] = {
    "uuid": ("uuid", "text"),
    "name": ("name", "text"),
    "mem_used_bytes": ("memory_used_bytes", c.BYTES),
    "mem_total_bytes": ("memory_total_bytes", c.BYTES),
    "mem_reserved_bytes": ("memory_reserved_bytes", c.BYTES),
    "util_gpu_pct": ("gpu_util_pct", c.PERCENT),
    "util_mem_pct": ("mem_util_pct", c.PERCENT),
    "temp_c": ("temperature_c", c.CELSIUS),
    "power_w": ("power_w", c.WATTS),
    "power_limit_w": ("power_limit_w", c.WATTS),
    "sm_clock_mhz": ("sm_clock_mhz", c.MHZ),
    "mem_clock_mhz": ("mem_clock_mhz", c.MHZ),
    "fan_pct": ("fan_pct", c.FAN_PERCENT),
    "pstate": ("pstate", c.PSTATE),
    "ecc_corrected": ("ecc_errors_corrected", c.COUNT),
    "ecc_uncorrected": ("ecc_errors_uncorrected", c.COUNT),
    "mig_mode": ("mig_mode", "bool"),
    "mem_peak_bytes": ("mem_peak_bytes", c.BYTES),
    "process_count": ("process_count", c.COUNT),
    "error": ("error", "text?"),
}
HOST_CELLS: dict[str, tuple[str, Kind]] = {
    "cpu_pct": ("cpu_pct", c.PERCENT),
    "cpu_count": ("cpu_count", c.CPU_COUNT),
    "mem_used_bytes": ("mem_used_bytes", c.BYTES),
    "mem_total_bytes": ("mem_total_bytes", c.BYTES),
    "swap_used_bytes": ("swap_used_bytes", c.BYTES),
    "swap_total_bytes": ("swap_total_bytes", c.BYTES),
    "load_1m": ("load_1m", c.LOAD),
    "load_5m": ("load_5m", c.LOAD),
    "load_15m": ("load_15m", c.LOAD),
    "disk_read_bytes_s": ("disk_read_bytes_s", c.RATE),
    "disk_write_bytes_s": ("disk_write_bytes_s", c.RATE),
    "net_rx_bytes_s": ("net_rx_bytes_s", c.RATE),
    "net_tx_bytes_s": ("net_tx_bytes_s", c.RATE),
}
PROCESS_CELLS: dict[str, tuple[str, Kind]] = {
    "used_bytes": ("used_memory_bytes", c.BYTES),
    "kind": ("kind", "text?"),
    "user": ("user", "text?"),
    "command": ("command", "text?"),
    "container": ("container", "text?"),
    "cpu_pct": ("cpu_pct", c.PROCESS_PERCENT),
    "rss_bytes": ("rss_bytes", c.BYTES),
    "started_at": ("started_at", c.TIME),
}
METRICS_CELLS: dict[str, tuple[str, Kind]] = {
    "line": ("line", c.LINE),
    "step": ("step", c.STEP),
    "epoch": ("epoch", c.EPOCH),
}
CELLS = {
    GPU_FILE: GPU_CELLS,
    HOST_FILE: HOST_CELLS,
    PROCESSES_FILE: PROCESS_CELLS,
    METRICS_FILE: METRICS_CELLS,
}
KEYS: dict[str, dict[str, c.CellRule]] = {
    GPU_FILE: {"t": c.TIME, "gpu": c.GPU_INDEX},
    PROCESSES_FILE: {"t": c.TIME, "gpu": c.GPU_INDEX, "pid": c.PID},
    HOST_FILE: {"t": c.TIME},
    METRICS_FILE: {"t": c.TIME},
}
"""Per file, the cells a row cannot do without: when one is not valid the row is skipped."""


def read_key(cells: Sequence[str], at: int, name: str, rule: c.CellRule) -> Any:
    """A key cell's value; `RowError` (the row is skipped) when it is empty or not valid."""
    text = cells[at]
    value, _ = rule.read(text)
    if value is None:
        raise RowError(f"{name}: {rule.why(text) if text else 'empty'}")
    return value


def _text(text: str) -> tuple[str, bool]:
    return text, False


def _text_or_none(text: str) -> tuple[str | None, bool]:
    return (text or None), False


Reader = Callable[[str], tuple[Any, bool]]
READERS: dict[str, Reader] = {"bool": c.read_bool, "text": _text, "text?": _text_or_none}


def reader_of(kind: Kind) -> Reader:
    """The cell reader of a kind: `(value, bad)` from the cell's text."""
    return kind.read if isinstance(kind, c.CellRule) else READERS[kind]


@dataclass(frozen=True)
class _Plan:
    """Where each known field sits in a file's rows (unknown columns are skipped)."""

    fields: tuple[tuple[int, str, str, Kind, Reader], ...]
    absent: tuple[str, ...]

    @classmethod
    def build(cls, header: Sequence[str], table: Mapping[str, tuple[str, Kind]]) -> _Plan:
        where = column_index(header)
        fields = tuple(
            (where[col], col, f, kind, reader_of(kind))
            for col, (f, kind) in table.items()
            if col in where
        )
        absent = tuple(f for col, (f, _) in table.items() if col not in where)
        return cls(fields, absent)

    def values(self, cells: Sequence[str], line: int, tally: CellTally | None) -> dict[str, Any]:
        out: dict[str, Any] = dict.fromkeys(self.absent)
        for i, column, field, kind, read in self.fields:
            value, bad = read(cells[i])
            if bad and tally is not None:
                why = kind.why(cells[i]) if isinstance(kind, c.CellRule) else "not 1 or 0"
                tally.bad_cell(line, column, why)
            out[field] = value
        return out


class RowCells:
    """The known cells of one file's rows, by column: a row's key check and its values.

    Streaming readers build samples from rows; the columnar reader of summaries uses this
    directly, so both skip the same rows and count the same bad cells.
    """

    def __init__(self, header: Sequence[str], file_name: str) -> None:
        check_header(header, file_name)
        self.file_name = file_name
        where = column_index(header)
        keys = sorted(KEYS[file_name].items(), key=lambda item: item[0] == "t")
        self._keys = tuple((where[col], col, rule) for col, rule in keys)
        table = CELLS[file_name]
        self._plan = _Plan.build(header, table)
        self.field_of = {col: field for col, (field, _) in table.items()}

    def keys(self, cells: Sequence[str]) -> dict[str, Any]:
        """The row's key cells (time, GPU, pid); `RowError` when one is not valid.

        Keys are checked in a fixed order (`gpu` and `pid` before `t`), so every reader names
        the same reason for a skipped row.
        """
        return {column: read_key(cells, at, column, rule) for at, column, rule in self._keys}

    def key(self, cells: Sequence[str]) -> float:
        """The row's time, after checking every key cell; `RowError` when one is not valid."""
        return float(self.keys(cells)["t"])

    def values(self, cells: Sequence[str], line: int, tally: CellTally | None) -> dict[str, Any]:
        """The row's known cells by sample field; bad cells are `None` and go to `tally`."""
        return self._plan.values(cells, line, tally)


class GpuRowDecoder:
    """Turns `gpu.csv` rows (lists of cells under `header`) into `GpuSample`s."""

    def __init__(self, header: Sequence[str]) -> None:
        check_header(header, GPU_FILE)
        where = column_index(header)
        self._t, self._gpu = where["t"], where["gpu"]
        self._count = where.get("process_count")
        self._plan = _Plan.build(header, GPU_CELLS)

    def t(self, cells: Sequence[str]) -> float:
        """The row's time; `RowError` when it is not a valid time."""
        return float(read_key(cells, self._t, "t", c.TIME))

    def index(self, cells: Sequence[str]) -> int:
        """The row's GPU index; `RowError` when it is not a valid index."""
        return int(read_key(cells, self._gpu, "gpu", c.GPU_INDEX))

    def sample(
        self,
        cells: Sequence[str],
        processes: tuple[GpuProcess, ...] | None,
        line: int = 0,
        tally: CellTally | None = None,
        index: int | None = None,
    ) -> GpuSample:
        """Build the GPU sample of one row; bad cells read as `None` and go to `tally`.

        `index` is the row's GPU index when the caller has read it already. A file without
        `uuid` names the GPU `GPU-<index>`, so GPUs stay apart.
        """
        if index is None:
            index = self.index(cells)
        values = self._plan.values(cells, line, tally)
        del values["process_count"], values["mem_peak_bytes"]  # checked, not sample fields
        values["uuid"] = values["uuid"] or f"GPU-{index}"
        values["name"] = values["name"] or ""
        return GpuSample(index=index, processes=processes, **values)

    def lists_processes(self, cells: Sequence[str]) -> bool | None:
        """Whether the row says the driver listed processes; `None` when the file cannot tell."""
        return None if self._count is None else cells[self._count] != ""


class ProcessRowDecoder:
    """Turns `processes.csv` rows into `GpuProcess` and `ProcessInfo` objects."""

    def __init__(self, header: Sequence[str]) -> None:
        check_header(header, PROCESSES_FILE)
        where = column_index(header)
        self._t, self._gpu, self._pid = where["t"], where["gpu"], where["pid"]
        self._driver = _Plan.build(header, {k: PROCESS_CELLS[k] for k in ("used_bytes", "kind")})
        self._details = _Plan.build(
            header, {k: v for k, v in PROCESS_CELLS.items() if k not in ("used_bytes", "kind")}
        )

    def t(self, cells: Sequence[str]) -> float:
        """The row's time; `RowError` when it is not a valid time."""
        return float(read_key(cells, self._t, "t", c.TIME))

    def gpu(self, cells: Sequence[str]) -> int:
        """The row's GPU index; `RowError` when it is not valid."""
        return int(read_key(cells, self._gpu, "gpu", c.GPU_INDEX))

    def pid(self, cells: Sequence[str]) -> int:
        """The row's pid; `RowError` when it is not valid."""
        return int(read_key(cells, self._pid, "pid", c.PID))

    def process(
        self,
        cells: Sequence[str],
        line: int = 0,
        tally: CellTally | None = None,
        pid: int | None = None,
    ) -> GpuProcess:
        """The driver's view: pid (when not read already), used memory and kind."""
        values = self._driver.values(cells, line, tally)
        return GpuProcess(
            self.pid(cells) if pid is None else pid,
            values["used_memory_bytes"],
            values["kind"] or "compute",
        )

    def check_details(self, cells: Sequence[str], line: int, tally: CellTally) -> None:
        """Count the bad cells among the row's host details, without building them."""
        for i, column, _, kind, read in self._details.fields:
            if read(cells[i])[1]:
                why = kind.why(cells[i]) if isinstance(kind, c.CellRule) else "not 1 or 0"
                tally.bad_cell(line, column, why)

    def info(
        self, cells: Sequence[str], line: int = 0, tally: CellTally | None = None
    ) -> ProcessInfo | None:
        """The host's view of the process, or `None` when the row carries no host details."""
        values = self._details.values(cells, line, tally)
        if all(v is None for v in values.values()):
            return None
        return ProcessInfo(pid=self.pid(cells), **values)


class HostRowDecoder:
    """Turns `host.csv` rows into `HostSample`s."""

    def __init__(self, header: Sequence[str]) -> None:
        check_header(header, HOST_FILE)
        self._t = column_index(header)["t"]
        self._plan = _Plan.build(header, HOST_CELLS)

    def t(self, cells: Sequence[str]) -> float:
        """The row's time; `RowError` when it is not a valid time."""
        return float(read_key(cells, self._t, "t", c.TIME))

    def sample(
        self,
        cells: Sequence[str],
        processes: tuple[ProcessInfo, ...] = (),
        line: int = 0,
        tally: CellTally | None = None,
    ) -> HostSample:
        """Build the host sample of one row; bad cells read as `None` and go to `tally`."""
        return HostSample(
            taken_at=self.t(cells), processes=processes, **self._plan.values(cells, line, tally)
        )
