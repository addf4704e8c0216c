"""`containers.csv` rows into `ContainerTick`s for a replay, and into rows for a summary."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

from collectors.samples import ContainerSample, ContainerTick
from collectors.session import cells as c
from collectors.session.row_decoders import Kind, _Plan, read_key
from collectors.session.rows import CellTally, RowError, check_header, column_index
from collectors.session.session_csv import CsvStream
from collectors.session.session_format import CONTAINERS_FILE
from collectors.session.session_joins import keyed

# column -> (field, kind); `t` and `id` are the key cells, read apart.
CONTAINER_CELLS: dict[str, tuple[str, Kind]] = {
    "name": ("name", "text"),
    "image": ("image", "text"),
    "status": ("status", "text"),
    "cpu_pct": ("cpu_pct", c.PROCESS_PERCENT),
    "mem_used_bytes": ("memory_used_bytes", c.BYTES),
    "mem_limit_bytes": ("memory_limit_bytes", c.BYTES),
    "started_at": ("started_at", c.TIME),
    "net_rx_bytes_s": ("net_rx_bytes_per_s", c.RATE),
    "net_tx_bytes_s": ("net_tx_bytes_per_s", c.RATE),
    "block_read_bytes_s": ("block_read_bytes_per_s", c.RATE),
    "block_write_bytes_s": ("block_write_bytes_per_s", c.RATE),
    "pids": ("pids", c.COUNT),
    "gpus": ("gpu_devices", "text"),
    "gpu_mem_bytes": ("gpu_mem_bytes", c.BYTES),
}
ID_LENGTH = 12
"""An id shorter than a short id cannot be matched to a process's container: the row is skipped."""


@dataclass(frozen=True, slots=True)
class ContainerRow:
    """One row: the recorded sample and the container's GPU memory at that time."""

    t: float
    sample: ContainerSample
    gpu_mem_bytes: int | None
    """Its GPU processes' memory when recorded; `None` when GPU processes were not known."""


class ContainerRowDecoder:
    """Turns `containers.csv` rows into `ContainerRow`s; unknown columns are skipped.

    A row without a valid `id` (at least 12 characters) or `t` is skipped (`RowError`); a bad
    number reads as `None` and is counted.
    """

    def __init__(self, header: Sequence[str]) -> None:
        check_header(header, CONTAINERS_FILE)
        where = column_index(header)
        self._t, self._id = where["t"], where["id"]
        self._plan = _Plan.build(header, CONTAINER_CELLS)  # the other files' cell plan

    def key(self, cells: Sequence[str]) -> tuple[float, str]:
        """The row's time and container id; `RowError` when one is not valid (id first)."""
        cid = cells[self._id].strip()
        if len(cid) < ID_LENGTH:
            raise RowError(f"id: {cid!r} is not a container id" if cid else "id: empty")
        return float(read_key(cells, self._t, "t", c.TIME)), cid

    def row(self, line: int, cells: Sequence[str], tally: CellTally | None = None) -> ContainerRow:
        """Decode one record; `RowError` when it cannot be placed."""
        t, cid = self.key(cells)
        values = self._plan.values(cells, line, tally)
        gpu_mem = values.pop("gpu_mem_bytes")
        values["gpu_devices"] = tuple((values["gpu_devices"] or "").split())
        for text in ("name", "image", "status"):
            values[text] = values[text] or ""
        values["name"] = values["name"] or cid[:ID_LENGTH]
        return ContainerRow(t, ContainerSample(id=cid, short_id=cid[:ID_LENGTH], **values), gpu_mem)

    def columns(self, row: ContainerRow) -> dict[str, Any]:
        """A decoded row by column name (the columnar reader's slow path)."""
        sample = row.sample
        out: dict[str, Any] = {
            "t": row.t,
            "id": sample.id,
            "gpu_mem_bytes": row.gpu_mem_bytes,
            "gpus": " ".join(sample.gpu_devices),
        }
        for column, (field, _) in CONTAINER_CELLS.items():
            out.setdefault(column, getattr(sample, field, None))
        return out


def container_rows(stream: CsvStream) -> Generator[ContainerRow, None, None]:
    """Every valid row of `containers.csv`; the others are skipped and counted in its tally."""
    decoder = ContainerRowDecoder(stream.header)
    for _, (line, cells) in keyed(stream, decoder.key):
        yield decoder.row(line, cells, stream.tally)


def container_ticks(
    stream: CsvStream, interval_s: float | None = None, end_t: float | None = None
) -> Generator[ContainerTick, None, None]:
    """The recorded ticks: rows with one `t` form one `ContainerTick`.

    A moment without a running container has no row. So with the recording's `interval_s`, a
    gap of more than 1.5 intervals between rows, or after the last row up to the session's
    `end_t`, gives an empty tick one interval after the rows before it: the containers stopped.
    """
    group: list[ContainerSample] = []
    group_t = 0.0
    for row in container_rows(stream):
        if group and row.t != group_t:
            yield ContainerTick(group_t, tuple(group))
            yield from _none_between(group_t, row.t, interval_s)
            group = []
        group_t = row.t
        group.append(row.sample)
    if group:
        yield ContainerTick(group_t, tuple(group))
        if end_t is not None:
            yield from _none_between(group_t, end_t, interval_s)


def _none_between(
    last_t: float, next_t: float, interval_s: float | None
) -> Generator[ContainerTick, None, None]:
    if interval_s and next_t - last_t > 1.5 * interval_s:
        yield ContainerTick(last_t + interval_s, ())
