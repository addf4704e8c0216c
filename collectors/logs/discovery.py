"""Find the training logs to follow: `--log` paths and globs, and run files under `--watch`."""

from __future__ import annotations

import fnmatch
import glob
import os
import time
from collections.abc import Callable, Iterator, Sequence

from collectors.samples import DiscoveredLog, DiscoveredLogs
from collectors.trackers.discovery import SKIP, TRACKER, TrackerRuns, tracker_file

IGNORED_DIRS = frozenset({"node_modules", "__pycache__", "site-packages", "venv", "env"})
"""Directories never entered (besides every hidden one: `.git`, `.venv`, `.cache`, ...)."""
IGNORED_FILES = frozenset({"debug.log", "debug-internal.log"})
"""Log-named files that are not training output (wandb's own logs)."""
RUN_FILES = (
    ("lightning_csv", "*/version_*/metrics.csv"),
    ("trainer_state", "*/trainer_state.json"),
    ("mmengine_json", "*/vis_data/scalars.json"),
    ("jsonl", "*.jsonl"),
    ("log", "*.log"),
)
"""(kind, pattern on the `/`-joined path) of the files `--watch` follows, first match wins."""


class LogDiscovery:
    """Expands `--log` arguments and walks `--watch` directories, again on every `scan()`.

    A `--log` path that does not exist yet is returned as it is (its tail waits for it); a
    `--log` glob is kept and expanded again on every scan, so files that match later are found.
    Under `--watch`, the walk is bounded in depth and in entries, skips hidden and dependency
    directories and does not follow directory symlinks.
    """

    def __init__(
        self,
        logs: Sequence[str] = (),
        watch: Sequence[str] = (),
        *,
        max_depth: int = 5,
        max_entries: int = 50_000,
        max_age_s: float | None = None,
        exclude: Sequence[str] = (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.logs = [os.path.abspath(os.path.expanduser(p)) for p in logs]
        self.watch = [os.path.abspath(os.path.expanduser(d)) for d in watch]
        self.exclude = frozenset(os.path.abspath(os.path.expanduser(d)) for d in exclude)
        """Directories whose files are never found by a glob or a walk (a recording's own
        session directory: following its `events.jsonl` would feed the recording itself)."""
        self.max_depth = max_depth
        self.max_entries = max_entries
        self.max_age_s = max_age_s
        self._clock = clock
        self.incomplete = False
        """Whether the last scan stopped at `max_entries`."""

    def scan(self) -> tuple[DiscoveredLog, ...]:
        """Every task now: `--log` ones first, then discovered ones, each once, in stable order."""
        found: dict[str, DiscoveredLog] = {}
        for given in self.logs:
            for path in self._expand(given):
                found.setdefault(path, DiscoveredLog(path, "given", given))
        self.incomplete = False
        for root in self.watch:
            for log in sorted(self._walk(root), key=lambda item: item.task_id):
                found.setdefault(log.task_id, log)
        return tuple(found.values())

    def _expand(self, given: str) -> list[str]:
        if not glob.has_magic(given):
            return [given]
        return sorted(
            p
            for p in glob.glob(given, recursive=True)
            if os.path.isfile(p) and not self._excluded(p)
        )

    def _excluded(self, path: str) -> bool:
        return any(path.startswith(d + os.sep) for d in self.exclude)

    def _walk(self, root: str) -> Iterator[DiscoveredLog]:
        checkpoints: set[str] = set()
        trackers = TrackerRuns()  # a TensorBoard, MLflow or W&B run: one task per run
        for path, kind in self._files(root):
            if kind == TRACKER:
                for task_id, store in trackers.runs(path):
                    yield DiscoveredLog(task_id, store, root)
                continue
            parent = os.path.dirname(path)
            if kind == "trainer_state" and fnmatch.fnmatch(
                os.path.basename(parent), "checkpoint-*"
            ):
                output_dir = os.path.dirname(parent)
                if output_dir not in checkpoints:
                    checkpoints.add(output_dir)
                    pattern = os.path.join(output_dir, "checkpoint-*", "trainer_state.json")
                    yield DiscoveredLog(pattern, kind, root)
                continue
            yield DiscoveredLog(path, kind, root)

    def _files(self, root: str) -> Iterator[tuple[str, str]]:
        """(path, kind) of run files under `root`, breadth first."""
        now = self._clock()
        seen = 0
        level = [root]
        for _depth in range(self.max_depth + 1):
            deeper: list[str] = []
            for directory in level:
                try:
                    entries = list(os.scandir(directory))
                except OSError:
                    continue  # vanished or unreadable: skipped until a later scan
                for entry in entries:
                    seen += 1
                    if seen > self.max_entries:
                        self.incomplete = True
                        return
                    found = self._classify(entry, now)
                    if found == "dir":
                        deeper.append(entry.path)
                    elif found is not None:
                        yield entry.path, found
            level = deeper

    def _classify(self, entry: os.DirEntry[str], now: float) -> str | None:
        name = entry.name
        try:
            if entry.is_dir(follow_symlinks=False):
                skip = name.startswith(".") or name in IGNORED_DIRS or entry.path in self.exclude
                return None if skip else "dir"
            if not entry.is_file() or name in IGNORED_FILES or name.startswith("."):
                return None
            kind = tracker_file(entry.path) or run_file_kind(entry.path)
            if kind == SKIP:
                return None
            if kind is not None and self.max_age_s is not None:
                if now - entry.stat().st_mtime > self.max_age_s:
                    return None
        except OSError:
            return None
        return kind


def run_file_kind(path: str) -> str | None:
    """The kind of training-run file `path` is (see `RUN_FILES`), or `None`."""
    unixy = "/" + path.replace(os.sep, "/").lstrip("/")
    for kind, pattern in RUN_FILES:
        if fnmatch.fnmatchcase(unixy, pattern):
            return kind
    return None


class DiscoveryCollector:
    """Runs a `LogDiscovery` every `interval_s` in the collector loop; samples `DiscoveredLogs`.

    The owner starts a `LogTailCollector` for each id in `added`. A scan that takes long (a
    `--watch` tree near the entry limit) stretches the interval so that scanning stays under
    `max_busy` of one core. The scan is timed in CPU time of the collector thread, not wall
    time: a scan that merely waited for the GIL or the scheduler on a busy machine did no
    work and must not stretch the interval.
    """

    def __init__(
        self,
        discovery: LogDiscovery,
        interval_s: float = 10.0,
        clock: Callable[[], float] = time.time,
        *,
        max_busy: float = 0.01,
        timer: Callable[[], float] = time.thread_time,
    ) -> None:
        self.name = "discovery"
        self.role = "discovery"  # `collectors.roles.DISCOVERY`; that module imports this one
        self.interval_s = interval_s
        self.base_interval_s = interval_s
        self.max_busy = max_busy
        self._discovery = discovery
        self._clock = clock
        self._timer = timer
        self._previous: dict[str, DiscoveredLog] = {}

    def open(self) -> None:
        """Nothing to acquire."""

    def sample(self) -> DiscoveredLogs:
        """Scan once and say what is new and what is gone."""
        began = self._timer()
        logs = self._discovery.scan()
        elapsed_s = self._timer() - began
        self.interval_s = max(self.base_interval_s, elapsed_s / self.max_busy)
        current = {log.task_id: log for log in logs}
        added = tuple(log for tid, log in current.items() if tid not in self._previous)
        removed = tuple(tid for tid in self._previous if tid not in current)
        self._previous = current
        return DiscoveredLogs(self._clock(), logs, added, removed, self._discovery.incomplete)

    def close(self) -> None:
        """Nothing to release."""
