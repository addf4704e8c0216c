r"""Turn the bytes of a growing log into complete lines, `\r` progress updates and counts."""

from __future__ import annotations

DEFAULT_MAX_LINE_BYTES = 64 * 1024
r"""Longest line (or `\r` segment) handed to a parser; longer ones are counted and skipped."""


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")


class LineAssembler:
    r"""Split a byte stream into numbered lines without ever holding more than one line.

    Lines end at `\n`. Within a line, `\r` separates in-place updates (tqdm bars, Rich
    progress): only the last non-blank segment counts, so a bar refreshed thousands of times is
    one line. While a line is still being written, `take_update()` hands out its latest
    complete segment once per read, numbered as the line it will become. A line or segment longer
    than `max_line_bytes` is discarded while scanning on to its end and only counted. NUL bytes at
    the start of a line are dropped: a writer without `O_APPEND` leaves a hole of zeros after a
    copytruncate.
    """

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self.max_line_bytes = max_line_bytes
        self.line_no = 0
        """Complete lines seen so far (the number of the last one)."""
        self.too_long = 0
        """Lines whose final segment exceeded `max_line_bytes` (skipped, never parsed)."""
        self._partial = bytearray()  # the segment being written
        self._overflow = False  # the segment being written is already too long
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
            self._finish(data[:start - 1], out)
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
        self._extend(data[end + 1:])
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
        if final is None:
            self.too_long += 1
        else:
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
        if len(self._partial) + len(rest) > self.max_line_bytes:
            self._overflow = True
            self._partial.clear()
        else:
            self._partial += rest

    def _join(self, piece: bytes) -> bytes | None:
        """The segment in progress completed by `piece`; `None` when it is too long."""
        if not self._partial and piece[:1] == b"\0":
            piece = piece.lstrip(b"\0")
        if self._overflow or len(self._partial) + len(piece) > self.max_line_bytes:
            return None
        return bytes(self._partial) + piece if self._partial else piece

    def _close_segments(self, head: bytes) -> None:
        r"""`head` holds segments each ended by `\r`; the first continues the one in progress."""
        segments = head.split(b"\r")
        first = self._join(segments[0])
        self._partial.clear()
        self._overflow = False
        candidates = [first, *segments[1:]] if first is not None else segments[1:]
        for segment in reversed(candidates):
            if len(segment) <= self.max_line_bytes and segment.strip():
                self._segment = segment
                return

    def _reset_line(self) -> None:
        self._partial.clear()
        self._overflow = False
        self._segment = b""
        self._update = None
        self._shown = b""
