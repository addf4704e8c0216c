"""The shared ledger's locks: taken when it is safe to, never waited on for long, holders named.

Every runner locks the ledger directory itself (owned by root or by this user, so nobody can
plant anything in its place), and `ledger.lock` as well when that is the regular file its owner
created (the lock older gpuherds take). Any user who can read either can hold it (`flock -s`),
so the locks only order honest runners: a runner that cannot use one, or waits too long for it,
says so once and goes on (docs/queue.md, "What the ledger trusts").
"""

from __future__ import annotations

import fcntl
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

from gpuherd.common.safe_files import kind_of, user_name

LOCK_NAME = "ledger.lock"
LOCK_TIMEOUT_S = 5.0
"""How long a runner waits for the lock before going on without it (a decision holds it for
milliseconds)."""
RETRY_WAIT_S = 0.05
"""After one wait ran out, later tries wait only this long until the lock is free again, so a
held lock does not slow every step by `LOCK_TIMEOUT_S`."""
GOING_ON = (
    "going on without it: reservations are still read and written, but two runners "
    "deciding at the same moment could share headroom"
)
STILL_ORDERED = "the ledger directory's own lock still orders runners"
_OPEN_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
"""O_NONBLOCK: a FIFO planted under the lock's name must not hang the open."""


class LedgerLock:
    """The locks of one ledger directory, with what was last said about each."""

    def __init__(self, directory: Path, timeout_s: float, say: Callable[[str], None]) -> None:
        self.directory = directory
        self.path = directory / LOCK_NAME
        self.timeout_s = timeout_s
        self._say = say
        self._said: dict[str, str | None] = {"dir": None, "file": None}
        self._waited_out = {"dir": False, "file": False}

    def take(self, dir_fd: int, dir_owner: int) -> int | None:
        """Lock the directory (through `dir_fd`) and `ledger.lock`; the latter's descriptor.

        Each lock that cannot be had is said once (and again only once it changes); closing
        `dir_fd` and the descriptor returned releases them.
        """
        problem = self._acquire("dir", dir_fd, f"{self.directory} (the ledger directory)")
        self._note("dir", problem and f"{problem}; {GOING_ON}")
        fd, problem = self._open(dir_fd, dir_owner)
        if fd is not None:
            problem = self._acquire("file", fd, str(self.path))
            if problem is not None:
                os.close(fd)
                fd = None
        self._note("file", problem and f"{problem}; it is not used ({STILL_ORDERED})")
        return fd

    def prepare(self, dir_fd: int, dir_owner: int) -> None:
        """Create `ledger.lock` if this user owns the directory; say if it cannot be used.

        Nothing is locked: a ledger being opened waits for no one.
        """
        fd, problem = self._open(dir_fd, dir_owner)
        if fd is not None:
            os.close(fd)
        self._note("file", problem and f"{problem}; it is not used ({STILL_ORDERED})")

    def _note(self, which: str, problem: str | None) -> None:
        if problem == self._said[which]:
            return
        if problem is not None:
            self._say(f"ledger: {problem}")
        elif which == "dir":
            self._say(f"ledger: {self.directory} can be locked again")
        else:
            self._say(f"ledger: {self.path} is usable again")
        self._said[which] = problem

    def _open(self, dir_fd: int, dir_owner: int) -> tuple[int | None, str | None]:
        try:
            info = os.stat(LOCK_NAME, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            if os.geteuid() != dir_owner:
                return None, None  # only the directory's owner creates it; not needed here
            problem = self._create(dir_fd)
            if problem is not None:
                return None, problem
            return self._open(dir_fd, dir_owner)
        except OSError as error:
            return None, f"{self.path} cannot be looked at: {error.strerror}"
        if stat.S_ISLNK(info.st_mode):
            return None, f"{self.path} is a symbolic link, not the ledger's lock"
        if not stat.S_ISREG(info.st_mode):
            return None, f"{self.path} is not a regular file ({kind_of(info.st_mode)})"
        if info.st_uid not in (0, dir_owner):
            return None, (
                f"{self.path} belongs to {user_name(info.st_uid)}, not to the ledger "
                f"directory's owner ({user_name(dir_owner)}), so it is not trusted"
            )
        try:
            fd = os.open(LOCK_NAME, _OPEN_READ, dir_fd=dir_fd)
        except OSError as error:
            return None, f"{self.path} cannot be opened: {error.strerror}"
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            os.close(fd)
            return None, f"{self.path} was replaced while it was opened"
        return fd, None

    def _create(self, dir_fd: int) -> str | None:
        try:
            fd = os.open(
                LOCK_NAME,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o644,
                dir_fd=dir_fd,
            )
        except FileExistsError:
            return None  # someone was faster: judged like any lock found there
        except OSError as error:
            return f"{self.path} cannot be created: {error.strerror}"
        try:
            os.fchmod(fd, 0o644)  # readable by all: every user locks it through O_RDONLY
        finally:
            os.close(fd)
        return None

    def _acquire(self, which: str, fd: int, what: str) -> str | None:
        # Polled rather than blocking: a holder that never lets go (a hung process, or another
        # user holding it on purpose) costs one line, not a stalled queue.
        waited_out = self._waited_out[which]
        deadline = time.monotonic() + (RETRY_WAIT_S if waited_out else self.timeout_s)
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._waited_out[which] = False
                return None
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    self._waited_out[which] = True
                    return (
                        f"{what} has been held for over {self.timeout_s:g} s by "
                        f"{holders(os.fstat(fd))}"
                    )
                time.sleep(0.002)


def holders(info: os.stat_result) -> str:
    """Who holds a lock on the file `info` describes, from /proc/locks."""
    wanted = (os.major(info.st_dev), os.minor(info.st_dev), info.st_ino)
    found: list[str] = []
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as table:
            lines = table.read(1 << 20).splitlines()
    except OSError:
        lines = []
    for line in lines:
        fields = line.split()
        if "->" in fields or len(fields) < 6:
            continue  # a waiter, not a holder
        try:
            major, minor, inode = fields[5].split(":")
            key = (int(major, 16), int(minor, 16), int(inode))
            pid = int(fields[4])
        except ValueError:
            continue
        if key == wanted and pid != os.getpid():
            found.append(f"pid {pid} ({_process_user(pid)})")
    return ", ".join(sorted(set(found))[:4]) or "a process /proc/locks does not name"


def _process_user(pid: int) -> str:
    try:
        return f"user {user_name(os.stat(f'/proc/{pid}').st_uid)}"
    except OSError:
        return "user unknown"
