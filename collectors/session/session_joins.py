"""Samples from a session's rows: `gpu.csv` grouped into ticks and joined with `processes.csv`."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import Any, TypeVar

from collectors.samples import GpuProcess, GpuSample, GpuTick, HostSample, ProcessInfo
from collectors.session.row_decoders import (
    GpuRowDecoder,
    HostRowDecoder,
    ProcessRowDecoder,
    RowCells,
)
from collectors.session.rows import RowError
from collectors.session.session_csv import CsvStream, FileTally, Row
from collectors.session.session_format import GPU_FILE, HOST_FILE, META, PROCESSES_FILE

T = TypeVar("T")


def keyed(stream: CsvStream, key: Callable[[list[str]], T]) -> Iterator[tuple[T, Row]]:
    """`(keys, row)` for each row whose key cells are valid; the others are skipped, counted."""
    for row in stream:
        try:
            yield key(row[1]), row
        except RowError as error:
            stream.tally.skip(row[0], str(error))


class _Processes:
    """Process rows with their time and key cells, one row of look-ahead."""

    def __init__(self, stream: CsvStream) -> None:
        self.decoder = ProcessRowDecoder(stream.header)
        self.tally: FileTally = stream.tally
        self._rows = keyed(stream, RowCells(stream.header, PROCESSES_FILE).keys)
        self._next: tuple[dict[str, Any], Row] | None = None
        self._done = False

    def peek(self) -> tuple[dict[str, Any], Row] | None:
        """The next row and its keys (`t`, `gpu`, `pid`), without consuming it."""
        if self._next is None and not self._done:
            self._next = next(self._rows, None)
            self._done = self._next is None
        return self._next

    def take_at(self, t: float) -> list[tuple[dict[str, Any], Row]]:
        """Consume and return the rows recorded at `t`, skipping older ones."""
        out = []
        while (head := self.peek()) is not None and head[0]["t"] <= t:
            if head[0]["t"] == t:
                out.append(head)
            self._next = None
        return out

    def listing_between(self, start: float, end: float | None) -> list[tuple[dict[str, Any], Row]]:
        """Consume and return the first listing with `start <= t < end`; skip older rows.

        The recorder writes each host sample's process details into the GPU listings that
        follow it, until the next host sample: that listing is this host sample's view.
        """
        while (head := self.peek()) is not None and head[0]["t"] < start:
            self._next = None
        if head is None or (end is not None and head[0]["t"] >= end):
            return []
        return self.take_at(head[0]["t"])


def cuda_version_text(value: object) -> str | None:
    """The CUDA driver version as people write it (`13.0`), however `meta.json` holds it.

    The driver reports an integer, 1000 x major + 10 x minor (13000, 12040); a session may hold
    that number (or it as text) or the text gpuherd shows live (`13.0`).
    """
    if value is None or isinstance(value, bool):
        return None
    text = str(value).strip()
    if text.isdigit() and int(text) >= 1000:
        number = int(text)
        return f"{number // 1000}.{number % 1000 // 10}"
    return text or None


def ticks(
    gpu: CsvStream, procs: CsvStream | None, meta: dict[str, Any]
) -> Generator[GpuTick, None, None]:
    """The GPU ticks of `gpu.csv` (rows with one `t`), processes joined from `procs`."""
    decoder = GpuRowDecoder(gpu.header)
    joined = _Processes(procs) if procs is not None else None
    versions = (
        meta.get(META.driver),
        meta.get(META.nvml_version),
        cuda_version_text(meta.get(META.cuda_driver_version)),
    )

    group: list[tuple[int, Row]] = []
    group_t = 0.0
    for keys, row in keyed(gpu, RowCells(gpu.header, GPU_FILE).keys):
        t = keys["t"]
        if group and t != group_t:
            yield GpuTick(group_t, _devices(decoder, gpu.tally, group_t, group, joined), *versions)
            group = []
        group_t = t
        group.append((keys["gpu"], row))
    if group:
        yield GpuTick(group_t, _devices(decoder, gpu.tally, group_t, group, joined), *versions)


def _devices(
    decoder: GpuRowDecoder,
    tally: FileTally,
    t: float,
    group: list[tuple[int, Row]],
    procs: _Processes | None,
) -> tuple[GpuSample, ...]:
    by_gpu: dict[int, list[GpuProcess]] = {}
    if procs is not None:
        for keys, (line, cells) in procs.take_at(t):
            by_gpu.setdefault(keys["gpu"], []).append(
                procs.decoder.process(cells, line, procs.tally, keys["pid"])
            )
            procs.decoder.check_details(cells, line, procs.tally)  # counted here, once
    devices = []
    for index, (line, cells) in group:
        listed = decoder.lists_processes(cells)
        processes: tuple[GpuProcess, ...] | None = None
        if listed or (listed is None and procs is not None):
            processes = tuple(by_gpu.get(index, ()))
        devices.append(decoder.sample(cells, processes, line, tally, index))
    return tuple(devices)


def hosts(host: CsvStream, procs: CsvStream | None) -> Generator[HostSample, None, None]:
    """The host samples of `host.csv`, each with the process details of its listing."""
    decoder = HostRowDecoder(host.header)
    joined = _Processes(procs) if procs is not None else None
    rows = keyed(host, RowCells(host.header, HOST_FILE).key)
    item = next(rows, None)
    while item is not None:
        after = next(rows, None)
        t, (line, cells) = item
        details: tuple[ProcessInfo, ...] = ()
        if joined is not None:
            listing = joined.listing_between(t, None if after is None else after[0])
            details = _details(joined, listing)
        yield decoder.sample(cells, details, line, host.tally)
        item = after


def _details(
    procs: _Processes, listing: list[tuple[dict[str, Any], Row]]
) -> tuple[ProcessInfo, ...]:
    seen: dict[int, ProcessInfo] = {}
    for _, (line, cells) in listing:
        # The GPU tick that joined this listing has counted its bad cells already.
        info = procs.decoder.info(cells, line, None)
        if info is not None and info.pid not in seen:
            seen[info.pid] = info
    return tuple(seen.values())
