"""Which process writes each followed log: `/proc/PID/fd` of the GPU processes and their parents.

A log is tied to a process when that process holds the file open for writing (its
`/proc/PID/fdinfo/FD` flags say write-only or read-write). Only the GPU processes the driver
lists and their ancestors are looked at, never every process on the host: a launcher (a shell
redirect, `torchrun`, gpuherd's own supervisor) often holds the log while its child holds the
GPU. Other users' `/proc` entries are unreadable without privileges; they are skipped.

A log that is opened and closed at each write is rarely caught open; the collector then looks
for the job that runs where it is written (`collectors.machine.writers_by_cwd`); a W&B run log,
written by a child of the training, is looked for in the GPU processes' children
(`collectors.machine.writers_by_child`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from collectors.machine.process_alive import proc_stat
from collectors.machine.writers_by_child import writers_by_child
from collectors.machine.writers_by_cwd import job_by_cwd
from parsers.format_sets import REOPENED_FORMATS

PROC = "/proc"
MAX_DEPTH = 16
"""Parents walked up from a GPU process (pid 1 stops the walk earlier)."""
SCAN_EVERY_S = 5.0
"""Seconds between two full scans of the candidates' open files; in between, only whether the
known writers still live is checked (one `stat` each)."""
LIVENESS_EVERY_S = 1.0
"""How often the collector samples: a writer that exits shows within about this long."""
_WRITE_MODES = (os.O_WRONLY, os.O_RDWR)
_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True, slots=True)
class ProcId:
    """A process identified across pid reuse: its pid and its start time (clock ticks)."""

    pid: int
    start_ticks: int


@dataclass(frozen=True, slots=True)
class LogWriters:
    """The processes behind one followed log."""

    task_id: str
    writer_pids: tuple[int, ...]
    """Live processes that hold the log open for writing (or held it at the last scan that
    found it held); empty once every writer seen has exited."""
    gpu_pids: tuple[int, ...]
    """GPU processes among the writers or descending from one (the processes the task runs)."""


@dataclass(frozen=True, slots=True)
class WritersTick:
    """One look at who writes the followed logs; tasks never seen written are left out."""

    taken_at: float
    logs: tuple[LogWriters, ...]
    full_scan: bool = False
    """Whether this look read the candidates' open files (else it only checked liveness)."""


def proc_id(pid: int, proc: str = PROC) -> ProcId | None:
    """`pid` with its start time; `None` when it is gone, a zombie or unreadable."""
    found = proc_stat(pid, proc)
    return None if found is None or found[2] else ProcId(pid, found[1])


def started_at(pid: int, proc: str = PROC) -> float | None:
    """When `pid` started, in Unix seconds to a clock tick; `None` when gone or a zombie.

    From its start in ticks after boot and `/proc/uptime`, not the boot time of `/proc/stat`,
    which counts whole seconds.
    """
    found = proc_id(pid, proc)
    if found is None:
        return None
    try:
        with open(f"{proc}/uptime", "rb") as f:
            uptime = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return time.time() - uptime + found.start_ticks / _TICKS_PER_S


def ancestors(
    pid: int,
    proc: str = PROC,
    max_depth: int = MAX_DEPTH,
    parents: dict[int, int | None] | None = None,
) -> list[int]:
    """`pid` and its parents up to (not including) pid 1, nearest first.

    `parents` (pid -> parent pid) is filled in as a cache shared by the walks of one scan:
    GPU processes of one job share their launcher, and its chain is read once.
    """
    parents = {} if parents is None else parents
    chain = [pid]
    for _ in range(max_depth):
        here = chain[-1]
        if here not in parents:
            found = proc_stat(here, proc)
            parents[here] = None if found is None else found[0]
        parent = parents[here]
        if parent is None or parent <= 1 or parent in chain:
            break
        chain.append(parent)
    return chain


def written_files(pid: int, proc: str = PROC, among: Collection[str] | None = None) -> set[str]:
    """Paths `pid` holds open for writing (write-only or read-write); empty when unreadable.

    With `among`, only those paths are looked at (their fd flags read), which spares a read
    of `fdinfo` for every socket, pipe and library a training process holds.
    """
    fd_dir = f"{proc}/{pid}/fd"
    try:
        fds = os.listdir(fd_dir)
    except OSError:
        return set()  # gone, or another user's process: normal, skip it
    found = set()
    for fd in fds:
        try:
            target = os.readlink(f"{fd_dir}/{fd}")
        except OSError:
            continue
        if not target.startswith("/") or (among is not None and target not in among):
            continue
        if not _writes(pid, fd, proc):
            continue
        found.add(target)
    return found


def _writes(pid: int, fd: str, proc: str) -> bool:
    try:
        with open(f"{proc}/{pid}/fdinfo/{fd}", "rb") as f:
            for line in f:
                if line.startswith(b"flags:"):
                    return int(line.split()[1], 8) & os.O_ACCMODE in _WRITE_MODES
    except (OSError, ValueError, IndexError):
        return False
    return False


def gpu_chains(gpu_pids: Iterable[int], proc: str = PROC) -> dict[int, list[int]]:
    """Each GPU pid's chain of ancestors, itself first (see `ancestors`)."""
    parents: dict[int, int | None] = {}
    return {pid: ancestors(pid, proc, parents=parents) for pid in set(gpu_pids)}


def scan(
    files: Mapping[str, str],
    gpu_pids: Iterable[int],
    proc: str = PROC,
    chains: Mapping[int, list[int]] | None = None,
) -> dict[str, LogWriters]:
    """Who holds each log open for writing: `files` maps task id to the real path of its file.

    Candidates are the GPU processes and their ancestors (`chains`, when the caller has walked
    them already). A task's GPU processes are the GPU processes that write the log themselves
    or descend from a process that does.
    """
    by_path: dict[str, list[str]] = {}
    for task_id, path in files.items():
        by_path.setdefault(path, []).append(task_id)
    if not by_path:
        return {}
    if chains is None:
        chains = gpu_chains(gpu_pids, proc)
    candidates = sorted({pid for chain in chains.values() for pid in chain})
    writers: dict[str, list[int]] = {}
    for pid in candidates:
        for path in written_files(pid, proc, by_path.keys()):
            for task_id in by_path[path]:
                writers.setdefault(task_id, []).append(pid)
    for task_id, pids in writers_by_child(by_path, chains, proc, candidates, written_files).items():
        writers.setdefault(task_id, []).extend(pids)  # `wandb-core`'s parent, the training
    found = {}
    for task_id, pids in writers.items():
        found[task_id] = _log_writers(task_id, set(pids), chains)
    return found


def _log_writers(task_id: str, holders: set[int], chains: Mapping[int, list[int]]) -> LogWriters:
    gpus = tuple(sorted(g for g, chain in chains.items() if holders.intersection(chain)))
    return LogWriters(task_id, tuple(sorted(holders)), gpus)


class WriterWatch:
    """What to look for: the followed files and the GPU pids; set on one thread, read on another.

    The dashboard sets it from its UI thread; the collector reads a copy on its own. Values are
    replaced whole under the lock, never mutated after.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._files: dict[str, str] = {}
        self._reopened: frozenset[str] = frozenset()
        self._gpu_pids: frozenset[int] = frozenset()
        self.changed = threading.Event()
        """Set when a file or GPU pid was added: the collector scans at its next sample."""

    def follow(self, task_id: str, path: str, log_format: str | None = None) -> None:
        """Look for the writer of `path` (the file task `task_id` reads).

        A log in one of `REOPENED_FORMATS` (a `metrics.csv`, a `trainer_state.json`) may also
        be tied to its writer by working directory (`collectors.machine.writers_by_cwd`).
        """
        real = os.path.realpath(path)
        reopened = log_format in REOPENED_FORMATS
        with self._lock:
            if reopened != (task_id in self._reopened):
                self._reopened = (
                    self._reopened | {task_id} if reopened else self._reopened - {task_id}
                )
            if self._files.get(task_id) == real:
                return
            self._files = {**self._files, task_id: real}
        self.changed.set()

    def forget(self, task_id: str) -> None:
        """Stop looking for the writer of this task's file."""
        with self._lock:
            self._files = {k: v for k, v in self._files.items() if k != task_id}
            self._reopened = self._reopened - {task_id}

    def set_gpu_pids(self, pids: Iterable[int]) -> None:
        """The pids the driver lists on any GPU now."""
        new = frozenset(pids)
        with self._lock:
            added = not new <= self._gpu_pids
            self._gpu_pids = new
        if added:
            self.changed.set()

    def get(self) -> tuple[dict[str, str], frozenset[int]]:
        """The followed files (task id -> real path) and the GPU pids, as they are now."""
        with self._lock:
            return self._files, self._gpu_pids

    def reopened(self) -> frozenset[str]:
        """The tasks whose log is in one of `REOPENED_FORMATS`."""
        return self._reopened  # replaced whole, never changed in place


class WriterCollector:
    """Samples `WritersTick`: a full scan every `scan_every_s`, liveness checks in between.

    A writer found once stays the task's writer while it lives, even if it closes the file for
    a while; a later scan that finds other writers replaces it. A task whose writers have all
    exited is reported with no writer pids, so its status can turn `finished`.
    """

    role = "writers"

    def __init__(
        self,
        watch: WriterWatch,
        interval_s: float = LIVENESS_EVERY_S,
        scan_every_s: float = SCAN_EVERY_S,
        proc: str = PROC,
    ) -> None:
        self.watch = watch
        self.name = "writers"
        self.interval_s = interval_s
        self.scan_every_s = scan_every_s
        self.proc = proc
        self._known: dict[str, tuple[tuple[ProcId, ...], tuple[int, ...]]] = {}
        self._scanned_at: float | None = None
        self._written: dict[str, float] = {}
        """Each followed file's modification time at the last full scan."""

    def open(self) -> None:
        """Nothing to acquire: `/proc` is read at each sample."""

    def close(self) -> None:
        """Nothing to release."""

    def sample(self) -> WritersTick:
        """One look; blocking (reads `/proc`)."""
        now = time.monotonic()
        changed = self.watch.changed.is_set()
        if changed:
            # Cleared before reading the watch: a file added meanwhile sets it again.
            self.watch.changed.clear()
        files, gpu_pids = self.watch.get()
        full = changed or self._scanned_at is None or now - self._scanned_at >= self.scan_every_s
        if full:
            self._scanned_at = now
            chains = gpu_chains(gpu_pids, self.proc)
            held = scan(files, gpu_pids, self.proc, chains)
            for task_id, found in {**held, **self._by_cwd(files, held, chains)}.items():
                ids = tuple(p for p in map(self._id, found.writer_pids) if p is not None)
                self._known[task_id] = (ids, found.gpu_pids)
        logs = []
        for task_id in [t for t in self._known if t not in files]:
            del self._known[task_id]
        for task_id, (ids, gpus) in self._known.items():
            alive = tuple(p for p in ids if self._id(p.pid) == p)
            if not alive:
                gpus = ()
            self._known[task_id] = (alive, gpus)
            logs.append(
                LogWriters(
                    task_id, tuple(p.pid for p in alive), tuple(g for g in gpus if g in gpu_pids)
                )
            )
        return WritersTick(time.time(), tuple(logs), full)

    def _by_cwd(
        self,
        files: Mapping[str, str],
        held: Mapping[str, LogWriters],
        chains: Mapping[int, list[int]],
    ) -> dict[str, LogWriters]:
        """Writers found by working directory (`collectors.machine.writers_by_cwd`).

        Only for the logs in `REOPENED_FORMATS` written since the last full scan that no process
        holds open and no writer known alive wrote.
        """
        written: dict[str, float] = {}
        found: dict[str, LogWriters] = {}
        cwds: dict[int, str | None] = {}
        reopened = self.watch.reopened()
        for task_id, path in files.items():
            if task_id not in reopened:
                continue  # a console log: its writer holds it open, or is not ours to see
            try:
                written[path] = modified = os.stat(path).st_mtime
            except OSError:
                continue  # not there (yet): nothing was written
            before = self._written.get(path)
            if (
                before is None
                or modified <= before
                or task_id in held
                or self._known.get(task_id, ((), ()))[0]
            ):
                continue
            root = job_by_cwd(path, chains, self.proc, cwds)
            if root is None:
                continue
            start = started_at(root, self.proc)
            if start is not None and start <= modified:
                found[task_id] = _log_writers(task_id, {root}, chains)
        self._written = written
        return found

    def _id(self, pid: int) -> ProcId | None:
        return proc_id(pid, self.proc)
