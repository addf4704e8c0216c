"""What a log tail needs to lose nothing to rotation: files opened as they appear, copies found."""

from __future__ import annotations

import errno
import itertools
import os
import re
import stat
import threading
from collections import deque
from collections.abc import Container, Iterable

FileId = tuple[int, int]
"""(device, inode) of an open file: unique among files held open."""
CopyId = tuple[int, int, int]
"""(inode, mtime in ns, size) of a copy: the same after logrotate renames it on, and told
apart from a later copy that reuses a deleted copy's inode."""

MAX_NEXT_FILES = 64
"""Files opened ahead of the tail at most (a tail 64 rotations behind loses the later ones
that were renamed away before it got to them)."""
MAX_COPY_CANDIDATES = 1000
"""Directory entries looked at when searching for a copytruncate copy."""
MAX_HOLE_SCAN_BYTES = 16 * 1024 * 1024
"""NUL bytes read past at most when looking for a file's first real bytes (`head_of`)."""
MAX_OPEN_COPIES = 64
"""The newest copies opened when searching (an older one is no copy of what is being read)."""


class NextFiles:
    """Files opened the moment they appeared at a followed path, oldest first; thread-safe.

    The watchdog observer adds to it (`add`) and the tail takes from it, so a file that is
    renamed away again before the tail's next look (rotation every 0.2 s) is still read, in
    order, through the descriptor opened when it was created.
    """

    def __init__(self, limit: int = MAX_NEXT_FILES) -> None:
        self.limit = limit
        self.overflowed = 0
        """Files not kept because `limit` were already waiting."""
        self._lock = threading.Lock()
        self._files: deque[tuple[int, os.stat_result]] = deque()
        self._closed = False

    def add(self, fd: int, info: os.stat_result, current: FileId | None) -> None:
        """Keep `fd`, unless it is the file being read (`current`) or one kept already."""
        ident = (info.st_dev, info.st_ino)
        with self._lock:
            keep = (
                not self._closed
                and ident != current
                and len(self._files) < self.limit
                and all((i.st_dev, i.st_ino) != ident for _, i in self._files)
            )
            if keep:
                self._files.append((fd, info))
            elif len(self._files) >= self.limit:
                self.overflowed += 1
        if not keep:
            os.close(fd)

    def largest(self, current: FileId | None) -> int | None:
        """The largest size now of the kept files other than `current`; `None` when none.

        Any of them holding a line means the writer has moved on from `current`.
        """
        with self._lock:
            sizes = [
                os.fstat(fd).st_size
                for fd, info in self._files
                if (info.st_dev, info.st_ino) != current
            ]
        return max(sizes) if sizes else None

    def discard(self, ident: FileId | None) -> None:
        """Close and forget a kept file that is (or was opened as) the file being read."""
        with self._lock:
            same = [item for item in self._files if (item[1].st_dev, item[1].st_ino) == ident]
            for item in same:
                self._files.remove(item)
        for fd, _ in same:
            os.close(fd)

    def pop(self) -> tuple[int, os.stat_result] | None:
        """Take the oldest kept file; `None` when none."""
        with self._lock:
            return self._files.popleft() if self._files else None

    def close(self) -> None:
        """Close every kept file; later `add`s close theirs at once."""
        with self._lock:
            self._closed = True
            files, self._files = list(self._files), deque()
        for fd, _ in files:
            os.close(fd)


COMPRESSED_SUFFIXES = (".gz", ".bz2", ".xz", ".zst", ".lz4", ".Z", ".zip")
"""Copies already compressed: their bytes are not the log's, so they are never read."""
_ROTATION_SUFFIX = re.compile(r"[._-][0-9][0-9._-]*")


def is_copy_name(name: str, base: str) -> bool:
    """Whether `name` is one logrotate (or a user) gives a copy of the log named `base`.

    `train.log.1`, `train.log-20250101`, `train.log-2025010112.1` (the log's name plus a
    suffix), or with logrotate's `extension .log` the suffix before the extension
    (`train-20250101.log`, `train.1.log`). Compressed copies are left out.
    """
    if name == base or name.endswith(COMPRESSED_SUFFIXES):
        return False
    if name.startswith(base):
        return True
    stem, extension = os.path.splitext(base)
    return (
        bool(extension)
        and len(name) > len(base)
        and name.startswith(stem)
        and name[len(stem)] in ".-_"
        and name.endswith(extension)
    )


def rotation_suffix(name: str, base: str) -> bool:
    """Whether `name` is `base` with a suffix logrotate writes: numbers and dates.

    `train.log.1`, `train.log-20250101`, `train.log-2025010112.3`, `train-20250101.log`; not
    `train.log.bak` or `train.log.swp`, which no rotation made.
    """
    stem, extension = os.path.splitext(base)
    if name.startswith(base):
        suffix = name[len(base) :]
    elif extension and name.startswith(stem) and name.endswith(extension):
        suffix = name[len(stem) : len(name) - len(extension)]
    else:
        return False
    return bool(_ROTATION_SUFFIX.fullmatch(suffix))


def head_of(fd: int, length: int = 256) -> tuple[int, bytes]:
    """Where the first byte that is not NUL lies in a file, and up to `length` bytes from there.

    A writer without `O_APPEND` goes on writing at its own offset after a copytruncate: the file
    then starts with a hole of NUL bytes, and its first real bytes lie after it. The hole is
    skipped with `SEEK_DATA` where the filesystem keeps it sparse; NULs written as data are
    scanned for at most `MAX_HOLE_SCAN_BYTES` (beyond that the file reads as all NULs).
    """
    try:
        position = os.lseek(fd, 0, os.SEEK_DATA)
    except OSError as error:
        if error.errno == errno.ENXIO:  # no data at all: empty, or a hole to its end
            return 0, b""
        position = 0  # SEEK_DATA not supported here
    end = position + MAX_HOLE_SCAN_BYTES
    while position < end:
        block = os.pread(fd, 64 * 1024, position)
        if not block:
            break
        stripped = block.lstrip(b"\0")
        if stripped:
            position += len(block) - len(stripped)
            return position, os.pread(fd, length, position)
        position += len(block)
    return 0, b""


def copy_candidates(path: str) -> list[tuple[int, int, str]]:
    """Every regular file beside `path` named like a copy of it, oldest first.

    Returns:
        (mtime in ns, inode, path) of each.
    """
    directory, base = os.path.split(os.path.abspath(path))
    candidates: list[tuple[int, int, str]] = []
    try:
        with os.scandir(directory) as entries:
            for entry in itertools.islice(entries, MAX_COPY_CANDIDATES):
                if not is_copy_name(entry.name, base):
                    continue
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISREG(info.st_mode):
                    candidates.append((info.st_mtime_ns, info.st_ino, entry.path))
    except OSError:
        return []
    return sorted(candidates)


def newest_copy_ns(path: str) -> int:
    """The mtime (ns) of the newest copy beside `path`; 0 when there is none."""
    candidates = copy_candidates(path)
    return candidates[-1][0] if candidates else 0


def open_copies(path: str) -> list[tuple[int, int, bool]]:
    """Open the newest `MAX_OPEN_COPIES` copies beside `path`, oldest first.

    Each is (mtime in ns, read-only descriptor, whether its name is one rotation gives:
    `rotation_suffix`). logrotate shifts `train.log.1` to `train.log.2` before it copies: a
    name listed may name another file by the time it is opened, so each is checked by inode
    and the directory listed again when one moved. A name listed as a regular file may be a
    pipe by the time it is opened, and opening one waits for a writer: the open does not wait
    (`O_NONBLOCK`), and what is not a regular file is left alone, as the listing leaves it.
    """
    for _ in range(5):
        opened: list[tuple[int, int, bool]] = []
        base = os.path.basename(path)
        for mtime_ns, inode, candidate in copy_candidates(path)[-MAX_OPEN_COPIES:]:
            fd = _open_regular(candidate)
            if fd is None:
                continue
            opened.append((mtime_ns, fd, rotation_suffix(os.path.basename(candidate), base)))
            if os.fstat(fd).st_ino != inode:
                break
        else:
            return opened
        close_all(fd for _, fd, _ in opened)
    return []


def _open_regular(path: str) -> int | None:
    """A blocking read-only descriptor of `path` if it is a regular file, else `None`."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.set_blocking(fd, True)
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def close_all(fds: Iterable[int]) -> None:
    """Close every descriptor of `fds`."""
    for fd in fds:
        os.close(fd)


def _is_copy_of(fd: int, head: tuple[int, bytes], recent: bytes, offset: int) -> bool:
    """Whether the file `fd` starts like the generation read and holds `recent` at `offset`.

    `head` is where the generation's first bytes that are not NUL lie, and those bytes; `recent`
    must end just before `offset`.
    """
    at, first = head
    try:
        return (
            os.fstat(fd).st_size >= offset
            and os.pread(fd, len(first), at) == first
            and os.pread(fd, len(recent), offset - len(recent)) == recent
        )
    except OSError:
        return False


def find_copy(
    path: str,
    head: tuple[int, bytes],
    recent: bytes,
    offset: int,
    current: bytes = b"",
    read: Iterable[bytes] = (),
    taken: Container[CopyId] = (),
) -> tuple[list[int], int]:
    """Open the copy that copytruncate made of the file at `path` before cutting it.

    The copy lies beside the log (`is_copy_name`), starts with the same `head` (the position
    of the generation's first bytes that are not NUL, and those bytes), is at least `offset`
    bytes long and holds `recent` (the last bytes read) just before `offset`. The newest such
    file is taken. Copies made after it are of later generations, cut before the tail looked
    (two cuts between two looks): they follow it, oldest first (`later_copies`), unless they
    start like a generation `read` already or were handed out before (`taken`).

    Returns:
        Read-only descriptors: the copy, then the later generations' copies; none when there is
        no copy (`> log`, a copy compressed or moved away already). And the copy's mtime (ns;
        0 without one): copies no newer than it are of generations before it.
    """
    copies = open_copies(path)
    for index in range(len(copies) - 1, -1, -1):
        fd = copies[index][1]
        if head[1] and _is_copy_of(fd, head, recent, offset):
            close_all(fd for _, fd, _ in copies[:index])
            later = later_copies(copies[index + 1 :], [head[1], *read], current, taken)
            return [fd, *later], copies[index][0]
    close_all(fd for _, fd, _ in copies)
    return [], 0


def copy_id(fd: int) -> CopyId:
    """The `CopyId` of the copy open as `fd`."""
    info = os.fstat(fd)
    return info.st_ino, info.st_mtime_ns, info.st_size


def copies_since(
    path: str,
    since_ns: int,
    current_fd: int,
    read: Iterable[bytes],
    taken: Container[CopyId] = (),
) -> list[int]:
    """Copies made beside `path` after `since_ns` of generations not read yet, oldest first.

    They are of generations cut before any of their bytes was read (`later_copies`). A copy is
    judged by its first bytes, never by its time alone: a copy missed at its cut (renamed on
    while the copies were listed) starts like a generation `read` already, and a copy made
    before its cut (skipped then: its lines were still in the log) may be of a generation the
    log no longer holds. A copy already handed out as a generation (`taken`) is no new one: a
    copy too short to be known by its first bytes was read again at every look before.
    """
    copies = open_copies(path)
    close_all(fd for mtime_ns, fd, _ in copies if mtime_ns <= since_ns)
    fresh = [copy for copy in copies if copy[0] > since_ns]
    if not fresh:  # the common case: no head of the current file to read
        return []
    return later_copies(fresh, list(read), head_of(current_fd)[1], taken)


def later_copies(
    copies: list[tuple[int, int, bool]],
    read: list[bytes],
    current: bytes,
    taken: Container[CopyId] = (),
) -> list[int]:
    """Keep `copies` (oldest first) as generations of their own, except a second copy.

    Only a copy named as rotation names them counts (`train.log.bak` is someone's backup). A
    copy that starts like a generation read (the first bytes of each, `read`) or like the file
    now at the path (`current`: copied, but not cut yet) is a second copy of a file read
    anyway, not a generation of its own, and so is a copy handed out before (`taken`). The
    others are closed.
    """
    out = []
    longest = max([len(current), 1, *map(len, read)])
    for _, fd, rotated in copies:
        try:
            _, first = head_of(fd, longest) if rotated else (0, b"")
        except OSError:
            first = b""
        if (
            first
            and not any(_same_start(first, other) for other in (*read, current))
            and copy_id(fd) not in taken
        ):
            out.append(fd)
        else:
            os.close(fd)
    return out


def _same_start(first: bytes, other: bytes) -> bool:
    common = min(len(first), len(other))
    return common > 0 and first[:common] == other[:common]
