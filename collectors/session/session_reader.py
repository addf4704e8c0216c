"""The one reader of a recorded session directory, for `--replay`, `summarize` and `note`.

It refuses a session only when it cannot be used at all (no directory, a missing or broken
`meta.json`, no `gpu.csv`, a file without the columns its rows cannot do without), with a
`SessionFormatError` naming the file and line. Everything else is read as far as it goes: a bad
cell reads as `None` (`N/A`), a row that cannot be placed is skipped, and both are counted in
`warnings`, so nothing is dropped without a word. The rules are in `collectors.session.cells`,
`collectors.session.session_csv` and `collectors.session.session_meta`; the columnar reader of
summaries
(`collectors.session.session_columns`) applies the same ones.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable, Generator
from contextlib import closing
from pathlib import Path
from typing import Any

from collectors.samples import ContainerTick, GpuTick, HostSample
from collectors.session import cells
from collectors.session.container_rows import container_ticks
from collectors.session.rows import (
    RowError,
    SessionError,
    SessionFormatError,
    column_index,
    missing_written,
)
from collectors.session.session_csv import CsvStream, FileTally, Row
from collectors.session.session_format import (
    CONTAINERS_FILE,
    CSV_FILES,
    EVENTS_FILE,
    GPU_FILE,
    HOST_FILE,
    META,
    METRICS_FILE,
    PROCESSES_FILE,
)
from collectors.session.session_joins import hosts, ticks
from collectors.session.session_meta import (
    MAX_EVENT_BYTES,
    JsonProblem,
    meta_problem,
    read_event,
    read_meta,
)

__all__ = [
    "CsvStream",
    "SessionError",
    "SessionFormatError",
    "SessionReader",
    "meta_problem",
    "read_meta",
]

Notice = Callable[[str, str], None]
"""Told `(file name, message)` the first time a file has a skipped line or a bad cell."""


class SessionReader:
    """A session directory: `meta.json` and CSV headers checked at once, rows read on demand.

    Construction is cheap (no full scan) and raises `SessionFormatError` when the session cannot
    be used. Rows are streamed by the iterators; `check()` reads everything once.
    """

    def __init__(self, directory: str | os.PathLike[str], on_problem: Notice | None = None) -> None:
        self.directory = Path(directory)
        self._notes: list[str] = []
        self.meta = read_meta(self.directory, self._note)
        self.on_problem = on_problem
        self._announced: set[str] = set()
        self._tallies: dict[str, list[FileTally]] = {}
        self.headers: dict[str, list[str]] = {}
        self.last_t: dict[str, float | None] = {}
        for name in CSV_FILES:
            self._open(name)
        if _cut_short(self.directory / EVENTS_FILE):
            self._note(FileTally(str(self.directory / EVENTS_FILE)).cut_warning())

    def _open(self, name: str) -> None:
        """Check one CSV file's header; an optional file that cannot be read is ignored."""
        path = self.directory / name
        if name != GPU_FILE and not path.is_file():
            return
        if name != GPU_FILE and _empty(path):
            # A recorder killed between creating an optional file and writing its header.
            self._note(f"{path}: empty, ignored")
            return
        try:
            with self.open_csv(name) as stream:
                header = stream.header
        except SessionFormatError as error:
            if name == GPU_FILE:
                raise
            self._note(f"{error.msg}; the file is ignored")
            return
        self.headers[name] = header
        self.last_t[name] = _last_t(path, header)
        absent = missing_written(header, name)
        if absent:
            what = "column" if len(absent) == 1 else "columns"
            self._note(f"{path}: no {', '.join(absent)} {what}; read as N/A")
        if _cut_short(path):  # said at once: a replay shows its notes before it starts
            self._note(FileTally(str(path)).cut_warning())

    def _note(self, text: str) -> None:
        if text not in self._notes:
            self._notes.append(text)

    @property
    def warnings(self) -> list[str]:
        """What the reader dropped or doubted so far, each said once.

        Notes from `meta.json` and the headers first, then per file its cut-short last line,
        skipped lines and bad cells.
        """
        out = list(self._notes)
        for name in (*CSV_FILES, EVENTS_FILE):
            tally = self.tally(name)
            if tally is not None:
                out.extend(tally.warnings())
        return list(dict.fromkeys(out))

    def tally(self, name: str) -> FileTally | None:
        """The most complete tally of file `name` so far; `None` before it is read."""
        tallies = self._tallies.get(name)
        if not tallies:
            return None
        return max(tallies, key=lambda t: (t.reached, t.skipped + t.bad_cells + t.cut))

    def new_tally(self, name: str) -> FileTally:
        """A tally for one more pass over file `name` (older passes but the best are let go)."""
        best = self.tally(name)
        tally = FileTally(str(self.directory / name), lambda text: self._problem(name, text))
        self._tallies[name] = [t for t in (best, tally) if t is not None]
        return tally

    def _problem(self, name: str, text: str) -> None:
        if name not in self._announced:
            self._announced.add(name)
            if self.on_problem is not None:
                self.on_problem(name, text)

    def has(self, name: str) -> bool:
        """Whether the session holds the file `name`."""
        return (self.directory / name).is_file()

    def open_csv(self, name: str) -> CsvStream:
        """Open one CSV file for streaming; `SessionFormatError` when it is missing or bad."""
        path = self.directory / name
        try:
            return CsvStream(path, self.new_tally(name))
        except FileNotFoundError:
            raise SessionFormatError("missing (a session must have it)", str(path)) from None
        except OSError as error:
            raise SessionFormatError(f"cannot read: {error.strerror}", str(path)) from None

    def gpu_ticks(self) -> Generator[GpuTick, None, None]:
        """Every recorded GPU tick in order, with processes joined from `processes.csv`."""
        gpu = self.open_csv(GPU_FILE)
        procs = self.open_csv(PROCESSES_FILE) if PROCESSES_FILE in self.headers else None
        try:
            yield from ticks(gpu, procs, self.meta)
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
            yield from hosts(host, procs)
        finally:
            host.close()
            if procs:
                procs.close()

    def container_ticks(self) -> Generator[ContainerTick, None, None]:
        """Every recorded container tick in order; nothing when there is no `containers.csv`."""
        if CONTAINERS_FILE not in self.headers:
            return
        ends = [t for n, t in self.last_t.items() if n in (GPU_FILE, HOST_FILE) and t is not None]
        with self.open_csv(CONTAINERS_FILE) as stream:
            yield from container_ticks(
                stream, self.meta.get(META.interval_s), max(ends, default=None)
            )

    def events(self) -> Generator[dict[str, Any], None, None]:
        """The valid objects of `events.jsonl`; bad lines are skipped and counted."""
        path = self.directory / EVENTS_FILE
        if not path.is_file():
            return
        tally = self.new_tally(EVENTS_FILE)
        with path.open("rb") as f:
            number = 0
            previous = b"\n"  # the piece read before this one: a line starts after a newline
            while raw := f.readline(MAX_EVENT_BYTES + 1):
                starts_line, previous = previous.endswith(b"\n"), raw
                if not starts_line:
                    continue  # the rest of a line too long to keep, read a piece at a time
                number += 1
                tally.reached = number
                if not raw.endswith(b"\n"):
                    if len(raw) <= MAX_EVENT_BYTES:
                        tally.cut = True
                        return
                    tally.skip(number, f"longer than {MAX_EVENT_BYTES >> 20} MiB")
                    continue
                text = raw.decode(errors="replace")  # UTF-8
                if number == 1:
                    text = text.removeprefix("\ufeff")
                if not text.strip():
                    continue
                try:
                    yield read_event(text)
                except JsonProblem as problem:
                    tally.skip(number, str(problem))

    def check(self, strict: bool = True) -> None:
        """Read every row once (processes joined to `gpu.csv`, containers, metrics, events).

        With `strict`, raise `SessionFormatError` naming the first file with a skipped line,
        a bad cell or a cut-short last line; without, only count them in `warnings`.
        """
        for _ in self.gpu_ticks():
            pass
        if HOST_FILE in self.headers:
            with self.open_csv(HOST_FILE) as host:
                for _ in hosts(host, None):
                    pass
        for _ in self.container_ticks():
            pass
        if METRICS_FILE in self.headers:
            from collectors.replay.replay_metrics import check_metrics  # it reads metrics.csv

            check_metrics(self)
        for _ in self.events():
            pass
        if strict:
            for name in (*CSV_FILES, EVENTS_FILE):
                tally = self.tally(name)
                if tally is not None and tally.warnings():
                    said = (w.removeprefix(f"{tally.path}: ") for w in tally.warnings())
                    raise SessionFormatError("; ".join(said), tally.path)  # path said once

    def time_span(self) -> tuple[float, float]:
        """First and last recorded `t` over `gpu.csv` and `host.csv` (from heads and tails)."""
        firsts: list[float] = []
        with closing(self.gpu_ticks()) as gpu, closing(self.host_samples()) as host:
            for head in (next(gpu, None), next(host, None)):
                if head is not None:
                    firsts.append(head.taken_at)
        lasts = [t for n, t in self.last_t.items() if n in (GPU_FILE, HOST_FILE) and t is not None]
        first = min(firsts, default=float(self.meta[META.started_at]))
        return first, max(lasts + [first])


_TAIL_BYTES = tuple(1 << shift for shift in range(16, 64, 2))
"""How much of a file's end `_last_t` reads: 64 KiB, then four times as much each time."""


def _cut_short(path: Path) -> bool:
    """Whether a file's last byte is not a newline (a crash cut its last line short)."""
    try:
        with path.open("rb") as f:
            f.seek(-1, os.SEEK_END)  # OSError for an empty file: nothing in it was cut
            return f.read() != b"\n"
    except OSError:
        return False


def _empty(path: Path) -> bool:
    try:
        return path.stat().st_size == 0
    except OSError:
        return False  # opening it will say what is wrong


def _last_t(path: Path, header: list[str]) -> float | None:
    """The valid `t` of the last complete row, read from the file's tail (no full scan).

    The tail is read again, four times as long, while it holds no valid complete row (a last
    row with a cell over 64 KiB, or a tail of garbage): a row further up still ends the session.
    """
    where = column_index(header)["t"]
    with path.open("rb") as f:
        size = os.fstat(f.fileno()).st_size
        for tail_bytes in _TAIL_BYTES:
            block = min(size, tail_bytes)
            f.seek(size - block)
            # Not the part after the last newline (cut short), nor the first line: part of a line
            # (or a whole one, then read again by the next block), or the header.
            lines = f.read().split(b"\n")[1:-1]
            found = _last_valid_t(lines, where, len(header))
            if found is not None or block == size:
                return found
    return None


def _last_valid_t(lines: list[bytes], where: int, cells_per_row: int) -> float | None:
    for raw in reversed(lines):
        try:
            [row] = csv.reader([raw.decode(errors="replace")])  # one line, one row
        except csv.Error:
            continue
        if len(row) == cells_per_row:
            value, _ = cells.TIME.read(row[where])
            if value is not None:
                return float(value)
    return None


__all__ += ["Row", "RowError"]
