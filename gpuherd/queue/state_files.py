"""The per-user state directory and the queue database file: where they are, who may use them.

The queue holds commands and their environments, so the directory must be the person's own and
not writable by anyone else, and the database readable by its owner only (mode 0600). Both are
checked before SQLite opens anything; a file that fails is refused with the reason, never
repaired behind the person's back.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

from collectors.base import GpuherdError

STATE_DIR_ENV = "GPUHERD_STATE_DIR"
DB_FILE = "queue.db"
SIDE_FILES = ("-wal", "-shm")
"""SQLite's WAL and shared-memory files next to the database, created with its mode."""


class QueueError(GpuherdError):
    """The queue refuses what was asked: a bad value, a job in the wrong state, a bad database.

    `msg` is the one line to show; commands turn it into exit status 2.
    """

    def __init__(self, msg: str) -> None:
        super().__init__(msg, title="queue")


def default_state_dir() -> Path:
    """`$GPUHERD_STATE_DIR`, else `$XDG_STATE_HOME/gpuherd`, else `~/.local/state/gpuherd`."""
    explicit = os.environ.get(STATE_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_STATE_HOME")
    if xdg and os.path.isabs(xdg):  # the XDG spec says to ignore a relative value
        return Path(xdg) / "gpuherd"
    return Path.home() / ".local" / "state" / "gpuherd"


def _owner_problem(st: os.stat_result, what: str, path: Path) -> str | None:
    uid = os.getuid()
    if st.st_uid != uid:
        return f"{path}: {what} is owned by uid {st.st_uid}, not by you (uid {uid}); refusing it"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return (
            f"{path}: {what} is writable by other users (mode {stat.S_IMODE(st.st_mode):04o})"
            f"; refusing it (chmod go-w {path})"
        )
    return None


def prepare_state_dir(directory: Path) -> Path:
    """Create the state directory (mode 0700) if needed and check it; the database's path.

    Raises:
        QueueError: the directory cannot be created, is not a directory, belongs to another
            user or is writable by others; or the database is a symlink, not a regular file,
            not the person's own, or open to other users.
    """
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.stat(directory)
    except OSError as error:
        raise QueueError(
            f"{directory}: cannot use it as the state directory: {error.strerror or error}"
        ) from None
    if not stat.S_ISDIR(st.st_mode):
        raise QueueError(f"{directory}: the state directory is not a directory")
    problem = _owner_problem(st, "the state directory", directory)
    if problem:
        raise QueueError(problem)
    db = directory / DB_FILE
    for path in (db, *(db.with_name(db.name + side) for side in SIDE_FILES)):
        _check_db_file(path)
    return db


def _check_db_file(path: Path) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as error:
        raise QueueError(f"{path}: cannot read it: {error.strerror}") from None
    if stat.S_ISLNK(st.st_mode):
        raise QueueError(
            f"{path}: is a symbolic link; refusing it (the queue database must be "
            "a file of its own)"
        )
    if not stat.S_ISREG(st.st_mode):
        raise QueueError(f"{path}: is not a regular file; refusing it")
    problem = _owner_problem(st, "the queue database", path)
    if problem:
        raise QueueError(problem)
    if st.st_mode & 0o077:
        raise QueueError(
            f"{path}: other users may read it (mode {stat.S_IMODE(st.st_mode):04o})"
            f" and it holds your commands and environments; refusing it "
            f"(chmod 600 {path})"
        )


def create_db_file(path: Path) -> None:
    """Create an empty database file with mode 0600 unless one exists already.

    SQLite gives its `-wal` and `-shm` files the database's mode, so they are 0600 too.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        return
    except OSError as error:
        raise QueueError(f"{path}: cannot create it: {error.strerror}") from None
    os.close(fd)


def backup_corrupt(path: Path) -> Path:
    """Move a corrupt database (and its WAL files) aside; the backup's path.

    Nothing is deleted: the backup can be inspected or repaired with `sqlite3 .recover`.
    """
    stamp = time.strftime("%Y%m%d-%H%M%S")
    backup = path.with_name(f"{path.name}.corrupt-{stamp}")
    n = 1
    while backup.exists():
        n += 1
        backup = path.with_name(f"{path.name}.corrupt-{stamp}-{n}")
    try:
        os.rename(path, backup)
        for side in SIDE_FILES:
            if os.path.lexists(f"{path}{side}"):
                os.rename(f"{path}{side}", f"{backup}{side}")
    except OSError as error:
        raise QueueError(
            f"{path}: is not a valid queue database, and it could not be moved "
            f"aside ({error.strerror}); nothing was changed: move it yourself"
        ) from None
    return backup


def db_error(path: Path, doing: str, error: Exception) -> QueueError:
    """One line for an SQLite error met while `doing`, naming a full disk when it is one.

    SQLite reports a full disk as "database or disk is full", or, when the write that failed
    was to its WAL or shared-memory file, as a bare "disk I/O error"; both say nothing of the
    disk, so the free space of the database's filesystem is looked at.
    """
    try:
        fs = os.statvfs(path.parent)
        full = fs.f_bavail * fs.f_frsize < FULL_BELOW_BYTES
    except OSError:
        full = False
    if full:
        return QueueError(
            f"{path}: cannot {doing}: the disk holding {path.parent} is full "
            f"({error}); free some space and run the command again"
        )
    return QueueError(f"{path}: cannot {doing}: {error}")


FULL_BELOW_BYTES = 1 << 20
"""Free space under which a failed write is blamed on a full disk (SQLite writes pages of a
few KiB, and a filesystem keeps a little back)."""


def disk_full_note(directory: Path) -> str | None:
    """`the disk holding DIR is full` when it has less than `FULL_BELOW_BYTES` free."""
    try:
        fs = os.statvfs(directory)
    except OSError:
        return None
    if fs.f_bavail * fs.f_frsize < FULL_BELOW_BYTES:
        return f"the disk holding {directory} is full"
    return None
