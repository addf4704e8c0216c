"""Reading a recorded session directory: `meta.json` checks and streaming CSV and JSONL rows."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable, Generator
from contextlib import closing
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from collectors.rows import (
    GPU_FILE,
    HOST_FILE,
    PROCESSES_FILE,
    GpuRowDecoder,
    HostRowDecoder,
    ProcessRowDecoder,
    SessionError,
    SessionFormatError,
    check_header,
)
from collectors.samples import GpuProcess, GpuTick, HostSample, ProcessInfo

__all__ = [
    "SCHEMA",
    "CsvStream",
    "SessionError",
    "SessionFormatError",
    "SessionReader",
    "meta_problem",
    "read_meta",
]

SCHEMA = 1
"""The `meta.json` schema number this version writes and reads."""

META_FILE = "meta.json"
EVENTS_FILE = "events.jsonl"
MAX_CELL_CHARS = 1 << 24
T = TypeVar("T")
Row = tuple[int, list[str]]
"""A CSV record: its 1-based line number and its cells."""


def read_meta(directory: Path) -> dict[str, Any]:
    """Read and validate `meta.json`; raise `SessionFormatError` naming the file otherwise."""
    path = directory / META_FILE
    if not directory.is_dir():
        what = "no such directory" if not directory.exists() else "not a directory"
        raise SessionFormatError(f"{what}, so not a gpuherd session", str(directory))
    try:
        text = path.read_text(encoding="utf-8-sig", errors="replace")
    except FileNotFoundError:
        raise SessionFormatError(
            "missing: this is not a gpuherd session directory", str(path)
        ) from None
    except OSError as error:
        raise SessionFormatError(f"cannot read: {error.strerror}", str(path)) from error
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as error:
        raise SessionFormatError(f"not valid JSON ({error.msg}, column {error.colno})",
                                 str(path), error.lineno) from None
    problem = meta_problem(meta)
    if problem:
        raise SessionFormatError(problem, str(path))
    return meta


def meta_problem(meta: object) -> str | None:
    """What is wrong with a `meta.json` object, in words; `None` when it is valid."""
    if not isinstance(meta, dict):
        return "must hold a JSON object"
    missing = [k for k in ("schema", "host", "driver", "started_at") if k not in meta]
    if missing:
        return f"missing required key(s): {', '.join(missing)}"
    schema = meta["schema"]
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        return f"'schema' must be a positive integer, not {schema!r}"
    if schema > SCHEMA:
        return f"schema {schema} is newer than this gpuherd reads ({SCHEMA}); upgrade gpuherd"
    if not isinstance(meta["host"], str):
        return "'host' must be a string"
    if meta["driver"] is not None and not isinstance(meta["driver"], str):
        return "'driver' must be a string or null"
    for key in ("started_at", "ended_at", "interval_s"):
        value = meta.get(key)
        if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)):
            return f"'{key}' must be a number"
    if meta["started_at"] is None:
        return "'started_at' must be a number"
    return None


class _Warnings(list[str]):
    """Warnings said once each, however often a file is read again (a looping replay)."""

    def add(self, text: str) -> None:
        if text not in self:
            self.append(text)


class CsvStream:
    """Streams the records of one CSV file of a session, applying the reading rules.

    A final record that is cut short (no newline at the end of the file, or the wrong number of
    cells) is dropped with a warning; any other record with the wrong number of cells, or a CSV
    syntax error, raises `SessionFormatError` with the file and the 1-based line number.
    """

    def __init__(self, path: Path, warnings: _Warnings) -> None:
        if csv.field_size_limit() < MAX_CELL_CHARS:
            # The default 128 KiB limit would turn a very long recorded command line into an
            # "unreadable" session; the limit is process-wide and only ever raised here.
            csv.field_size_limit(MAX_CELL_CHARS)
        self.path = path
        self._warnings = warnings
        self.ends_with_newline = _ends_with_newline(path)
        self._file = path.open(newline="", encoding="utf-8-sig", errors="replace")
        self._reader = csv.reader(self._file)
        try:
            self.header: list[str] = next(self._reader)
        except StopIteration:
            self.close()
            raise SessionFormatError("empty file: no header line", str(path), 1) from None
        except csv.Error as error:
            self.close()
            raise SessionFormatError(f"unreadable CSV: {error}", str(path), 1) from None
        try:
            check_header(self.header, path.name, str(path))
        except SessionFormatError:
            self.close()
            raise

    def __enter__(self) -> CsvStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the file."""
        self._file.close()

    def __iter__(self) -> Generator[Row, None, None]:
        width, reader, name = len(self.header), self._reader, str(self.path)
        held: Row | None = None
        while True:
            try:
                cells = next(reader)
            except StopIteration:
                break
            except csv.Error as error:
                raise SessionFormatError(
                    f"unreadable CSV: {error}", name, reader.line_num) from None
            if not cells:
                continue
            if held is not None:
                if len(held[1]) != width:
                    raise SessionFormatError(
                        f"{len(held[1])} cells where the header has {width}", name, held[0])
                yield held
            held = (reader.line_num, cells)
        if held is None:
            return
        if not self.ends_with_newline:
            self._warnings.add(f"{name}: dropped the last line, cut short (no newline at the end)")
        elif len(held[1]) != width:
            self._warnings.add(f"{name}: dropped the last line, cut short "
                               f"({len(held[1])} cells where the header has {width})")
        else:
            yield held


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return True
        f.seek(size - 1)
        return f.read(1) == b"\n"


def _last_t(path: Path, header: list[str]) -> float | None:
    """The `t` of the last complete row, read from the file's tail (no full scan)."""
    with path.open("rb") as f:
        size = f.seek(0, os.SEEK_END)
        block = min(size, 1 << 16)
        f.seek(size - block)
        lines = f.read(block).split(b"\n")[:-1]  # drops the part after the last newline
    if block < size:
        lines = lines[1:]
    where = header.index("t")
    for raw in reversed(lines):
        cells = next(csv.reader([raw.decode("utf-8", "replace")]), [])
        if len(cells) == len(header):
            try:
                return float(cells[where])
            except ValueError:
                continue
    return None


class _Peekable:
    """Process rows with their time, one row of look-ahead."""

    def __init__(self, stream: CsvStream) -> None:
        self.decoder = ProcessRowDecoder(stream.header)
        self._rows = iter(stream)
        self.name = str(stream.path)
        self._next: tuple[float, Row] | None = None
        self._done = False

    def peek(self) -> tuple[float, Row] | None:
        if self._next is None and not self._done:
            row = next(self._rows, None)
            if row is None:
                self._done = True
            else:
                self._next = (_at(self.name, row, self.decoder.t), row)
        return self._next

    def take_at(self, t: float) -> list[Row]:
        """Consume and return the rows recorded at `t`, skipping older ones."""
        out = []
        while (head := self.peek()) is not None and head[0] <= t:
            if head[0] == t:
                out.append(head[1])
            self._next = None
        return out

    def listing_between(self, start: float, end: float | None) -> list[Row]:
        """Consume and return the first listing with `start <= t < end`; skip older rows.

        The recorder writes each host sample's process details into the GPU listings that
        follow it, until the next host sample: that listing is this host sample's view.
        """
        while (head := self.peek()) is not None and head[0] < start:
            self._next = None
        if head is None or (end is not None and head[0] >= end):
            return []
        return self.take_at(head[0])


def _at(name: str, row: Row, read: Callable[[list[str]], T]) -> T:
    """Apply a row decoder, turning a bad cell into an error that names the file and line."""
    try:
        return read(row[1])
    except (ValueError, TypeError) as error:
        raise SessionFormatError(str(error), name, row[0]) from None


class SessionReader:
    """A validated session directory: `meta.json` checked, CSV headers checked, tails read.

    Construction is cheap (no full scan) and raises `SessionFormatError` for a missing or garbled
    `meta.json`, a missing `gpu.csv` or a missing required column. Rows are read streaming by the
    iterators; `check()` reads everything once to find a bad line before a replay starts.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self.meta = read_meta(self.directory)
        self.warnings: _Warnings = _Warnings()
        """Things the reader dropped or doubted, each said once (for example a cut last line)."""
        self.headers: dict[str, list[str]] = {}
        self.last_t: dict[str, float | None] = {}
        for name in (GPU_FILE, PROCESSES_FILE, HOST_FILE):
            if name != GPU_FILE and self.has(name) and not (self.directory / name).stat().st_size:
                # A recorder killed between creating an optional file and writing its header.
                self.warnings.add(f"{self.directory / name}: empty, ignored")
            elif name == GPU_FILE or self.has(name):
                with self.open_csv(name) as stream:
                    self.headers[name] = stream.header
                    self.last_t[name] = _last_t(stream.path, stream.header)
                    if not stream.ends_with_newline:
                        self.warnings.add(f"{stream.path}: dropped the last line, cut short "
                                          "(no newline at the end)")

    def has(self, name: str) -> bool:
        """Whether the session holds the file `name`."""
        return (self.directory / name).is_file()

    def open_csv(self, name: str) -> CsvStream:
        """Open one CSV file for streaming; `SessionFormatError` when it is missing or bad."""
        path = self.directory / name
        try:
            return CsvStream(path, self.warnings)
        except FileNotFoundError:
            raise SessionFormatError("missing (a session must have it)", str(path)) from None
        except OSError as error:
            raise SessionFormatError(f"cannot read: {error.strerror}", str(path)) from None

    def gpu_ticks(self) -> Generator[GpuTick, None, None]:
        """Every recorded GPU tick in order, with processes joined from `processes.csv`."""
        gpu = self.open_csv(GPU_FILE)
        procs = self.open_csv(PROCESSES_FILE) if PROCESSES_FILE in self.headers else None
        try:
            yield from _ticks(gpu, _Peekable(procs) if procs else None, self.meta)
        finally:
            gpu.close()
            if procs:
                procs.close()

    def host_samples(self) -> Generator[HostSample, None, None]:
        """Every recorded host sample in order, with the GPU processes' host details."""
        if HOST_FILE not in self.headers:
            return
        host = self.open_csv(HOST_FILE)
        procs = self.open_csv(PROCESSES_FILE) if PROCESSES_FILE in self.headers else None
        try:
            yield from _hosts(host, _Peekable(procs) if procs else None)
        finally:
            host.close()
            if procs:
                procs.close()

    def events(self) -> Generator[dict[str, Any], None, None]:
        """The objects of `events.jsonl`, dropping a cut-short last line with a warning."""
        path = self.directory / EVENTS_FILE
        if not path.is_file():
            return
        with path.open(encoding="utf-8-sig", errors="replace") as f:
            for number, line in enumerate(f, 1):
                if not line.endswith("\n"):
                    self.warnings.add(f"{path}: dropped the last line, cut short "
                                      "(no newline at the end)")
                    return
                if line.strip():
                    yield _event(line, str(path), number)

    def check(self) -> None:
        """Read every row once; raise `SessionFormatError` at the first bad line."""
        for _ in self.gpu_ticks():  # processes.csv is read here, joined to gpu.csv
            pass
        if HOST_FILE in self.headers:
            with self.open_csv(HOST_FILE) as host:
                for _ in _hosts(host, None):
                    pass
        for _ in self.events():
            pass

    def time_span(self) -> tuple[float, float]:
        """First and last recorded `t` over `gpu.csv` and `host.csv` (from heads and tails)."""
        firsts: list[float] = []
        with closing(self.gpu_ticks()) as ticks, closing(self.host_samples()) as hosts:
            for head in (next(ticks, None), next(hosts, None)):
                if head is not None:
                    firsts.append(head.taken_at)
        lasts = [t for n, t in self.last_t.items() if n != PROCESSES_FILE and t is not None]
        first = min(firsts, default=float(self.meta["started_at"]))
        return first, max(lasts, default=first)


def _event(line: str, path: str, number: int) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except json.JSONDecodeError as error:
        raise SessionFormatError(f"not valid JSON ({error.msg})", path, number) from None
    if not isinstance(value, dict):
        raise SessionFormatError("each line must be a JSON object", path, number)
    return value


def _ticks(gpu: CsvStream, procs: _Peekable | None,
           meta: dict[str, Any]) -> Generator[GpuTick, None, None]:
    decoder, name = GpuRowDecoder(gpu.header), str(gpu.path)
    cuda = meta.get("cuda_driver_version")
    versions = (meta.get("driver"), meta.get("nvml_version"), None if cuda is None else str(cuda))
    group: list[Row] = []
    group_t = 0.0
    for row in gpu:
        t = _at(name, row, decoder.t)
        if group and t != group_t:
            yield _tick(decoder, name, group_t, group, procs, versions)
            group = []
        group_t = t
        group.append(row)
    if group:
        yield _tick(decoder, name, group_t, group, procs, versions)


def _tick(decoder: GpuRowDecoder, name: str, t: float, group: list[Row],
          procs: _Peekable | None, versions: tuple[Any, Any, Any]) -> GpuTick:
    by_gpu: dict[int, list[GpuProcess]] = {}
    if procs is not None:
        for line, cells in procs.take_at(t):
            try:
                by_gpu.setdefault(procs.decoder.gpu(cells), []).append(
                    procs.decoder.process(cells))
            except (ValueError, TypeError) as error:
                raise SessionFormatError(str(error), procs.name, line) from None
    devices = []
    for line, cells in group:
        try:
            listed = decoder.lists_processes(cells)
            processes: tuple[GpuProcess, ...] | None = None
            if listed or (listed is None and procs is not None):
                processes = tuple(by_gpu.get(decoder.index(cells), ()))
            devices.append(decoder.sample(cells, processes))
        except (ValueError, TypeError) as error:
            raise SessionFormatError(str(error), name, line) from None
    return GpuTick(t, tuple(devices), *versions)


def _hosts(host: CsvStream, procs: _Peekable | None) -> Generator[HostSample, None, None]:
    decoder, name = HostRowDecoder(host.header), str(host.path)
    rows = iter(host)
    row = next(rows, None)
    while row is not None:
        after = next(rows, None)
        t = _at(name, row, decoder.t)
        details: tuple[ProcessInfo, ...] = ()
        if procs is not None:
            end = None if after is None else _at(name, after, decoder.t)
            details = _details(procs, procs.listing_between(t, end))
        yield _at(name, row, partial(decoder.sample, processes=details))
        row = after


def _details(procs: _Peekable, listing: list[Row]) -> tuple[ProcessInfo, ...]:
    seen: dict[int, ProcessInfo] = {}
    for row in listing:
        info = _at(procs.name, row, procs.decoder.info)
        if info is not None and info.pid not in seen:
            seen[info.pid] = info
    return tuple(seen.values())
