"""The session directory: writing it while recording, and loading it again."""

from __future__ import annotations

import csv
import errno
import fcntl
import json
import math
import os
import socket
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from collectors.rows import (
    GPU_COLUMNS,
    GPU_FILE,
    HOST_COLUMNS,
    HOST_FILE,
    PROCESS_COLUMNS,
    PROCESSES_FILE,
    SessionError,
    SessionFormatError,
    cell,
    gpu_rows,
    host_row,
    process_rows,
)
from collectors.samples import GpuTick, HostSample, ProcessInfo
from collectors.session_reader import (
    EVENTS_FILE,
    META_FILE,
    SCHEMA,
    SessionReader,
    meta_problem,
    read_meta,
)
from gpuherd import __version__

__all__ = [
    "LOCK_FILE",
    "SCHEMA",
    "SessionError",
    "SessionExistsError",
    "SessionFormatError",
    "SessionLockedError",
    "SessionReader",
    "SessionWriteError",
    "SessionWriter",
    "load_session",
    "read_meta",
]

LOCK_FILE = ".lock"
_CORE_FILES = (META_FILE, GPU_FILE, PROCESSES_FILE, HOST_FILE, EVENTS_FILE)


class SessionWriteError(SessionError):
    """Recording cannot go on (directory unwritable, disk full); the message says what was kept."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg, title="Recording")


class SessionLockedError(SessionError):
    """Another recorder holds the directory's `.lock`."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg, title="Recording")


class SessionExistsError(SessionError):
    """The directory already holds a session; recording into it would mix two runs."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg, title="Recording")


def load_session(directory: str | os.PathLike[str]) -> SessionReader:
    """Open a session directory for reading; raises `SessionFormatError` when it is unusable."""
    return SessionReader(directory)


class SessionLock:
    """The `.lock` of a session directory.

    Created with `O_CREAT | O_EXCL` and holding `pid host`, and kept under `flock` for the
    writer's life. The kernel drops the `flock` when the holder dies (even by `kill -9`), so a
    lock file nobody holds is stale whatever pid it names (a pid may have been reused).
    """

    def __init__(self, directory: Path) -> None:
        self.path = directory / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> str | None:
        """Take the lock; return a warning when a stale one was taken over.

        Raises:
            SessionLockedError: a live recorder holds it.
            OSError: the lock file cannot be created (the caller words it).
        """
        for _ in range(5):
            try:
                fd, created = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644), True
            except FileExistsError:
                try:
                    fd, created = os.open(self.path, os.O_RDWR), False
                except FileNotFoundError:
                    continue  # released between our two calls: try creating again
            try:
                took = self._hold(fd, created)
            except BaseException:
                os.close(fd)
                raise
            if took is not None:
                self._fd = fd
                return took or None
            os.close(fd)
        raise SessionLockedError(f"{self.path} keeps changing: another recorder is starting there")

    def _hold(self, fd: int, created: bool) -> str | None:
        """Lock `fd`; `None` means the path was replaced meanwhile, retry; `""` means fresh."""
        previous = os.pread(fd, 256, 0).decode("utf-8", "replace").strip()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SessionLockedError(self._held_message(previous)) from None
        except OSError:
            # No flock on this filesystem: fall back to asking whether the pid still runs.
            if not created and _holder_alive(previous):
                raise SessionLockedError(self._held_message(previous)) from None
        try:
            if os.fstat(fd).st_ino != os.stat(self.path).st_ino:
                return None
        except FileNotFoundError:
            return None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        os.fsync(fd)
        if created:
            return ""
        pid = previous.split()[0] if previous else "unknown"
        return f"took over the stale lock {self.path} of a recorder that is gone (pid {pid})"

    def _held_message(self, previous: str) -> str:
        parts = previous.split()
        who = f"pid {parts[0]}" if parts else "another process"
        if len(parts) > 1 and parts[1] != socket.gethostname():
            who += f" on {parts[1]}"
        return (f"{self.path.parent} is being recorded by {who} (see {self.path}); record into "
                "another directory or stop that recorder first")

    def release(self) -> None:
        """Remove the lock file and drop the lock."""
        if self._fd is None:
            return
        try:
            if os.fstat(self._fd).st_ino == os.stat(self.path).st_ino:
                os.unlink(self.path)
        except OSError:
            pass  # already gone, or the directory went read-only: the flock still ends below
        os.close(self._fd)
        self._fd = None


def _holder_alive(content: str) -> bool:
    parts = content.split()
    if not parts or not parts[0].isdigit():
        return False
    if len(parts) > 1 and parts[1] != socket.gethostname():
        return True  # cannot ask another machine; assume it is still recording
    try:
        os.kill(int(parts[0]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _Table:
    """One CSV file being appended to."""

    def __init__(self, path: Path, columns: Sequence[str]) -> None:
        self.path, self.columns = path, tuple(columns)
        self.file: IO[str] = path.open("a", newline="", encoding="utf-8",
                                       errors="backslashreplace")
        self.writer = csv.writer(self.file, lineterminator="\n")
        if self.file.tell() == 0:
            self.writer.writerow(self.columns)
            self.sync()  # a readable header at once: a crash later still leaves a valid file

    def sync(self) -> None:
        self.file.flush()
        os.fsync(self.file.fileno())


class SessionWriter:
    """Writes one session directory while recording. Use it from one thread only.

    Creates the directory, takes `.lock`, writes `gpu.csv`'s header and `meta.json`, then appends
    rows. Files are flushed and fsynced at least every `flush_interval_s` by the writes themselves
    and by `flush_if_due()`, so a crash loses at most that much. Any failure to write raises
    `SessionWriteError` saying what was kept; the writer then refuses further writes.
    """

    def __init__(self, directory: str | os.PathLike[str], meta: Mapping[str, Any] | None = None,
                 *, flush_interval_s: float = 2.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.directory = Path(directory)
        self.flush_interval_s = flush_interval_s
        self.warnings: list[str] = []
        """Things worth telling the person (for example a stale lock taken over)."""
        self.meta: dict[str, Any] = _initial_meta(meta or {})
        self._clock = clock
        self._tables: dict[str, _Table] = {}
        self._events: IO[str] | None = None
        self._details: dict[int, ProcessInfo] = {}
        self._last_flush = clock()
        self._written_t: float | None = None
        self._synced_t: float | None = None
        self._failed: SessionWriteError | None = None
        self.closed = False
        self._lock = SessionLock(self.directory)
        self._start()

    def __enter__(self) -> SessionWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> None:
        _make_directory(self.directory)
        try:
            took_over = self._lock.acquire()
        except OSError as error:
            raise SessionWriteError(f"cannot create {self._lock.path}: {_reason(error)}") from None
        try:
            _refuse_existing(self.directory)
            self._table(GPU_FILE, GPU_COLUMNS)
            self._write_meta()
        except BaseException:
            self._abandon()
            raise
        if took_over:
            self.warnings.append(took_over)
            self.write_event({"kind": "lock_taken_over", "msg": took_over})

    def write_gpu_tick(self, tick: GpuTick, peaks_by_uuid: Mapping[str, int] | None = None) -> None:
        """Append one tick to `gpu.csv`, and its processes (with host details) to `processes.csv`.

        Args:
            tick: the full sample of every GPU.
            peaks_by_uuid: the highest memory used per GPU UUID since the previous row, from a
                fast sampler; written as `mem_peak_bytes`.
        """
        self._append(GPU_FILE, GPU_COLUMNS, gpu_rows(tick, peaks_by_uuid), tick.taken_at)
        procs = process_rows(tick, self._details)
        if procs:
            self._append(PROCESSES_FILE, PROCESS_COLUMNS, procs, tick.taken_at)

    def write_host(self, sample: HostSample) -> None:
        """Append one host sample; its process details go into the GPU process rows that follow."""
        self._details = {p.pid: p for p in sample.processes}
        self._append(HOST_FILE, HOST_COLUMNS, [host_row(sample)], sample.taken_at)

    def append_rows(self, file_name: str, columns: Sequence[str],
                    rows: Iterable[Mapping[str, object] | Sequence[object]]) -> None:
        """Append rows to a further CSV file of the session (for example `metrics.csv`).

        Args:
            file_name: a bare `*.csv` name other than the three core files.
            columns: its columns; fixed by the first call for that file.
            rows: mappings by column name (missing keys are empty cells) or sequences in
                `columns` order. `None` is written as an empty cell.
        """
        if (os.sep in file_name or not file_name.endswith(".csv")
                or file_name in (GPU_FILE, PROCESSES_FILE, HOST_FILE)):
            raise ValueError(f"append_rows cannot write {file_name!r}")
        table = self._tables.get(file_name)
        if table is not None and table.columns != tuple(columns):
            raise ValueError(f"{file_name} was started with columns {table.columns}")
        cells = [[cell(r.get(c)) for c in columns] if isinstance(r, Mapping) else
                 [cell(v) for v in r] for r in rows]
        self._append(file_name, columns, cells, None)

    def write_event(self, event: Mapping[str, Any]) -> None:
        """Append one object to `events.jsonl`; `t` (now) is added when missing."""
        self._check()
        record = {"t": time.time(), **event}
        line = json.dumps(_json_safe(record), ensure_ascii=False, default=str) + "\n"
        try:
            if self._events is None:
                self._events = (self.directory / EVENTS_FILE).open(
                    "a", encoding="utf-8", errors="backslashreplace")
            self._events.write(line)
        except OSError as error:
            raise self._fail(error, self.directory / EVENTS_FILE) from None
        self.flush_if_due()

    def update_meta(self, **updates: Any) -> None:
        """Merge `updates` into `meta.json` and rewrite it atomically."""
        self._check()
        self.meta.update(updates)
        self._write_meta()

    def flush_if_due(self) -> None:
        """Flush and fsync when `flush_interval_s` has passed since the last time."""
        if self._clock() - self._last_flush >= self.flush_interval_s:
            self.flush()

    def flush(self) -> None:
        """Flush every open file to disk now."""
        self._check()
        files = [(t.path, t.file) for t in self._tables.values()]
        if self._events is not None:
            files.append((self.directory / EVENTS_FILE, self._events))
        for path, f in files:
            try:
                f.flush()
                os.fsync(f.fileno())
            except OSError as error:
                raise self._fail(error, path) from None
        self._last_flush = self._clock()
        self._synced_t = self._written_t

    def close(self, **meta_updates: Any) -> None:
        """Flush, set `ended_at` (and `meta_updates`) in `meta.json`, close files, release the lock.

        After a write failure this still closes and releases, and raises nothing new.
        """
        if self.closed:
            return
        error: SessionWriteError | None = None
        try:
            if self._failed is None:
                self.flush()
                self.meta.update({"ended_at": time.time(), **meta_updates})
                self._write_meta()
        except SessionWriteError as failure:
            error = failure
        finally:
            self.closed = True
            self._abandon()
        if error is not None:
            raise error

    def _append(self, name: str, columns: Sequence[str], rows: list[list[str]],
                t: float | None) -> None:
        self._check()
        path = self.directory / name
        try:
            self._table(name, columns).writer.writerows(rows)
        except OSError as error:
            raise self._fail(error, path) from None
        if t is not None:
            self._written_t = t
        self.flush_if_due()

    def _table(self, name: str, columns: Sequence[str]) -> _Table:
        table = self._tables.get(name)
        if table is None:
            try:
                table = self._tables[name] = _Table(self.directory / name, columns)
            except OSError as error:
                raise self._fail(error, self.directory / name) from None
        return table

    def _write_meta(self) -> None:
        path = self.directory / META_FILE
        try:
            _write_json_atomically(path, self.meta)
        except OSError as error:
            raise self._fail(error, path) from None

    def _check(self) -> None:
        if self._failed is not None:
            raise self._failed
        if self.closed:
            raise ValueError("the session writer is closed")

    def _fail(self, error: OSError, path: Path) -> SessionWriteError:
        what = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up"}.get(
            error.errno or 0, _reason(error))
        if self._synced_t is None:
            kept = "nothing beyond the start of the session was safely written"
        else:
            stamp = datetime.fromtimestamp(self._synced_t, timezone.utc).strftime("%H:%M:%S UTC")
            started = float(self.meta["started_at"])
            kept = (f"everything up to {stamp} ({self._synced_t - started:.0f} s after the start) "
                    "is kept, only the last seconds before the failure are lost")
        self._failed = SessionWriteError(
            f"recording stopped: cannot write {path}: {what}. In {self.directory}, {kept}.")
        return self._failed

    def _abandon(self) -> None:
        """Close everything without raising (data that could not be written is already lost)."""
        for f in [t.file for t in self._tables.values()] + [self._events]:
            if f is not None:
                try:
                    f.close()
                except OSError:
                    pass  # the failure was reported by the write that met it
        self._tables.clear()
        self._events = None
        self._lock.release()


def _initial_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "schema": SCHEMA, "tool": f"gpuherd {__version__}", "host": socket.gethostname(),
        "driver": None, "started_at": time.time(), "ended_at": None,
    }
    out.update(meta)
    problem = meta_problem(out)
    if problem:
        raise ValueError(f"bad session metadata: {problem}")
    return out


def _make_directory(directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise SessionWriteError(f"cannot record into {directory}: it exists and is not a "
                                "directory") from None
    except NotADirectoryError:
        raise SessionWriteError(f"cannot create {directory}: a parent of it is a file, not a "
                                "directory") from None
    except OSError as error:
        raise SessionWriteError(f"cannot create {directory}: {_reason(error)}") from None


def _refuse_existing(directory: Path) -> None:
    for name in _CORE_FILES:
        path = directory / name
        if path.is_file() and path.stat().st_size > 0:
            raise SessionExistsError(
                f"{directory} already holds a recorded session ({name} exists); record into a "
                "new directory, or move that one away first")


def _write_json_atomically(path: Path, data: Mapping[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("w", encoding="utf-8") as f:
            json.dump(_json_safe(dict(data)), f, indent=2, default=str)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)  # make the rename itself durable
    finally:
        os.close(dir_fd)


def _json_safe(value: Any) -> Any:
    """NaN and infinities become strings: JSON has no such numbers and `jq` rejects them."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    return value


def _reason(error: OSError) -> str:
    return error.strerror or str(error)
