"""Replaying a recorded session directory as collectors that keep its recorded timing."""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any, Generic, TypeVar

from collectors.base import CollectorError, CollectorUnavailable, GpuherdError, SourceExhausted
from collectors.replay.replay_metrics import MetricsSource
from collectors.roles import CONTAINERS, GPU, HOST, LOG
from collectors.samples import ContainerTick, GpuSample, GpuTick, HostSample, LogBatch
from collectors.session.rows import SessionError, SessionFormatError
from collectors.session.session_format import (
    CONTAINERS_FILE,
    EVENT,
    EVENTS_FILE,
    GPU_FILE,
    HOST_FILE,
    META,
    METRICS_FILE,
    PROCESSES_FILE,
)
from collectors.session.session_reader import SessionReader

__all__ = [
    "ReplayCollector",
    "ReplayError",
    "SessionError",
    "SessionFormatError",
    "SessionReader",
    "SessionReplay",
]

T = TypeVar("T")
MIN_SPEED = 1e-6
"""Slower than this a replay would not show its second sample in a lifetime."""
MAX_WAIT_S = 86400.0
"""No wait between two samples is longer than this (a recorded gap of years, or a slow speed)."""
OWNERS = {
    GPU_FILE: "replay:gpu",
    PROCESSES_FILE: "replay:gpu",
    HOST_FILE: "replay:host",
    CONTAINERS_FILE: "replay:containers",
    METRICS_FILE: "replay:metrics",
    EVENTS_FILE: "replay:metrics",
}
"""Which collector tells of a problem met in each file."""


class ReplayError(GpuherdError):
    """The replay cannot run as asked (for example a speed too slow to show anything)."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg, title="Replay")


class _Timeline:
    """The shared replay clock: recorded time `t` on lap `lap` is due at `due(t, lap)`."""

    def __init__(
        self, first_t: float, span_s: float, speed: float, clock: Callable[[], float]
    ) -> None:
        self.first_t, self.span_s, self.speed, self.clock = first_t, span_s, speed, clock
        self._anchor: float | None = None
        self._lock = threading.Lock()

    def due(self, t: float, lap: int) -> float:
        with self._lock:
            if self._anchor is None:
                self._anchor = self.clock()  # the first sample of any collector starts the show
            anchor = self._anchor
        return anchor + (t - self.first_t + lap * self.span_s) / self.speed


class ReplayCollector(Generic[T]):
    """A `Collector` handing out recorded samples at their recorded pace.

    `sample()` returns the next recorded sample (its `taken_at` is the recorded time, moved on by
    one session length per completed lap when looping) and sets `interval_s` to the wait until
    the one after it is due, so `run_collector` keeps the recorded timing. At the end it raises
    `SourceExhausted`, or starts again when looping. Its first sample too is due at its recorded
    offset from the session's first sample: `open` sets `start_delay_s`, which `run_collector`
    waits before the first `sample()` (a log whose first line came a minute in is not shown
    at the start). The first line the reader skips (or the
    first bad cell) in each of its files is reported once as a `CollectorError` naming the file
    and line, and the replay goes on with the next sample. A file that cannot be read any more
    (deleted while replaying) ends the replay of this collector (or its lap), said the same way.
    """

    def __init__(
        self,
        name: str,
        rows: Callable[[], Iterator[T]],
        timeline: _Timeline,
        loop: bool,
        *,
        role: str,
        none_recorded: Callable[[], str] | None = None,
    ) -> None:
        self.name = name
        self._none_recorded = none_recorded
        """Why the session holds no sample of this kind: said at `open`, as the live source
        would have said it, instead of waiting for a first sample that never comes."""
        self.role = role
        self.interval_s = 0.0
        self.start_delay_s = 0.0
        """How long after `open` the first sample is due (set by `open`)."""
        self._rows, self._timeline, self._loop = rows, timeline, loop
        self._it: Iterator[T] | None = None
        self._lap = 0
        self._pending: tuple[T, int] | None = None
        self._broken: GpuherdError | None = None
        self.notices: list[str] = []
        """Problems met in this collector's files, to report before the next sample."""

    def open(self) -> None:
        """Start reading from the first recorded sample."""
        self._it, self._lap = self._rows(), 0
        self._pending = self._advance()
        if self._pending is None and self._broken is not None:
            raise CollectorUnavailable(self._broken.msg, title="Replay")
        if self._pending is None and self._none_recorded is not None:
            raise CollectorUnavailable(self._none_recorded(), title="Replay")
        self.start_delay_s = self._wait(self._pending, self._timeline.clock())

    def sample(self) -> T:
        """Return the next recorded sample and set `interval_s` to the wait for the one after.

        Never sleeps: all waiting happens in `run_collector`'s stoppable wait, for the first
        sample too (`start_delay_s`).
        """
        now = self._timeline.clock()
        if self.notices:
            notice = self.notices.pop(0)
            self.interval_s = 0.0  # the sample it held back comes next
            raise CollectorError(notice, title="Replay")
        if self._broken is not None:
            error, self._broken = self._broken, None
            self.interval_s = self._wait(self._pending, now)  # until the next lap, if looping
            raise CollectorError(error.msg, title="Replay")
        if self._pending is None:
            raise SourceExhausted(f"{self.name}: end of the recorded session")
        item, lap = self._pending
        self._timeline.due(_taken_at(item), lap)  # the first call of all starts the clock
        self._pending = self._advance()
        self.interval_s = self._wait(self._pending, now)
        return _shifted(item, lap * self._timeline.span_s)

    def _wait(self, pending: tuple[T, int] | None, now: float) -> float:
        if pending is None:
            return 0.0
        wait = self._timeline.due(_taken_at(pending[0]), pending[1]) - now
        return min(MAX_WAIT_S, max(0.0, wait))

    def close(self) -> None:
        """Close the files being read."""
        if hasattr(self._it, "close"):
            self._it.close()  # type: ignore[union-attr]
        self._it = None

    def _advance(self) -> tuple[T, int] | None:
        """The next recorded sample and its lap; `None` at the end (a bad line ends a lap)."""
        for attempt in range(2):
            assert self._it is not None
            try:
                item = next(self._it, None)
            except SessionFormatError as error:
                self._broken, item = error, None
            except OSError as error:
                self._broken, item = (
                    CollectorError(
                        f"{self.name}: cannot read the session any more: {error.strerror or error}"
                    ),
                    None,
                )
            if item is not None:
                return item, self._lap
            if not self._loop or attempt:
                return None
            self._rewind()
        return None

    def _rewind(self) -> None:
        self.close()
        self._it, self._lap = self._rows(), self._lap + 1


HELD_FIELDS = (
    "memory_reserved_bytes",
    "gpu_util_pct",
    "mem_util_pct",
    "temperature_c",
    "power_w",
    "power_limit_w",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "fan_pct",
    "pstate",
    "ecc_errors_corrected",
    "ecc_errors_uncorrected",
    "mig_mode",
    "processes",
)
"""What a memory-only row leaves out, taken from the GPU's row before it in a replay."""


def _memory_only(gpu: GpuSample) -> bool:
    return (
        gpu.error is None
        and gpu.memory_used_bytes is not None
        and gpu.processes is None
        and gpu.gpu_util_pct is None
        and gpu.temperature_c is None
        and gpu.power_w is None
    )


def held_readings(ticks: Iterator[GpuTick]) -> Generator[GpuTick, None, None]:
    """The ticks, each memory-only row completed from the same GPU's previous row.

    A recording ends on a row holding only the last fast memory reading (so a spike after the
    last full row is kept). Shown as it is, every replay would end with temperature, power and
    utilization at N/A and say the driver would not list processes; those readings did not go
    away, they were not taken. The row's own memory reading stays.
    """
    last: dict[str, GpuSample] = {}
    try:
        for tick in ticks:
            devices = list(tick.devices)
            held = False
            for i, gpu in enumerate(devices):
                before = last.get(gpu.uuid)
                if before is not None and _memory_only(gpu):
                    gpu = devices[i] = dataclasses.replace(
                        gpu, **{name: getattr(before, name) for name in HELD_FIELDS}
                    )
                    held = True
                last[gpu.uuid] = gpu
            yield dataclasses.replace(tick, devices=tuple(devices)) if held else tick
    finally:
        close = getattr(ticks, "close", None)
        if close is not None:
            close()


def _taken_at(item: object) -> float:
    return float(item.taken_at)  # type: ignore[attr-defined]


def _shifted(item: T, by: float) -> T:
    return dataclasses.replace(item, taken_at=item.taken_at + by) if by else item  # type: ignore


class SessionReplay:
    """Replays a session directory as collectors for the dashboard, at `speed` times real time.

    Construction validates the directory (raising `SessionFormatError` before any UI starts);
    with `check_all` it also reads every row once, so a bad line deep in a file is reported now
    rather than when the replay reaches it. Reading is streaming either way.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        speed: float = 1.0,
        loop: bool = False,
        *,
        check_all: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not speed >= MIN_SPEED:
            raise ReplayError(
                f"--speed {speed:g} is too slow to show anything; use {MIN_SPEED:g} or more"
            )
        self._collectors: dict[str, ReplayCollector[Any]] = {}
        self.session = SessionReader(directory, on_problem=self._problem)
        self.has_metrics = METRICS_FILE in self.session.headers
        if check_all:
            self.session.check(strict=False)  # the counts go to `warnings`, shown at the start
        first, last = self.session.time_span()
        step = self.session.meta.get(META.interval_s) or 1.0
        self._timeline = _Timeline(first, last - first + step, speed, clock)
        self._loop = loop

    def _problem(self, name: str, text: str) -> None:
        collector = self._collectors.get(OWNERS.get(name, ""))
        if collector is not None:
            collector.notices.append(text)

    @property
    def warnings(self) -> list[str]:
        """What the reader dropped or doubted so far (for example a cut-short last line)."""
        return self.session.warnings

    def gpu_collector(self) -> ReplayCollector[GpuTick]:
        """A collector of the recorded `GpuTick`s."""
        return self._keep(
            ReplayCollector(
                "replay:gpu",
                lambda: held_readings(self.session.gpu_ticks()),
                self._timeline,
                self._loop,
                role=GPU,
                none_recorded=self._why_no_gpu,
            )
        )

    def _why_no_gpu(self) -> str:
        """The session holds no GPU reading: why, as the recording was told (no driver)."""
        told = next(
            (
                str(e.get("msg"))
                for e in self.session.events()
                if e.get("kind") == EVENT.collector_unavailable
                and e.get("source") == "nvml"
                and e.get("msg")
            ),
            None,
        )
        return "this session holds no GPU readings" + (
            f" (when it was recorded: {told.rstrip('.')})" if told else ""
        )

    def _keep(self, collector: ReplayCollector[T]) -> ReplayCollector[T]:
        self._collectors[collector.name] = collector
        return collector

    def host_collector(self) -> ReplayCollector[HostSample] | None:
        """A collector of the recorded `HostSample`s; `None` when there is no `host.csv`."""
        if HOST_FILE not in self.session.headers:
            return None
        return self._keep(
            ReplayCollector(
                "replay:host", self.session.host_samples, self._timeline, self._loop, role=HOST
            )
        )

    def container_collector(self) -> ReplayCollector[ContainerTick] | None:
        """A collector of the recorded `ContainerTick`s; `None` without a `containers.csv`."""
        if CONTAINERS_FILE not in self.session.headers:
            return None
        return self._keep(
            ReplayCollector(
                "replay:containers",
                self.session.container_ticks,
                self._timeline,
                self._loop,
                role=CONTAINERS,
            )
        )

    def metrics_collector(self) -> ReplayCollector[LogBatch] | None:
        """A collector of the recorded training metrics and findings, as `LogBatch`es.

        One task per recorded log; `None` when the session has neither `metrics.csv` nor
        `events.jsonl`.
        """
        if not self.has_metrics and not self.session.has(EVENTS_FILE):
            return None
        return self._keep(
            ReplayCollector(
                "replay:metrics", MetricsSource(self.session), self._timeline, self._loop, role=LOG
            )
        )

    def collectors(self) -> list[ReplayCollector[Any]]:
        """Every collector this session can drive: GPU, and what else was recorded."""
        extra = [
            c
            for c in (self.host_collector(), self.container_collector(), self.metrics_collector())
            if c is not None
        ]
        return [self.gpu_collector(), *extra]
