"""Follow one log path by offset across rotation, truncation, deletion and re-creation."""

from __future__ import annotations

import errno
import os
import stat
from collections import deque

from collectors.base import CollectorError
from collectors.logs.logtail_rotation import (
    CopyId,
    FileId,
    NextFiles,
    copies_since,
    copy_id,
    find_copy,
    head_of,
    newest_copy_ns,
)

READ_HEADS = 128
"""First bytes remembered of the generations read last, to know their copies again (twice the
copies ever opened at once, `MAX_OPEN_COPIES`)."""
HEAD_BYTES = 256
"""Bytes at the start of a file remembered to notice a rewrite that outgrew the old offset
(the first bytes that are not NUL: a writer without `O_APPEND` leaves a hole of NULs)."""


def _error(path: str, what: str) -> CollectorError:
    return CollectorError(f"{path}: {what}", title="log")


def _check_regular(path: str, info: os.stat_result) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise _error(path, "is a directory, not a log file (use --watch to find logs in it)")
    if not stat.S_ISREG(info.st_mode):
        raise _error(path, "is not a regular file (pipes and devices cannot be followed)")


def open_regular_file(path: str) -> tuple[int, os.stat_result] | None:
    """Open `path` read-only; `None` when it does not exist (yet).

    The name is checked first, so a device is not even opened; the descriptor is checked
    again, because a pipe may take the name's place in between, and opening one waits for a
    writer: the open does not wait (`O_NONBLOCK`), and only a regular file is kept.

    Raises:
        CollectorError: the path is a directory, not a regular file, or not readable.
    """
    try:
        _check_regular(path, os.stat(path))
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except PermissionError as error:
        raise _error(
            path, f"permission denied ({error.strerror}); gpuherd needs read access"
        ) from None
    except NotADirectoryError:
        raise _error(path, "a parent of this path is a file, not a directory") from None
    except OSError as error:
        raise _error(path, f"cannot open: {error.strerror or error}") from error
    try:
        info = os.fstat(fd)
        _check_regular(path, info)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, info


class FileFollower:
    """Reads new bytes of one path from a saved offset, one file generation at a time.

    A generation is one stretch of one file: it ends when the writer has moved on to another
    file at the path (rename and create), when the file is deleted, or when it is cut below the
    offset or rewritten from the start (copytruncate, `> log`). A generation is read to its
    end before the next begins: a renamed or deleted file through the descriptor still open,
    a copytruncated one from the copy, when it can be found (`find_copy`), and then the copies
    of generations cut before the tail looked, each a generation of its own.

    Bytes known to be lost at a cut are counted in `lost_bytes`: the old file held them when
    it was looked at, or the hole of NULs a writer without `O_APPEND` leaves says how long the
    file was when it was cut, and neither the reads nor the copy hold them.

    A renamed file is read on for as long as no newer file at the path holds a line: a writer
    often writes into the renamed file until it reopens its log (logrotate `create` and a
    signal). Files that appear at the path are opened at once when the watchdog observer calls
    `file_created`, so rotations faster than the tail looks lose no file.
    """

    def __init__(self, path: str, chunk_bytes: int = 64 * 1024) -> None:
        self.path = path
        self.chunk_bytes = chunk_bytes
        self.generation = 0
        """1 for the first file opened at `path`, +1 for every rotation, truncation, re-creation."""
        self.started: str | None = None
        """Why the current generation began: `None` (first), `rotated`, `truncated`, `recreated`."""
        self.offset = 0
        self.size: int | None = None
        self.modified_at: float | None = None
        """The open file's mtime at the last look (Unix seconds)."""
        self.ending: str | None = None
        """Set once the current generation is over: `rotated`, `deleted` or `truncated`."""
        self.detached = False
        """The file being read is no longer at the path (renamed) but may still grow: file
        events for the path say nothing about it, so it has to be looked at more often."""
        self._fd: int | None = None
        self._id: FileId | None = None
        self.lost_bytes = 0
        """Bytes known lost at cuts (copytruncate) since `take_lost` was last called."""
        self.data_bytes = 0
        """Bytes read that were not part of a hole of NULs (for a bytes-per-line estimate)."""
        self._rest_fd: int | None = None  # the copy a copytruncated generation ends in
        self._copies: list[int] = []  # copies of later generations, cut before we looked
        self._copies_ns = 0  # copies beside the log no newer than this are history
        self._read_heads: deque[bytes] = deque(maxlen=READ_HEADS)  # of generations read
        self._taken: deque[CopyId] = deque(maxlen=READ_HEADS)  # copies handed out to be read
        self._cut_by_size = False
        self._loss_base: tuple[int, int] | None = None  # (bytes had, bytes seen) of the cut file
        self._head = b""
        self._head_at = 0  # where the generation's first bytes that are not NUL lie
        self._in_hole = True  # nothing but NULs read of this generation yet
        self._recent = b""  # the last bytes read, to recognise a copytruncate copy
        self._seen_size = 0  # the largest size the generation's file had at a look
        self._checked_size = self._checked_ns = -1
        self._next_start: str | None = None
        self._next = NextFiles()

    @property
    def is_open(self) -> bool:
        """Whether a file is open (a generation is being read)."""
        return self._fd is not None

    def file_created(self) -> None:
        """A file was just created at the path or moved onto it: open it now.

        Called on the watchdog observer's thread; the file waits in order until the tail
        reaches it. Errors are left to the tail's own next look.
        """
        try:
            opened = open_regular_file(self.path)
        except CollectorError:
            return
        if opened is not None:
            self._next.add(*opened, current=self._id)

    def check(self) -> bool:
        """Look at the path once: open it, or notice that the current generation ended.

        Returns:
            Whether a file is open; `False` while the path does not exist.

        Raises:
            CollectorError: the path cannot be followed (directory, permission, ...).
        """
        if self._fd is None:
            if not self._open():
                return False
            # and look on: a file opened ahead may have been replaced already
        elif self.ending is not None:
            return True
        assert self._fd is not None
        newer = self._next.largest(self._id)  # None: no newer file; 0: none has a line yet
        try:
            info: os.stat_result | None = os.stat(self.path)
        except FileNotFoundError:
            info = None
        except OSError as error:
            raise _error(self.path, f"cannot stat: {error.strerror or error}") from error
        if info is not None and (info.st_dev, info.st_ino) != self._id:
            newer = max(newer or 0, info.st_size)
        self.detached = False
        if newer is None and info is not None:
            self._check_truncation()
            return True
        own = os.fstat(self._fd)
        self.size, self.modified_at = own.st_size, own.st_mtime
        if own.st_nlink == 0:  # deleted: nobody can open it any more
            self.ending = "deleted" if newer is None else "rotated"
        elif newer:  # renamed, and the writer has moved on to the newer file
            self.ending = "rotated"
        else:
            self.detached = True
        return True

    def read_chunk(self) -> bytes:
        """The next bytes of the current generation; empty when none are there (yet)."""
        fd = self._rest_fd if self.ending == "truncated" else self._fd
        if fd is None:
            return b""
        try:
            data = os.pread(fd, self.chunk_bytes, self.offset)
        except OSError as error:
            if error.errno == errno.EISDIR:
                raise _error(self.path, "is a directory, not a log file") from error
            raise _error(self.path, f"read failed: {error.strerror or error}") from error
        if data:
            self._note_bytes(data)
        self._recent = (self._recent + data[-HEAD_BYTES:])[-HEAD_BYTES:]
        self.offset += len(data)
        if self.size is not None and self.offset > self.size:
            self.size = self.offset
        return data

    def take_lost(self) -> int:
        """Bytes known lost at cuts since the last call (then 0 until the next loss)."""
        lost, self.lost_bytes = self.lost_bytes, 0
        return lost

    def end_generation(self) -> str:
        """Close the ended generation; the next `check()` starts the next one.

        Returns:
            Why it ended: `rotated`, `deleted` or `truncated`.
        """
        reason = self.ending or "deleted"
        self.ending = None
        # A generation of NULs only held no byte of its own: its copy, or the next hole, still
        # counts from where the generation before it was left.
        if len(self._head) >= HEAD_BYTES:
            # A short head (a generation cut after a few bytes) would match any later one that
            # starts alike, and lose it; its copy is read again instead, never lost.
            self._read_heads.append(self._head)
        if not self._in_hole:
            seen = max(self._seen_size, self.offset) if self._cut_by_size else self.offset
            self._loss_base = (self.offset, seen)
        self._head = self._recent = b""
        self._head_at, self._in_hole, self._seen_size, self._cut_by_size = 0, True, 0, False
        self._checked_size = self._checked_ns = -1
        if self._rest_fd is not None:
            os.close(self._rest_fd)
            self._rest_fd = None
        if reason == "truncated":
            self.offset = 0
            self.generation += 1
            self.started = "truncated"
            if self._copies:  # a later generation, cut before the tail looked: read its copy
                self._rest_fd = self._copies.pop(0)
                self.ending = "truncated"
            return reason
        self._loss_base = None
        self._next.discard(self._id)  # opened as it appeared, but read already
        self._close_current()
        self.detached = False
        self._next_start = "rotated" if reason == "rotated" else "recreated"
        return reason

    def close(self) -> None:
        """Close the open file and every file opened ahead, if any."""
        self._next.close()
        self._close_current()
        for fd in [self._rest_fd, *self._copies]:
            if fd is not None:
                os.close(fd)
        self._rest_fd, self._copies = None, []

    def _close_current(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _open(self) -> bool:
        opened = self._next.pop() or open_regular_file(self.path)
        if opened is None:
            self.size = None
            return False
        self._fd, info = opened
        self._id = (info.st_dev, info.st_ino)
        own = os.fstat(self._fd)
        self.size, self.modified_at = own.st_size, own.st_mtime
        self.offset = 0
        self.generation += 1
        self.started = self._next_start
        self._copies_ns = newest_copy_ns(self.path)  # copies older than the file are history
        return True

    def _check_truncation(self) -> None:
        assert self._fd is not None
        own = os.fstat(self._fd)
        size = self.size = own.st_size
        self.modified_at = own.st_mtime
        changed = (size, own.st_mtime_ns) != (self._checked_size, self._checked_ns)
        if size < self.offset or (changed and self._head_changed()):
            self.ending = "truncated"
            self._cut_by_size = size < self.offset
            # Lines written before the copy but not read yet are in the copy, not lost.
            copies, copied_ns = find_copy(
                self.path,
                (self._head_at, self._head),
                self._recent,
                self.offset,
                current=head_of(self._fd, HEAD_BYTES)[1],
                read=self._read_heads,
                taken=self._taken,
            )
            self._taken.extend(copy_id(fd) for fd in copies)
            self._copies_ns = max(self._copies_ns, copied_ns)
            self._rest_fd, self._copies = (copies[0], copies[1:]) if copies else (None, [])
        elif not self._head and own.st_mtime_ns != self._checked_ns:
            # Nothing but NULs read of this generation yet: a cut since the last look leaves
            # no mark in the file but its time, and a copy made since.
            self._copies = copies_since(
                self.path, self._copies_ns, self._fd, self._read_heads, self._taken
            )
            self._taken.extend(copy_id(fd) for fd in self._copies)
            if self._copies:
                self.ending = "truncated"
        if self.ending is None:
            self._seen_size = max(self._seen_size, size)
        self._checked_size, self._checked_ns = size, own.st_mtime_ns

    def _head_changed(self) -> bool:
        if not self._head or self._fd is None:
            return False
        return os.pread(self._fd, len(self._head), self._head_at) != self._head

    def _note_bytes(self, data: bytes) -> None:
        """Remember the generation's first real bytes; settle a cut's loss once they come."""
        if self._in_hole:
            stripped = data.lstrip(b"\0")
            if not stripped:
                return
            self._in_hole = False
            self._head_at = self.offset + len(data) - len(stripped)
            self._settle_loss(self._head_at)
            self.data_bytes += len(stripped)
        else:
            self.data_bytes += len(data)
        if len(self._head) < HEAD_BYTES:
            begin = self._head_at + len(self._head) - self.offset
            self._head += data[begin : begin + HEAD_BYTES - len(self._head)]

    def _settle_loss(self, hole: int) -> None:
        """Count what a cut lost, once the next generation's hole of NULs (`hole` bytes) is known.

        A writer without `O_APPEND` writes on at its own offset, so the hole is as long as the
        cut file was; what of it was neither read nor in the copy is lost. Without a hole, what
        the cut file was seen to hold beyond what was read is lost.
        """
        if self._loss_base is None:
            return
        had, seen = self._loss_base
        self._loss_base = None
        self.lost_bytes += max(0, max(hole, seen) - had)
