"""The session directory: writing it while recording, and loading it again."""

from __future__ import annotations

import csv
import errno
import json
import math
import os
import socket
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from collectors.machine.container_gpu import gpu_use_by_container
from collectors.samples import ContainerTick, GpuTick, HostSample, ProcessInfo
from collectors.session.rows import (
    SessionError,
    SessionFormatError,
    cell,
    container_rows,
    gpu_rows,
    host_row,
    process_rows,
)
from collectors.session.session_format import (
    CONTAINER_COLUMNS,
    CONTAINERS_FILE,
    EVENT,
    EVENTS_FILE,
    GPU_COLUMNS,
    GPU_FILE,
    HOST_COLUMNS,
    HOST_FILE,
    META,
    META_FILE,
    PROCESS_COLUMNS,
    PROCESSES_FILE,
    RECORDED_FILES,
    SCHEMA_VERSION,
)
from collectors.session.session_reader import SessionReader, meta_problem, read_meta
from gpuherd import __version__
from gpuherd.common.safe_files import Directory
from gpuherd.session.session_directory import (
    SessionUnsafeError,
    refuse_swappable_path,
    refuse_unsafe,
)
from gpuherd.session.session_lock import SessionLock, SessionLockedError

__all__ = [
    "SessionError",
    "SessionExistsError",
    "SessionFormatError",
    "SessionLockedError",
    "SessionReader",
    "SessionUnsafeError",
    "SessionWriteError",
    "SessionWriter",
    "load_session",
    "read_meta",
]


class SessionWriteError(SessionError):
    """Recording cannot go on (directory unwritable, disk full); the message says what was kept."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg, title="Recording")


class SessionExistsError(SessionError):
    """The directory already holds a session; recording into it would mix two runs."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg, title="Recording")


def load_session(directory: str | os.PathLike[str]) -> SessionReader:
    """Open a session directory for reading; raises `SessionFormatError` when it is unusable."""
    return SessionReader(directory)


class _Table:
    """One CSV file being appended to."""

    def __init__(self, directory: Directory, name: str, columns: Sequence[str]) -> None:
        self.path, self.columns = directory.path / name, tuple(columns)
        self.file: IO[str] = os.fdopen(
            directory.append(name), "a", newline="", encoding="utf-8", errors="backslashreplace"
        )
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

    def __init__(
        self,
        directory: str | os.PathLike[str],
        meta: Mapping[str, Any] | None = None,
        *,
        flush_interval_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.directory = Path(directory)
        self.flush_interval_s = flush_interval_s
        self.warnings: list[str] = []
        """Things worth telling the person (for example a stale lock taken over)."""
        self.meta: dict[str, Any] = _initial_meta(meta or {})
        self._clock = clock
        self._tables: dict[str, _Table] = {}
        self._events: IO[str] | None = None
        self._details: dict[int, ProcessInfo] = {}
        self._gpu_tick: GpuTick | None = None
        self._last_flush = clock()
        self._written_t: float | None = None
        self._synced_t: float | None = None
        self._failed: SessionWriteError | None = None
        self.closed = False
        self._dir = _open_directory(self.directory)
        self._lock = SessionLock(self.directory, self._dir)
        try:
            self._start()
        except BaseException:
            self._dir.close()
            raise

    def __enter__(self) -> SessionWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _start(self) -> None:
        # Every refusal comes before `.lock` is written: nothing is created in a directory
        # that is refused.
        refuse_unsafe(self._dir)
        refuse_swappable_path(self._dir)
        _refuse_existing(self._dir, self._lock)
        try:
            took_over = self._lock.acquire()
        except OSError as error:
            raise SessionWriteError(f"cannot create {self._lock.path}: {_reason(error)}") from None
        try:
            _refuse_existing(self._dir, self._lock)  # one that ended while we took the lock
            self._table(GPU_FILE, GPU_COLUMNS)
            self._write_meta()
        except BaseException:
            self._abandon()
            raise
        if took_over:
            self.warnings.append(took_over)
            self.write_event({"kind": EVENT.lock_taken_over, "msg": took_over})

    def write_gpu_tick(self, tick: GpuTick, peaks_by_uuid: Mapping[str, int] | None = None) -> None:
        """Append one tick to `gpu.csv`, and its processes (with host details) to `processes.csv`.

        Args:
            tick: the full sample of every GPU.
            peaks_by_uuid: the highest memory used per GPU UUID since the previous row, from a
                fast sampler; written as `mem_peak_bytes`.
        """
        self._note_devices(tick)
        self._gpu_tick = tick
        self._append(GPU_FILE, GPU_COLUMNS, gpu_rows(tick, peaks_by_uuid), tick.taken_at)
        procs = process_rows(tick, self._details)
        if procs:
            self._append(PROCESSES_FILE, PROCESS_COLUMNS, procs, tick.taken_at)

    def _note_devices(self, tick: GpuTick) -> None:
        """Keep driver versions and the GPU list in `meta.json`, rewritten only on a change."""
        updates: dict[str, Any] = {}
        for key, value in (
            (META.driver, tick.driver_version),
            (META.nvml_version, tick.nvml_version),
            (META.cuda_driver_version, tick.cuda_driver_version),
        ):
            if value is not None and self.meta.get(key) != value:
                updates[key] = value
        known = {g.get("uuid"): g for g in self.meta.get(META.gpus) or () if isinstance(g, dict)}
        fresh = [d for d in tick.devices if d.error is None and d.uuid not in known]
        for d in fresh:
            known[d.uuid] = {
                "index": d.index,
                "uuid": d.uuid,
                "name": d.name,
                "mem_total_bytes": d.memory_total_bytes,
            }
        if fresh:
            updates[META.gpus] = sorted(known.values(), key=lambda g: g.get("index", 0))
        if updates:
            self.update_meta(**updates)

    def write_host(self, sample: HostSample) -> None:
        """Append one host sample; its process details go into the GPU process rows that follow."""
        self._details = {p.pid: p for p in sample.processes}
        self._append(HOST_FILE, HOST_COLUMNS, [host_row(sample)], sample.taken_at)

    def write_containers(self, tick: ContainerTick) -> None:
        """Append one container tick to `containers.csv` (nothing when no container runs).

        Each container's `gpu_mem_bytes` is the memory of its processes on the GPUs in the
        latest GPU tick, matched through the latest host details
        (`collectors.machine.container_gpu`);
        empty while no GPU tick has listed processes.
        """
        if not tick.containers:
            return
        gpu = self._gpu_tick
        known = gpu is not None and any(d.processes is not None for d in gpu.devices)
        memory = (
            {
                cid: use.memory_bytes
                for cid, use in gpu_use_by_container(gpu, self._details.values()).items()
            }
            if known
            else None
        )
        self._append(
            CONTAINERS_FILE, CONTAINER_COLUMNS, container_rows(tick, memory), tick.taken_at
        )

    def append_rows(
        self,
        file_name: str,
        columns: Sequence[str],
        rows: Iterable[Mapping[str, object] | Sequence[object]],
    ) -> None:
        """Append rows to a further CSV file of the session (for example `metrics.csv`).

        Args:
            file_name: a bare `*.csv` name other than the three core files.
            columns: its columns; fixed by the first call for that file.
            rows: mappings by column name (missing keys are empty cells) or sequences in
                `columns` order. `None` is written as an empty cell.
        """
        if (
            os.sep in file_name
            or not file_name.endswith(".csv")
            or file_name in (GPU_FILE, PROCESSES_FILE, HOST_FILE, CONTAINERS_FILE)
        ):
            raise ValueError(f"append_rows cannot write {file_name!r}")
        table = self._tables.get(file_name)
        if table is not None and table.columns != tuple(columns):
            raise ValueError(f"{file_name} was started with columns {table.columns}")
        cells = [
            [cell(r.get(c)) for c in columns] if isinstance(r, Mapping) else [cell(v) for v in r]
            for r in rows
        ]
        self._append(file_name, columns, cells, None)

    def append_csv_lines(self, file_name: str, columns: Sequence[str], text: str) -> None:
        r"""Append CSV lines the caller formatted: the hot path of `metrics.csv`.

        Args:
            file_name: as for `append_rows`.
            columns: as for `append_rows`; the header written when the file is new.
            text: whole lines, each ending in `\n`, quoted as the `csv` module quotes.
        """
        if (
            os.sep in file_name
            or not file_name.endswith(".csv")
            or file_name in (GPU_FILE, PROCESSES_FILE, HOST_FILE)
        ):
            raise ValueError(f"append_csv_lines cannot write {file_name!r}")
        self._check()
        table = self._table(file_name, columns)
        if table.columns != tuple(columns):
            raise ValueError(f"{file_name} was started with columns {table.columns}")
        try:
            table.file.write(text)
        except OSError as error:
            raise self._fail(error, table.path) from None
        self.flush_if_due()

    def write_event(self, event: Mapping[str, Any]) -> None:
        """Append one object to `events.jsonl`; `t` (now) is added when missing."""
        self._check()
        record = {"t": time.time(), **event}
        line = json.dumps(_json_safe(record), ensure_ascii=False, default=str) + "\n"
        try:
            if self._events is None:
                self._events = os.fdopen(
                    self._dir.append(EVENTS_FILE), "a", encoding="utf-8", errors="backslashreplace"
                )
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

        After a write failure this still closes and releases, tries to note the failure in
        `meta.json` (`write_error`, leaving `ended_at` null), and raises nothing new.
        """
        if self.closed:
            return
        error: SessionWriteError | None = None
        try:
            if self._failed is None:
                self.flush()
                self.meta.update({META.ended_at: time.time(), **meta_updates})
                self._write_meta()
        except SessionWriteError as failure:
            error = failure
        finally:
            self.closed = True
            self._abandon()
            if self._failed is not None and error is None:
                self._note_failure(meta_updates)
            self._dir.close()
        if error is not None:
            raise error

    def _append(
        self, name: str, columns: Sequence[str], rows: list[list[str]], t: float | None
    ) -> None:
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
                table = self._tables[name] = _Table(self._dir, name, columns)
            except OSError as error:
                raise self._fail(error, self.directory / name) from None
        return table

    def _write_meta(self) -> None:
        path = self.directory / META_FILE
        try:
            _write_json_atomically(self._dir, self.meta)
        except OSError as error:
            raise self._fail(error, path) from None

    def _check(self) -> None:
        if self._failed is not None:
            raise self._failed
        if self.closed:
            raise ValueError("the session writer is closed")

    def _fail(self, error: OSError, path: Path) -> SessionWriteError:
        what = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is used up"}.get(
            error.errno or 0, _reason(error)
        )
        if self._synced_t is None:
            kept = "nothing beyond the start of the session was safely written"
        else:
            stamp = datetime.fromtimestamp(self._synced_t, timezone.utc).strftime("%H:%M:%S UTC")
            started = float(self.meta[META.started_at])
            kept = (
                f"everything up to {stamp} ({self._synced_t - started:.0f} s after the start) "
                "is kept, only the last seconds before the failure are lost"
            )
        self._failed = SessionWriteError(
            f"recording stopped: cannot write {path}: {what}. In {self.directory}, {kept}."
        )
        return self._failed

    def _note_failure(self, meta_updates: Mapping[str, Any]) -> None:
        # `ended_at` stays null: the session is incomplete, and readers tell it by that.
        meta = {**self.meta, **meta_updates, META.write_error: str(self._failed)}
        try:
            _write_json_atomically(self._dir, meta)
        except OSError:
            pass  # still full: meta.json keeps its last complete version

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

    def opened_directory(self) -> Directory:
        """The session directory as opened and checked at the start, for writes after `close`.

        Writers that come later (the summary) use it rather than the path, which may name
        something else by then. The caller closes it.
        """
        return self._dir.duplicate()

    def create_empty(self, name: str) -> None:
        """Create the empty file `name` in the session (`command.log` before its writer starts).

        Raises:
            SessionWriteError: it cannot be created, or something already has that name.
        """
        try:
            os.close(self._dir.create(name))
        except OSError as error:
            raise self._fail(error, self.directory / name) from None


def _initial_meta(meta: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        META.schema: SCHEMA_VERSION,
        META.tool: f"gpuherd {__version__}",
        META.host: socket.gethostname(),
        META.driver: None,
        META.started_at: time.time(),
        META.ended_at: None,
    }
    out.update(meta)
    problem = meta_problem(out)
    if problem:
        raise ValueError(f"bad session metadata: {problem}")
    return out


def _open_directory(directory: Path) -> Directory:
    """Create `directory` if needed and open it: every session file is written through it."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        return Directory(directory)
    except (FileExistsError, NotADirectoryError):
        if os.path.lexists(directory):
            raise SessionWriteError(
                f"cannot record into {directory}: it exists and is not a directory"
            ) from None
        raise SessionWriteError(
            f"cannot create {directory}: a parent of it is a file, not a directory"
        ) from None
    except OSError as error:
        raise SessionWriteError(f"cannot create {directory}: {_reason(error)}") from None


def _refuse_existing(directory: Directory, lock: SessionLock) -> None:
    for name in RECORDED_FILES:
        info = directory.lstat(name)
        if info is not None and info.st_size > 0:
            held = lock.held_message()
            if held is not None:
                raise SessionLockedError(held)
            raise SessionExistsError(
                f"{directory.path} already holds a recorded session ({name} exists); record "
                "into a new directory, or move that one away first"
            )


def _write_json_atomically(directory: Directory, data: Mapping[str, Any]) -> None:
    text = json.dumps(_json_safe(dict(data)), indent=2, default=str) + "\n"
    directory.write_atomic(META_FILE, text.encode("utf-8"))


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
