r"""Cut the bytes of a log into lines, the one way `parse`, a live tail and `record` all read."""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

DEFAULT_MAX_LINE_BYTES = 64 * 1024
r"""Longest line (or `\r` segment) handed to a parser; a longer one is cut to its first
`DEFAULT_MAX_LINE_BYTES` bytes and counted (`LineAssembler.too_long`)."""
READ_CHUNK_BYTES = 64 * 1024
"""Bytes read at a time from a finished file, as the tail reads a growing one."""


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


class LineAssembler:
    r"""Split a byte stream into numbered lines without ever holding more than one line.

    Lines end at `\n`. Within a line, `\r` separates in-place updates (tqdm bars, Rich
    progress): only the last non-blank segment counts, so a bar refreshed thousands of times is
    one line. While a line is still being written, `take_update()` hands out its latest
    complete segment once per read, numbered as the line it will become. A line or segment longer
    than `max_line_bytes` keeps its first `max_line_bytes` bytes (its metrics come first; the
    rest is skipped while scanning on to its end) and a cut final segment is counted. NUL bytes
    at the start of a line are dropped: a writer without `O_APPEND` leaves a hole of zeros
    after a copytruncate. Bytes are decoded as UTF-8, invalid ones replaced; ANSI colours and
    the like are left to the parsers (`parsers.text.normalise_line`), which take raw lines.
    """

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self.line_no = 0
        """Complete lines seen so far (the number of the last one)."""
        self.too_long = 0
        """Lines whose final segment exceeded `max_line_bytes` (cut to its first bytes)."""
        self._partial = bytearray()  # the segment being written (its first bytes when too long)
        self._overflow = False  # the segment being written is already too long
        self._cut = False  # the segment `_join` last returned was cut
        self._segment = b""  # last complete non-blank `\r` segment of the current line
        self._update: bytes | None = None  # an update not yet taken
        self._shown = b""  # the update last taken for the current line

    @property
    def pending_bytes(self) -> int:
        """Bytes held for the line still being written."""
        return len(self._partial) + len(self._segment)

    def feed(self, data: bytes) -> list[tuple[int, str]]:
        """Consume `data`; return the lines it completed as `(line_no, text)`.

        Lines that only repeat the update already taken for them, blank lines and too-long lines
        are numbered but not returned.
        """
        out: list[tuple[int, str]] = []
        end = data.rfind(b"\n")
        if end < 0:
            self._extend(data)
            return out
        start = 0
        if self._partial or self._overflow or self._segment or self._shown:
            start = data.find(b"\n") + 1
            self._finish(data[: start - 1], out)
        if start <= end:
            body = data[start:end]
            if len(body) <= self.max_line_bytes and b"\r" not in body and b"\0" not in body:
                # The common case: whole lines only. One decode and one split for all of them
                # (`\n` never occurs inside a UTF-8 sequence, so this equals line by line).
                first = self.line_no + 1
                texts = _decode(body).split("\n")
                self.line_no += len(texts)
                out += [(n, text) for n, text in enumerate(texts, first) if text]
            else:
                for piece in body.split(b"\n"):
                    self._complete(piece, out)
        self._extend(data[end + 1 :])
        return out

    def _complete(self, piece: bytes, out: list[tuple[int, str]]) -> None:
        """A whole line read in one piece, with no line in progress before it."""
        if b"\r" in piece or len(piece) > self.max_line_bytes:
            self._finish(piece, out)
            return
        self.line_no += 1
        if piece[:1] == b"\0":
            piece = piece.lstrip(b"\0")
        if piece:
            out.append((self.line_no, _decode(piece)))

    def take_update(self) -> tuple[int, str] | None:
        r"""The newest complete `\r` segment of the unfinished line, once; else `None`."""
        if self._update is None:
            return None
        segment, self._update = self._update, None
        self._shown = segment
        return self.line_no + 1, _decode(segment)

    def flush(self) -> list[tuple[int, str]]:
        """End of a file generation: the unfinished line, if any, becomes a complete line."""
        if not (self._partial or self._overflow or self._segment):
            self._reset_line()
            return []
        out: list[tuple[int, str]] = []
        self._finish(b"", out)
        return out

    def _finish(self, piece: bytes, out: list[tuple[int, str]]) -> None:
        if b"\r" in piece:
            head, _, piece = piece.rpartition(b"\r")
            self._close_segments(head)
        final = self._join(piece)
        self.line_no += 1
        self.too_long += self._cut
        if self._segment and not final.strip():
            final = self._segment
        if final and final != self._shown:
            out.append((self.line_no, _decode(final)))
        self._reset_line()

    def _extend(self, rest: bytes) -> None:
        if b"\r" in rest:
            head, _, rest = rest.rpartition(b"\r")
            self._close_segments(head)
            if self._segment and self._segment != self._shown:
                self._update = self._segment
        if self._overflow:
            return
        if not self._partial and rest[:1] == b"\0":
            rest = rest.lstrip(b"\0")
        room = self.max_line_bytes - len(self._partial)
        if len(rest) > room:
            self._overflow = True
            rest = rest[:room]
        self._partial += rest

    def _join(self, piece: bytes) -> bytes:
        """The segment in progress completed by `piece`, cut to `max_line_bytes` (`_cut`)."""
        if not self._partial and piece[:1] == b"\0":
            piece = piece.lstrip(b"\0")
        room = self.max_line_bytes - len(self._partial)
        self._cut = self._overflow or len(piece) > room
        if self._cut:
            piece = piece[: max(room, 0)]
        return bytes(self._partial) + piece if self._partial else piece

    def _close_segments(self, head: bytes) -> None:
        r"""`head` holds segments each ended by `\r`; the first continues the one in progress."""
        segments = head.split(b"\r")
        segments[0] = self._join(segments[0])
        self._partial.clear()
        self._overflow = False
        for segment in reversed(segments):
            # each segment starts as a line starts, whichever read it came in: NULs dropped
            if segment[:1] == b"\0":
                segment = segment.lstrip(b"\0")
            if segment.strip():
                self._segment = segment[: self.max_line_bytes]
                return

    def _reset_line(self) -> None:
        self._partial.clear()
        self._overflow = False
        self._segment = b""
        self._update = None
        self._shown = b""


def read_lines(
    handle: IO[bytes], lines: LineAssembler | None = None, chunk_bytes: int = READ_CHUNK_BYTES
) -> Iterator[tuple[int, str]]:
    """The numbered lines of a file from its offset to its end, as a tail reading it sees them.

    The unfinished last line, if any, comes last. Memory stays within one chunk and one line
    (`max_line_bytes`), however long the file or its lines.

    Args:
        handle: the file, opened in binary mode.
        lines: the assembler to feed (to read `too_long` afterwards); a fresh one if `None`.
        chunk_bytes: bytes read at a time.
    """
    assembler = LineAssembler() if lines is None else lines
    while True:
        chunk = handle.read(chunk_bytes)
        if not chunk:
            break
        yield from assembler.feed(chunk)
    yield from assembler.flush()
