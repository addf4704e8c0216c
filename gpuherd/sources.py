"""The composition root: builds this machine's live sources and decides which log tails run.

The dashboard, the recorder, the queue runner and the exporter are sinks of the one source set
built here: the NVML collector, the host collector with its `PidWatch`, the container engine,
log discovery and one tail per log it finds. The rule "when discovery finds a log, start a
tail" lives in `TailSupervisor`, whichever sink runs the tails.
"""

from __future__ import annotations

import glob
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from collectors.base import Collector
from collectors.machine.containers import DockerCollector
from collectors.machine.host import HostCollector, PidWatch
from collectors.machine.nvml import NvmlBackend, NvmlCollector, NvmlMemoryProbe
from collectors.samples import LogBatch
from collectors.slurm.collector import SlurmCollector
from collectors.slurm.commands import slurm_missing

if TYPE_CHECKING:
    from collectors.logs.discovery import DiscoveredLog, DiscoveredLogs, LogDiscovery
    from collectors.logs.logtail import LogTailCollector
    from collectors.logs.logtail_waker import TailWaker
    from collectors.machine.writers import WriterWatch
    from collectors.trackers.collector import TrackerRunCollector

# The tail, its parsers and watchdog are imported when there are logs to follow: the
# dashboard's start-up (a first frame within a second) does not pay for them.

DISCOVERY_INTERVAL_S = 2.0
"""Seconds between two scans of the `--log` globs and `--watch` directories, for every sink.

A Lightning `version_N/metrics.csv` appears once the run is under way and a Hugging Face
`checkpoint-*/trainer_state.json` at the first save, so a slow scan shows a new run late on the
dashboard and loses its first lines in a short recording. A scan is cheap (a bounded walk), and
`DiscoveryCollector` stretches the interval by itself when a scan costs more than 1 % of a core,
so the shorter of the two intervals used before (2 s headless, 10 s on the dashboard) serves both.
"""
HEADLESS_POLL_S = 1.0
"""Headless tails read new lines this often instead of waking on every write."""

TailStarter = Callable[[Collector[LogBatch]], Any]
"""Runs one tail (on a thread of the sink); returns a handle for stopping it, or False when it
did not start (the sink is stopping)."""


@dataclass(frozen=True, slots=True)
class TailsChanged:
    """What one discovery scan changed in the set of followed logs."""

    taken_at: float
    started: tuple[DiscoveredLog, ...]
    """Logs followed from this scan on."""
    stopped: tuple[str, ...]
    """Task ids whose run disappeared and whose tail was stopped."""
    first_scan: bool
    """The first scan: what it found was there when the sources started."""


class TailSupervisor:
    """The one rule: a log that discovery finds gets a tail, once; a vanished run loses it.

    A sink attaches how it runs a tail (`attach`); `discovered` is called with every scan.
    Thread-safe: the lock guards only the followed set, and tails are made and started
    outside it, because starting one may call back into watchdog or the sink.
    """

    def __init__(self, make_tail: Callable[[str], Collector[LogBatch]] | None = None) -> None:
        self.make_tail = make_tail
        self._start: TailStarter | None = None
        self._stop: Callable[[Any], None] | None = None
        self._handles: dict[str, Any] = {}
        self._followed: set[str] = set()
        self._scanned = False
        self._lock = threading.Lock()

    def attach(self, start: TailStarter, stop: Callable[[Any], None] | None = None) -> None:
        """Run tails with `start`; with `stop`, tails of runs that disappear are stopped."""
        self._start, self._stop = start, stop

    @property
    def followed(self) -> frozenset[str]:
        """Task ids that have a tail (or were adopted)."""
        with self._lock:
            return frozenset(self._followed)

    def is_followed(self, task_id: str) -> bool:
        """Whether `task_id` has a tail (or was adopted)."""
        with self._lock:
            return task_id in self._followed

    def adopt(self, task_id: str) -> None:
        """A tail for `task_id` runs already (started with the sink): never start another."""
        with self._lock:
            self._followed.add(task_id)

    def claim(self, task_id: str) -> bool:
        """Mark `task_id` followed; whether it was new (then the caller runs its tail)."""
        with self._lock:
            if task_id in self._followed:
                return False
            self._followed.add(task_id)
            return True

    def follow(self, task_id: str) -> Collector[LogBatch] | None:
        """Start a tail for `task_id` unless one was started before; the tail that started."""
        if not self.claim(task_id) or self.make_tail is None or self._start is None:
            return None
        tail = self.make_tail(task_id)
        handle = self._start(tail)
        if handle is False:
            return None
        with self._lock:
            self._handles[task_id] = handle
        return tail

    def discovered(self, found: DiscoveredLogs) -> TailsChanged:
        """Follow every log of a scan not followed yet; stop the tails of vanished runs."""
        started = tuple(
            log
            for log in found.logs
            if (
                self.follow(log.task_id) is not None
                if self._start is not None
                else self.claim(log.task_id)
            )
        )
        stopped = tuple(task_id for task_id in found.removed if self._unfollow(task_id))
        with self._lock:
            first, self._scanned = not self._scanned, True
        return TailsChanged(found.taken_at, started, stopped, first)

    def _unfollow(self, task_id: str) -> bool:
        if self._stop is None:
            return False  # this sink keeps what it followed (a recording keeps reading)
        with self._lock:
            self._followed.discard(task_id)
            handle = self._handles.pop(task_id, None)
        if handle is not None:
            self._stop(handle)  # also ends the wait of a tail for its file
        return True


@dataclass
class SourceOptions:
    """What to build the live sources from (the command line's interval, logs and watches)."""

    interval_s: float = 1.0
    """Seconds between full GPU and host samples."""
    logs: Sequence[str] = ()
    """`--log` paths and globs."""
    watch: Sequence[str] = ()
    """`--watch` directories."""
    exclude: Sequence[str] = ()
    """Directories never scanned (a recording's own session directory)."""
    discovery_interval_s: float = DISCOVERY_INTERVAL_S
    headless: bool = False
    """Tails poll every `HEADLESS_POLL_S` and wake only on rotations, not on every write."""
    nvml_backend: NvmlBackend | None = None
    """NVML seam for tests; `None` is the real driver."""
    containers: bool = True
    """Read the container engine (Docker, or podman through `DOCKER_HOST`). Without a socket
    its collector is unavailable at once and costs nothing more."""
    slurm: bool = True
    """Read Slurm where this machine is a Slurm node; elsewhere one PATH lookup decides that."""


@dataclass
class LiveSources:
    """This machine's sources, built once from `SourceOptions`; sinks run and subscribe."""

    options: SourceOptions
    pid_watch: PidWatch = field(default_factory=PidWatch)
    tails: TailSupervisor = field(default_factory=TailSupervisor)
    writers: WriterWatch | None = field(default=None, init=False)
    """What the writer collector looks for (which process writes each followed log); made
    with the log collectors."""
    _waker: TailWaker | None = field(default=None, init=False)
    _discovery: LogDiscovery | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def __post_init__(self) -> None:
        self.tails.make_tail = self.tail

    def machine(self) -> list[Collector[Any]]:
        """The NVML, host and container collectors."""
        o = self.options
        collectors: list[Collector[Any]] = [
            self.gpus(),
            HostCollector(self.pid_watch, o.interval_s),
        ]
        if o.containers:
            collectors.append(DockerCollector(o.interval_s))
        if o.slurm and slurm_missing() is None:
            collectors.append(SlurmCollector(self.pid_watch, o.interval_s))
        return collectors

    def collectors(self) -> list[Collector[Any]]:
        """Every source of the set: the machine's, and with logs to follow the log sources.

        A sink runs them all through `gpuherd.engine.running.RunningSet`; a source added here
        reaches every sink that runs this list.
        """
        return [*self.machine(), *(self.log_collectors() if self.has_logs else [])]

    def log_collectors(self) -> list[Collector[Any]]:
        """Discovery (its scans start the tails) and the writer collector beside it.

        The writer collector finds which process writes each followed log; the running set
        tells its `writers` which files are followed and which pids hold a GPU.
        """
        from collectors.machine.writers import WriterCollector, WriterWatch

        if self.writers is None:
            self.writers = WriterWatch()
        return [self.discovery_collector(), WriterCollector(self.writers)]

    def gpus(self) -> NvmlCollector:
        """The NVML collector."""
        return NvmlCollector(self.options.nvml_backend, self.options.interval_s)

    @property
    def has_logs(self) -> bool:
        """Whether any `--log` or `--watch` was given."""
        return bool(self.options.logs or self.options.watch)

    def rescans(self) -> bool:
        """Whether a log can appear later: a `--log` glob or a `--watch` directory."""
        o = self.options
        return bool(o.watch or any(glob.has_magic(p) for p in o.logs))

    @property
    def discovery(self) -> LogDiscovery:
        """The scanner of `--log` globs and `--watch` directories."""
        if self._discovery is None:
            from collectors.logs.discovery import LogDiscovery

            o = self.options
            self._discovery = LogDiscovery(
                o.logs, o.watch, exclude=[os.path.abspath(d) for d in o.exclude]
            )
        return self._discovery

    def discovery_collector(self) -> Collector[DiscoveredLogs]:
        """The collector that scans every `discovery_interval_s` (its scans feed `tails`)."""
        from collectors.logs.discovery import DiscoveryCollector

        return DiscoveryCollector(self.discovery, self.options.discovery_interval_s)

    def tail(self, path: str) -> LogTailCollector | TrackerRunCollector:
        """A new tail of `path`, woken by the one shared waker.

        A tracker's run is read by its own collector (`collectors.trackers`), every second.
        """
        from collectors.logs.logtail import LogTailCollector
        from collectors.logs.logtail_waker import TailWaker
        from collectors.trackers.collector import TrackerRunCollector, is_tracker_run

        if is_tracker_run(path):
            return TrackerRunCollector(path)

        with self._lock:
            if self._waker is None:
                # Headless, new lines read once a second are soon enough, and waking on every
                # write would cost 1 to 3 % of a core in watchdog alone: the tails poll. They
                # are still woken by rotations (a file created, moved or closed after writing,
                # as copytruncate does), so fast rotation loses no line.
                self._waker = TailWaker(every_write=not self.options.headless)
            waker = self._waker
        if self.options.headless:
            return LogTailCollector(path, waker=waker, poll_interval_s=HEADLESS_POLL_S)
        return LogTailCollector(path, waker=waker)

    def close(self) -> None:
        """Stop the waker's observer thread (after every tail has stopped)."""
        with self._lock:
            waker, self._waker = self._waker, None
        if waker is not None:
            waker.close()


def live_sources(options: SourceOptions) -> LiveSources:
    """This machine's sources, built from `options`: the one place they are built."""
    return LiveSources(options)


def gpu_source(interval_s: float = 1.0, nvml_backend: NvmlBackend | None = None) -> NvmlCollector:
    """The GPUs alone, for a sink that needs no host figures or logs (the queue runner)."""
    return live_sources(SourceOptions(interval_s=interval_s, nvml_backend=nvml_backend)).gpus()


def peak_probe(interval_s: float, nvml_backend: NvmlBackend | None = None) -> NvmlMemoryProbe:
    """The fast memory-only GPU probe that runs beside the GPU source while recording.

    Its readings feed the recording's `PeakTracker` directly (`gpuherd.record.peaks`), not
    the sinks: fifty events a second would cost every sink for a figure only the recording
    keeps.
    """
    return NvmlMemoryProbe(nvml_backend, interval_s)


@dataclass
class LogSources:
    """The dashboard's log sources: discovery, a maker of tails and the supervisor."""

    sources: LiveSources
    collectors: list[Collector[Any]]

    @property
    def tails(self) -> TailSupervisor:
        """Decides which tails run."""
        return self.sources.tails

    @property
    def writers(self) -> WriterWatch | None:
        """What the writer collector looks for."""
        return self.sources.writers

    def tail(self, path: str) -> Collector[LogBatch]:
        """A new tail of `path` (for a log the sink follows from the start)."""
        return self.sources.tail(path)

    def close(self) -> None:
        """Stop the waker's observer thread (after the dashboard has exited)."""
        self.sources.close()


def log_sources(
    logs: Sequence[str],
    watch: Sequence[str],
    *,
    exclude: Sequence[str] = (),
    interval_s: float = DISCOVERY_INTERVAL_S,
) -> LogSources:
    """Follow `--log` paths and globs and the run files under `--watch` directories.

    `exclude` names directories never scanned (a recording's own session directory, whose
    `command.log` is followed as the `command` task already). Beside discovery runs the
    collector that finds which process writes each followed log (`collectors.machine.writers`); the
    running set tells its watch which files are followed and which pids hold a GPU.
    """
    sources = live_sources(
        SourceOptions(logs=logs, watch=watch, exclude=exclude, discovery_interval_s=interval_s)
    )
    return LogSources(sources, sources.log_collectors())
