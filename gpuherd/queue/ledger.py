"""The host-wide reservation ledger: one JSON file per reservation in a sticky shared dir."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from collectors.base import GpuherdError
from gpuherd.queue.headroom import Reservation
from gpuherd.queue.liveness import same_process

LOCK_NAME = "ledger.lock"


class LedgerError(GpuherdError):
    """The ledger directory cannot be trusted or used; one line, exit 2."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg, title="ledger")


def default_ledger_dir() -> Path:
    """`$GPUHERD_LEDGER_DIR`, else `/tmp/gpuherd-ledger`."""
    return Path(os.environ.get("GPUHERD_LEDGER_DIR") or "/tmp/gpuherd-ledger")


class Ledger:
    """Every user's reservations; `locked()` for a decision plus its reservations."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        if directory.is_symlink():
            raise LedgerError(f"{directory} is a symbolic link: refusing the ledger there")
        if not directory.exists():
            directory.mkdir(parents=True, exist_ok=True)
            try:
                os.chmod(directory, 0o1777)
            except PermissionError:
                pass
        mode = directory.stat().st_mode
        if not stat.S_ISDIR(mode):
            raise LedgerError(f"{directory} is not a directory")
        if mode & 0o022 and not mode & stat.S_ISVTX:
            raise LedgerError(f"{directory} is writable by others without the sticky bit")
        if not mode & stat.S_ISVTX:
            raise LedgerError(f"{directory} is not sticky (mode {mode & 0o7777:o}; want 1777)")

    @contextmanager
    def locked(self) -> Iterator[LedgerView]:
        """Hold the exclusive lock for one decision and its reservations."""
        path = self.directory / LOCK_NAME
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise LedgerError(f"{path} is not a regular file")
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield LedgerView(self.directory)
        finally:
            os.close(fd)


class LedgerView:
    """The ledger while its lock is held."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _entries(self) -> Iterator[tuple[Path, dict[str, object], int]]:
        for path in self.directory.glob("*.json"):
            try:
                st = path.lstat()
                if not stat.S_ISREG(st.st_mode):
                    continue
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(data, dict):
                yield path, data, st.st_uid

    def live(self) -> list[Reservation]:
        """Every user's live entries; own dead or expired ones are deleted."""
        now, out = time.time(), []
        for path, data, uid in self._entries():
            try:
                alive = (float(data["expires_at"]) > now  # type: ignore[arg-type]
                         and same_process(int(data["pid"]),  # type: ignore[call-overload]
                                          float(data["pid_start_time"])))  # type: ignore[arg-type]
                entry = Reservation(str(data["gpu_uuid"]), int(data["bytes"]),  # type: ignore[call-overload]
                                    str(data["job"]))
            except (KeyError, TypeError, ValueError):
                continue
            if alive:
                out.append(entry)
            elif uid == os.getuid():
                path.unlink(missing_ok=True)
        return out

    def reserve(self, gpu_uuid: str, bytes_: int, job: str, pid: int, pid_start_time: float,
                expires_at: float) -> None:
        """Write one reservation, owned by this user, mode 0644."""
        key = hashlib.sha1(f"{job}\0{gpu_uuid}".encode()).hexdigest()[:20]
        path = self.directory / f"{os.getuid()}-{key}.json"
        tmp = path.with_name(f".{path.name}.tmp")
        entry = {"gpu_uuid": gpu_uuid, "bytes": bytes_, "uid": os.getuid(), "pid": pid,
                 "pid_start_time": pid_start_time, "expires_at": expires_at, "job": job}
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(entry, f)
        os.replace(tmp, path)

    def release(self, job: str) -> None:
        """Delete this user's entries of `job`."""
        for path, data, uid in self._entries():
            if uid == os.getuid() and data.get("job") == job:
                path.unlink(missing_ok=True)
