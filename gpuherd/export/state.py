"""What the exporter knows: the newest samples of every source, fed from any thread.

`ExportState.emit` is a sink of collector events like the dashboard's and the recorder's, and is
called on the collectors' threads; `snapshot` is called on a scrape's thread. One lock guards
the little state there is (the newest GPU tick per source, the newest host sample, the task
tracker); a scrape copies what it needs under it and builds the metrics outside it.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from collectors.base import CollectorEvent, Failed, Recovered, Sampled, Unavailable
from collectors.machine.containers import DockerCollector
from collectors.machine.writers import WritersTick
from collectors.samples import DiscoveredLogs, GpuSample, GpuTick, HostSample, LogBatch, ProcessInfo
from collectors.slurm.samples import SlurmTick
from gpuherd.tasks import TaskTracker, TaskView
from gpuherd.tasks.hints import TaskHint

PEAK_WINDOW_S = 15.0
"""The recent peak is the highest fast reading of the last 15 s of samples: Prometheus's
default scrape interval, so a spike between two scrapes still shows in the next one."""


@dataclass(frozen=True, slots=True)
class ExportSnapshot:
    """Everything one scrape shows, copied under the state's lock."""

    host: str
    gpus: tuple[GpuSample, ...] = ()
    """Every GPU of every GPU source, from each source's newest tick."""
    processes: Mapping[int, ProcessInfo] = field(default_factory=dict)
    """Host-side details (user, container) of GPU processes, by pid."""
    tasks: tuple[TaskView, ...] = ()
    peaks: Mapping[str, int] = field(default_factory=dict)
    """Recent peak memory per GPU UUID (only while a recording's fast sampler runs)."""
    failing: Mapping[str, str] = field(default_factory=dict)
    """Source name -> why it fails now."""
    slurm: SlurmTick | None = None
    """The newest Slurm tick, on a Slurm node: its jobs label the GPU and process series."""


class ExportState:
    """The exporter's sink: `emit` from collector threads, `snapshot` from a scrape."""

    def __init__(
        self, host: str, hints: Sequence[TaskHint] = (), peak_window_s: float = PEAK_WINDOW_S
    ) -> None:
        self.host = host
        self._hints = {hint.task_id: hint for hint in hints}
        self._peak_window_s = peak_window_s
        self._lock = threading.Lock()
        self._ticks: dict[str, GpuTick] = {}
        self._host: HostSample | None = None
        self._slurm: SlurmTick | None = None
        self._tracker = TaskTracker()
        self._task_of: dict[str, str] = {}
        self._failing: dict[str, str] = {}
        self._peaks: deque[tuple[float, Mapping[str, int]]] = deque()
        self._handlers: dict[type, Callable[[str, Any], None]] = {
            GpuTick: self._tick,
            HostSample: self._host_sample,
            LogBatch: self._batch,
            WritersTick: self._writers,
            DiscoveredLogs: self._discovered,
            SlurmTick: self._slurm_tick,
        }
        """How each sample type changes the state; other types are not exported."""

    def emit(self, event: CollectorEvent) -> None:
        """Take one collector event (thread-safe)."""
        with self._lock:
            if isinstance(event, Sampled):
                handler = self._handlers.get(type(event.sample))
                if handler is not None:
                    handler(event.source, event.sample)
            elif isinstance(event, Failed):
                self._failing[event.source] = event.error.msg
                task_id = self._task_of.get(event.source)
                if task_id is not None:
                    self._tracker.collector_failed(task_id, event.error.msg)
            elif isinstance(event, Unavailable) and not _containers(event):
                # a source that never started (NVML without a driver) fails for good; a host
                # without a container engine (or one this user may not use) has none to fail
                self._failing[event.source] = event.error.msg
            elif isinstance(event, Recovered):
                self._failing.pop(event.source, None)
                task_id = self._task_of.get(event.source)
                if task_id is not None and task_id in self._tracker.task_ids:
                    self._tracker.collector_recovered(task_id)

    def add_hints(self, hints: Sequence[TaskHint]) -> None:
        """More of what is known of tasks (a recorded command, once the dashboard has it)."""
        with self._lock:
            self._hints.update((hint.task_id, hint) for hint in hints)

    def add_peaks(self, tick: GpuTick, peaks: Mapping[str, int]) -> None:
        """The fast sampler's peak per GPU UUID for the row of `tick` (a recording's writer)."""
        with self._lock:
            self._peaks.append((tick.taken_at, dict(peaks)))
            while self._peaks and self._peaks[0][0] < tick.taken_at - self._peak_window_s:
                self._peaks.popleft()

    def snapshot(self) -> ExportSnapshot:
        """A consistent copy of what a scrape shows (task views are built here)."""
        with self._lock:
            gpus = tuple(d for tick in self._ticks.values() for d in tick.devices)
            host = self._host
            tasks = self._tracker.views()
            peaks: dict[str, int] = {}
            for _, row in self._peaks:
                for uuid, value in row.items():
                    peaks[uuid] = max(value, peaks.get(uuid, value))
            failing = dict(self._failing)
            slurm = self._slurm
        processes = {p.pid: p for p in host.processes} if host is not None else {}
        return ExportSnapshot(self.host, gpus, processes, tasks, peaks, failing, slurm)

    # The handlers below run under the lock.

    def _slurm_tick(self, source: str, tick: SlurmTick) -> None:
        self._slurm = tick

    def _tick(self, source: str, tick: GpuTick) -> None:
        self._ticks[source] = tick
        tracker = self._tracker
        if not tracker.task_ids:
            return
        tracker.associate_owned_pids(tick, self._hints.values())
        tracker.add_gpu_tick(tick)

    def _host_sample(self, source: str, sample: HostSample) -> None:
        self._host = sample

    def _batch(self, source: str, batch: LogBatch) -> None:
        tracker = self._tracker
        self._task_of[source] = batch.path
        new = batch.path not in tracker.task_ids
        tracker.add_batch(batch)
        hint = self._hints.get(batch.path)
        if new and hint is not None:  # as the dashboard's task feed does
            tracker.associate(batch.path, label=hint.label, gpu_uuids=hint.gpu_uuids or None)

    def _writers(self, source: str, found: WritersTick) -> None:
        self._tracker.add_writers(found)

    def _discovered(self, source: str, found: DiscoveredLogs) -> None:
        for task_id in found.removed:  # the run directory is gone: so is its task
            self._tracker.remove(task_id)
            self._task_of = {s: t for s, t in self._task_of.items() if t != task_id}


def _containers(event: Unavailable) -> bool:
    """Whether an unavailable source is the container engine's (optional on every host)."""
    return event.source == DockerCollector.name
