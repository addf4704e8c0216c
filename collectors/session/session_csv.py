"""The records of one session CSV file: lines, quoting, and what a reader skips and counts.

Rules (the same for every reader, see docs/session-format.md):

- The first line is the header; a byte order mark before it is ignored.
- A record is one line, or, when a quoted cell holds line breaks, the lines up to the closing
  quote (at most `MAX_RECORD_LINES` lines and `MAX_LINE_BYTES` bytes). Text is UTF-8; bytes that
  are not are read as U+FFFD.
- A last line without a newline was cut short by a crash: it is dropped, and said so.
- A record the csv module rejects, with the wrong number of cells, or too long, is skipped and
  counted; reading goes on at the line after its first line, so a stray quote costs one line.
"""

from __future__ import annotations

import csv
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from collectors.session.rows import SessionFormatError, check_header

MAX_LINE_BYTES = 16 << 20
"""A longer line is skipped (a recorded command line can be long, but not this long)."""
MAX_RECORD_LINES = 64
"""A quoted cell may hold line breaks, but a record never spans more lines than this."""
Row = tuple[int, list[str]]
"""A CSV record: the 1-based number of its first line and its cells."""

if csv.field_size_limit() < MAX_LINE_BYTES:
    # The default 128 KiB would reject a long recorded command line; the limit is process-wide
    # and only ever raised here.
    csv.field_size_limit(MAX_LINE_BYTES)


class FileTally:
    """What reading one file skipped or doubted, for the warnings and the first-problem notice."""

    def __init__(self, path: str, notice: Callable[[str], None] | None = None) -> None:
        self.path = path
        self.skipped = 0
        self.first_skip: tuple[int, str] | None = None
        self.bad_cells = 0
        self.first_bad_cell: tuple[int, str, str] | None = None
        self.cut = False
        self.reached = 0
        """The last line read so far: of two tallies of one file, the further one is complete."""
        self._notice = notice

    def skip(self, line: int, reason: str) -> None:
        """Count one record that is skipped."""
        self.skipped += 1
        if self.first_skip is None:
            self.first_skip = (line, reason)
            self._say(f"{self.path}:{line}: skipped: {reason}")

    def bad_cell(self, line: int, column: str, why: str) -> None:
        """Count one cell that reads as `None` although it is not empty."""
        self.bad_cells += 1
        if self.first_bad_cell is None:
            self.first_bad_cell = (line, column, why)
            self._say(f"{self.path}:{line}: {column}: {why}; read as N/A")

    def _say(self, text: str) -> None:
        if self._notice is not None:
            self._notice(text)

    def cut_warning(self) -> str:
        """The words for a cut-short last line."""
        return f"{self.path}: dropped the last line, cut short (no newline at the end)"

    def warnings(self) -> list[str]:
        """The tally in words, one line per kind of problem."""
        out = []
        if self.cut:
            out.append(self.cut_warning())
        if self.first_skip is not None:
            line, reason = self.first_skip
            out.append(
                f"{self.path}: skipped {_lines(self.skipped)} that could not be read "
                f"(first: line {line}: {reason})"
            )
        if self.first_bad_cell is not None:
            line, column, why = self.first_bad_cell
            what = "cell" if self.bad_cells == 1 else "cells"
            out.append(
                f"{self.path}: {self.bad_cells} bad {what} read as N/A (first: line "
                f"{line}, {column}: {why})"
            )
        return out


def _lines(count: int) -> str:
    return "1 line" if count == 1 else f"{count} lines"


class _Lines:
    """Physical lines of a binary file with their numbers, and a way to read some again."""

    def __init__(self, file: BinaryIO, next_number: int) -> None:
        self._file = file
        self.number = next_number - 1
        self._again: deque[tuple[int, bytes | None]] = deque()

    def next(self) -> tuple[int, bytes | None] | None:
        """`(number, raw line)`; the raw line is `None` when it is too long; `None` at the end."""
        if self._again:
            return self._again.popleft()
        raw = self._file.readline(MAX_LINE_BYTES + 1)
        if not raw:
            return None
        self.number += 1
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):  # skip the rest of it, a piece at a time
                raw = self._file.readline(MAX_LINE_BYTES)
            return self.number, None
        return self.number, raw

    def again(self, lines: list[tuple[int, bytes | None]]) -> None:
        """Read these lines again, in order, before any new one."""
        self._again.extendleft(reversed(lines))

    @property
    def pending(self) -> bool:
        """Whether lines are waiting to be read again."""
        return bool(self._again)


class _TooLong(Exception):
    """A record ran past `MAX_RECORD_LINES` lines or `MAX_LINE_BYTES` bytes."""


class _Feed:
    """Feeds one record's lines to the csv module and remembers them, to re-read on an error."""

    def __init__(self, lines: _Lines) -> None:
        self._lines = lines
        self.taken: list[tuple[int, bytes | None]] = []
        self.cut = False
        self.ended = False
        self._bytes = 0

    def start(self) -> None:
        self.taken, self._bytes, self.ended = [], 0, False

    def __iter__(self) -> Iterator[str]:
        return self

    def __next__(self) -> str:
        item = self._lines.next()
        if item is None:
            self.ended = True
            raise StopIteration
        number, raw = item
        if raw is not None and not raw.endswith(b"\n"):
            self.cut = True  # the last line, cut short: never part of a record
            raise StopIteration
        self.taken.append(item)
        if raw is None:
            raise _TooLong(f"line longer than {MAX_LINE_BYTES >> 20} MiB")
        self._bytes += len(raw)
        if len(self.taken) > MAX_RECORD_LINES or self._bytes > MAX_LINE_BYTES:
            raise _TooLong(f"a quoted cell runs on for more than {MAX_RECORD_LINES} lines")
        return raw.decode("utf-8", "replace")


class CsvStream:
    """Streams the records of one CSV file of a session, applying the reading rules above.

    Construction reads and checks the header (`SessionFormatError` when it is missing or lacks
    a required column); iteration yields `(line, cells)` for each record with the header's
    number of cells and counts the rest in `tally`.
    """

    def __init__(self, path: Path, tally: FileTally) -> None:
        self.path = path
        self.tally = tally
        self._file = path.open("rb")
        try:
            self.header = _header(self._file, path)
            check_header(self.header, path.name, str(path))
        except BaseException:
            self._file.close()
            raise
        self.data_start = self._file.tell()
        """Byte offset of the first line after the header."""
        self.resume: tuple[int, int] | None = None
        """Where `records` stopped: (byte offset, line number) of the next record."""

    def __enter__(self) -> CsvStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the file."""
        self._file.close()

    def __iter__(self) -> Iterator[Row]:
        return self.records(self.data_start, 2, None)

    def records(self, offset: int, first_line: int, stop: int | None) -> Iterator[Row]:
        """Records from byte `offset` (line `first_line`) on.

        Reading stops at the first record boundary at or after byte `stop` (or at the end of
        the file when `None`); `resume` then says where to go on.
        """
        self._file.seek(offset)
        lines = _Lines(self._file, first_line)
        try:
            yield from self._records(lines, stop)
        finally:
            self.resume = (self._file.tell(), lines.number + 1)

    def _records(self, lines: _Lines, stop: int | None) -> Iterator[Row]:
        feed = _Feed(lines)
        width, tally = len(self.header), self.tally
        reader = csv.reader(feed)
        while stop is None or self._file.tell() < stop or lines.pending:
            if not lines.pending:
                item = lines.next()
                if item is None:
                    return
                if _is_plain(item[1]):
                    row = _plain_row(item, width, tally)
                    if row is not None:
                        yield row
                    continue
                lines.again([item])
            feed.start()
            try:
                cells = next(reader, None)
                problem = _problem(cells, width, feed.ended)
            except csv.Error as error:
                cells, problem = [], _csv_problem(error)
                reader = csv.reader(feed)  # start clean after the error
            except _TooLong as error:
                cells, problem = [], str(error)
                reader = csv.reader(feed)
            if feed.cut:
                tally.cut = True
                if not feed.taken:
                    return
                tally.skip(feed.taken[0][0], "its record runs into the cut-short last line")
                lines.again(feed.taken[1:])
                feed.cut = False
                reader = csv.reader(feed)
                continue
            if cells is None:
                return
            tally.reached = max(tally.reached, lines.number)
            if problem is not None:
                tally.skip(feed.taken[0][0], problem)
                lines.again(feed.taken[1:])
            elif cells:
                yield feed.taken[0][0], cells


def _is_plain(raw: bytes | None) -> bool:
    """Whether a line has no quotes or carriage returns (and is whole).

    Such a line is split at its commas, as the csv module would split it, at a third of the
    cost; any other line goes through the csv module.
    """
    return raw is not None and raw.endswith(b"\n") and b'"' not in raw and b"\r" not in raw


def _plain_row(item: tuple[int, bytes | None], width: int, tally: FileTally) -> Row | None:
    number, raw = item
    tally.reached = number
    if raw is None or raw == b"\n":
        return None  # a blank line, as the csv module skips it
    cells = raw[:-1].decode("utf-8", "replace").split(",")
    if len(cells) != width:
        tally.skip(number, f"{len(cells)} cells where the header has {width}")
        return None
    return number, cells


def _problem(cells: list[str] | None, width: int, ended: bool) -> str | None:
    if not cells:
        return None
    if ended:  # the csv module hands out what it has when the file ends inside quotes
        return "a quoted cell is never closed"
    return None if len(cells) == width else f"{len(cells)} cells where the header has {width}"


def _csv_problem(error: csv.Error) -> str:
    text = str(error)
    if "new-line character" in text:
        return "a carriage return inside a cell that is not quoted"
    if "field limit" in text:
        return f"a cell longer than {MAX_LINE_BYTES >> 20} MiB"
    return f"bad CSV: {text}"


def _header(file: BinaryIO, path: Path) -> list[str]:
    raw = file.readline(MAX_LINE_BYTES + 1)
    if not raw:
        raise SessionFormatError("empty file: no header line", str(path), 1)
    if not raw.endswith(b"\n"):
        raise SessionFormatError("no complete header line", str(path), 1)
    text = raw.decode("utf-8", "replace").removeprefix("\ufeff")
    try:
        header = next(csv.reader([text]), [])
    except csv.Error as error:
        raise SessionFormatError(f"unreadable header: {error}", str(path), 1) from None
    return header
