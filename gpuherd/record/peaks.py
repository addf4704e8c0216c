"""Fast memory-only peak capture and the per-run attribution of peak GPU memory."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from collectors.base import Collector, CollectorEvent, Crashed, Sampled, Unavailable
from collectors.samples import GpuSample, GpuTick
from gpuherd.engine.threads import CollectorThread, SourceThreads
from gpuherd.proc.tree import ProcessTree

TRACE_READINGS = 1_000_000
"""Readings a trace keeps (about 5.5 hours at 50 Hz)."""
DEFAULT_PEAK_INTERVAL_S = 0.02
"""50 Hz: a 50 ms allocation spike is seen by at least two readings."""

PER_PROCESS = "per-process"
"""Attribution from the driver's per-process memory of the recorded command's processes."""
BASELINE = "device peak minus baseline"
"""Attribution when the driver does not show the command's processes: device memory minus what
was in use when the command started."""


@dataclass(frozen=True, slots=True)
class RunPeak:
    """The recorded command's highest GPU memory on one GPU."""

    index: int
    uuid: str | None
    peak_bytes: int
    """Highest memory attributed to the command."""
    at: float | None
    """Unix seconds of the reading that gave the peak."""
    method: str
    """`PER_PROCESS` or `BASELINE`."""
    baseline_bytes: int | None
    """Memory in use on the GPU when the command started (other users and the driver)."""

    def as_dict(self) -> dict[str, object]:
        """JSON-ready form, as stored in `meta.json` under `run_peaks`."""
        return {
            "gpu": self.index,
            "uuid": self.uuid,
            "peak_bytes": self.peak_bytes,
            "at": self.at,
            "method": self.method,
            "baseline_bytes": self.baseline_bytes,
        }


@dataclass
class _Gpu:
    """Mutable per-GPU state of a `PeakTracker`; touched only under its lock."""

    peak: int | None = None
    others: int | None = None
    own_seen: bool = False
    run_peak: int | None = None
    run_peak_at: float | None = None
    baseline: int | None = None
    last: int | None = None
    last_at: float | None = None


class PeakTracker:
    """Keeps the highest memory seen per GPU between two full rows, and the run's own peak.

    Two threads feed it: the fast memory probe (`observe`, tens of Hz) and the 1 Hz recorder
    (`take`, once per `gpu.csv` row). A lock guards the few integers they share; the fast path
    holds it for a handful of comparisons.

    Attribution: once `start_run` is called, every fast reading minus what other processes hold
    is a candidate for the command's peak. "What others hold" starts as the memory in use at
    `start_run` (the baseline) and, on each full tick where the driver reports the command's
    processes with their memory, becomes the device's memory minus theirs. The result is labelled
    `PER_PROCESS` on GPUs where the command's processes were seen, `BASELINE` when the driver never
    showed them (another PID namespace, no permission).
    """

    def __init__(self, clock: Callable[[], float] = time.time, trace: bool = False) -> None:
        self._clock = clock
        self.trace: deque[tuple[float, tuple[int | None, ...]]] | None = (
            deque(maxlen=TRACE_READINGS) if trace else None
        )
        """With `trace`, the latest fast readings with their time (for benchmarks)."""
        self._lock = threading.Lock()
        self._gpus: dict[int, _Gpu] = {}
        self._uuids: dict[int, str] = {}
        self._tree: ProcessTree | None = None
        self._last_tick: GpuTick | None = None
        self.readings = 0
        """Fast readings observed so far (for the benchmark and for tests)."""

    def observe(self, used_by_index: Sequence[int | None], taken_at: float | None = None) -> None:
        """Take one fast reading: used bytes per GPU in index order (`None` = no reading)."""
        t = self._clock() if taken_at is None else taken_at
        with self._lock:
            self.readings += 1
            if self.trace is not None:
                self.trace.append((t, tuple(used_by_index)))
            for index, used in enumerate(used_by_index):
                if used is not None:
                    self._seen(index, used, t)

    def take(self, tick: GpuTick) -> dict[str, int]:
        """The peak per GPU UUID since the previous call, this tick's readings included.

        Resets the peaks, so each `gpu.csv` row carries the highest value seen since the row
        before it. A GPU with no reading at all is left out (its cell stays empty).
        """
        out: dict[str, int] = {}
        own = self._own_memory(tick)
        with self._lock:
            self._last_tick = tick
            for device in tick.devices:
                self._uuids[device.index] = device.uuid
                if device.memory_used_bytes is not None:
                    self._seen(device.index, device.memory_used_bytes, tick.taken_at)
                gpu = self._gpus.get(device.index)
                if gpu is None or gpu.peak is None:
                    continue
                out[device.uuid] = gpu.peak
                gpu.peak = None
            for index, (used, own_bytes) in own.items():
                gpu = self._gpus.setdefault(index, _Gpu())
                gpu.own_seen = True
                gpu.others = max(0, used - own_bytes)
                self._raise_run_peak(gpu, own_bytes, tick.taken_at)
        return out

    def final_tick(self) -> GpuTick | None:
        """A memory-only tick carrying the fast readings taken since the last row, if any.

        At the end of a recording the last full row may be most of a second old; a spike after
        it would be lost. This tick has each GPU's latest fast reading as its memory used (a real
        reading) and nothing else, so writing it with `take` keeps the pending peaks.
        """
        with self._lock:
            last = self._last_tick
            pending = {i: g for i, g in self._gpus.items() if g.peak is not None}
            if last is None or not pending:
                return None
            devices = tuple(
                GpuSample(
                    d.index,
                    d.uuid,
                    d.name,
                    memory_total_bytes=d.memory_total_bytes,
                    memory_used_bytes=pending[d.index].last,
                )
                for d in last.devices
                if d.index in pending
            )
            taken_at = max(g.last_at or last.taken_at for g in pending.values())
        # Rows with the same `t` form one tick: never reuse the last row's time.
        taken_at = taken_at if taken_at > last.taken_at else last.taken_at + 0.001
        return GpuTick(
            taken_at, devices, last.driver_version, last.nvml_version, last.cuda_driver_version
        )

    def start_run(self, root_pid: int, tree: ProcessTree | None = None) -> None:
        """The recorded command started as `root_pid`: fix the baseline and begin attribution."""
        with self._lock:
            self._tree = tree if tree is not None else ProcessTree(root_pid)
            for gpu in self._gpus.values():
                gpu.baseline = gpu.last
                gpu.others = gpu.last

    def run_peaks(self) -> tuple[RunPeak, ...]:
        """The command's peak per GPU, in index order; empty before `start_run`.

        With per-process data, GPUs where the command never appeared are left out.
        """
        with self._lock:
            if self._tree is None:
                return ()
            per_process = any(g.own_seen for g in self._gpus.values())
            peaks = []
            for index in sorted(self._gpus):
                gpu = self._gpus[index]
                if gpu.run_peak is None or (per_process and not gpu.own_seen):
                    continue
                method = PER_PROCESS if per_process else BASELINE
                peaks.append(
                    RunPeak(
                        index,
                        self._uuids.get(index),
                        gpu.run_peak,
                        gpu.run_peak_at,
                        method,
                        gpu.baseline,
                    )
                )
            return tuple(peaks)

    def _seen(self, index: int, used: int, t: float) -> None:
        gpu = self._gpus.get(index)
        if gpu is None:
            gpu = self._gpus[index] = _Gpu()
        gpu.last, gpu.last_at = used, t
        if gpu.peak is None or used > gpu.peak:
            gpu.peak = used
        if self._tree is None:
            return
        if gpu.others is None:
            # The GPU had no reading before the command started: nothing to subtract yet.
            gpu.baseline = gpu.others = used
        self._raise_run_peak(gpu, used - gpu.others, t)

    def _own_memory(self, tick: GpuTick) -> dict[int, tuple[int, int]]:
        # Runs outside the lock: the process lookups cost tens of microseconds each, and the
        # fast thread must not wait for them.
        tree = self._tree
        out: dict[int, tuple[int, int]] = {}
        if tree is None:
            return out
        for device in tick.devices:
            used = device.memory_used_bytes
            if used is None or device.processes is None:
                continue
            own = [p.used_memory_bytes for p in device.processes if tree.contains(p.pid)]
            if own and all(b is not None for b in own):
                out[device.index] = (used, sum(b or 0 for b in own))
        return out

    @staticmethod
    def _raise_run_peak(gpu: _Gpu, value: int, t: float) -> None:
        if value > 0 and (gpu.run_peak is None or value > gpu.run_peak):
            gpu.run_peak = value
            gpu.run_peak_at = t


class SleepingStop(threading.Event):
    """A stop event whose timed `wait` sleeps instead of waiting on a condition.

    `Event.wait(timeout)` allocates a lock and parks on it on every call; at 50 Hz that cost
    twice the CPU of `time.sleep` (84 against 42 us a wake-up, measured on a 2-core VM). The
    price is that `set()` is noticed only at the end of the current sleep, one fast interval.
    """

    def wait(self, timeout: float | None = None) -> bool:
        """Sleep `timeout` seconds (or wait for `set()` without a timeout); whether it is set."""
        if timeout is None:
            return super().wait()
        if timeout > 0 and not self.is_set():
            time.sleep(timeout)
        return self.is_set()


class PeakSampler:
    """Runs a memory-only probe on its own thread and feeds its readings to a `PeakTracker`.

    The probe (normally `collectors.machine.nvml.NvmlMemoryProbe`) goes through the same
    `run_collector` loop as every other source; readings go straight to the tracker, and
    failures, recoveries and unavailability go to `on_event` (the recorder writes them to
    `events.jsonl`).
    """

    def __init__(
        self,
        probe: Collector[Sequence[int | None]],
        tracker: PeakTracker,
        on_event: Callable[[CollectorEvent], None],
    ) -> None:
        self.probe = probe
        self.tracker = tracker
        self._on_event = on_event
        self._stop = SleepingStop()
        self.unavailable: str | None = None
        """Why the probe could not start, once it has said so."""
        self._threads = SourceThreads(self._emit, self._crashed, prefix="record:")
        self._handle: CollectorThread | None = None

    def start(self) -> None:
        """Start sampling."""
        self._handle = self._threads.start(self.probe, self._stop)

    def _alive(self) -> bool:
        return self._handle is not None and self._handle.thread.is_alive()

    def wait_first(self, timeout_s: float) -> bool:
        """Wait until the first reading arrived (or the probe gave up); True if a reading came."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and self._alive():
            if self.tracker.readings:
                return True
            time.sleep(0.005)
        return bool(self.tracker.readings)

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop sampling and wait for the thread."""
        self._stop.set()
        if self._handle is not None and self._handle.thread.is_alive():
            self._handle.thread.join(timeout_s)

    def _emit(self, event: CollectorEvent) -> None:
        if isinstance(event, Sampled):
            self.tracker.observe(event.sample)
            return
        if isinstance(event, Unavailable):
            self.unavailable = event.error.msg
        self._on_event(event)

    def _crashed(self, source: str, error: BaseException) -> None:
        self._on_event(Crashed(source, error))  # a bug in the probe: the recorder writes it down
