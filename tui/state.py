"""What the dashboard knows: latest samples, bounded history and source health (UI thread only)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, Literal

from collectors.samples import GpuSample, GpuTick, HostSample
from gpuherd.tasks import TaskTracker

HISTORY_LEN = 600
"""Points kept per GPU: ten minutes at the default 1 Hz."""

Role = Literal["gpu", "host", "log", "other"]
Health = Literal["waiting", "ok", "failing", "unavailable", "finished", "crashed"]


@dataclass
class SourceStatus:
    """Health of one collector as the dashboard last heard it."""

    health: Health = "waiting"
    reason: str | None = None
    """Why the source is failing, unavailable or crashed, in words a person can act on."""


@dataclass
class GpuHistory:
    """Bounded time series of one GPU, oldest first."""

    taken_at: deque[float] = field(default_factory=lambda: deque(maxlen=HISTORY_LEN))
    mem_used_pct: deque[float | None] = field(default_factory=lambda: deque(maxlen=HISTORY_LEN))
    gpu_util_pct: deque[float | None] = field(default_factory=lambda: deque(maxlen=HISTORY_LEN))

    def __len__(self) -> int:
        return len(self.taken_at)

    def append(self, taken_at: float, gpu: GpuSample) -> None:
        """Add one reading; unknown values are kept as `None` so gaps stay gaps."""
        self.taken_at.append(taken_at)
        self.mem_used_pct.append(_mem_pct(gpu))
        self.gpu_util_pct.append(gpu.gpu_util_pct)


@dataclass(frozen=True)
class GpuChanges:
    """GPUs whose error state changed with the latest tick."""

    lost: tuple[GpuSample, ...] = ()
    back: tuple[GpuSample, ...] = ()


def guess_role(source: str) -> Role:
    """Role of a source from its name, until its first sample says for sure.

    Live collectors are named `nvml` and `host`; replayed ones carry `gpu` or `host` in their
    names; log tails are `log:<path>` (whatever the path holds) and the replayed metrics
    `replay:metrics`. The role decides which panel shows the source's errors.
    """
    if source.startswith("log:") or source == "replay:metrics":
        return "log"
    lowered = source.lower()
    if "nvml" in lowered or "gpu" in lowered:
        return "gpu"
    if "host" in lowered:
        return "host"
    return "other"


class MonitorState:
    """Everything the widgets render from; changed only by message handlers on the UI thread."""

    def __init__(self) -> None:
        self.latest: dict[str, Any] = {}
        """Newest sample per source name; later sources (log tasks) add their own entries."""
        self.status: dict[str, SourceStatus] = {}
        self.roles: dict[str, Role] = {}
        self.history: dict[str, GpuHistory] = {}
        """Per GPU UUID."""
        self.gpu_errors: dict[str, str] = {}
        """GPU UUID -> why that GPU could not be read in the latest tick."""
        self.selected_uuid: str | None = None
        """The GPU whose history the chart shows."""
        self.notices: list[str] = []
        """One line per source that cannot run here, for the banner and for stderr at exit."""
        self.now: float | None = None
        """Time for the header: the wall clock live, the newest recorded time in a replay."""
        self.tasks = TaskTracker()
        """One task per followed (or replayed) training log, fed by `tui.task_feed`."""

    def role(self, source: str) -> Role:
        """The panel family a source belongs to."""
        return self.roles.get(source) or guess_role(source)

    def status_of(self, source: str) -> SourceStatus:
        """Health of `source`, creating a `waiting` entry on first use."""
        return self.status.setdefault(source, SourceStatus())

    def sources(self, role: Role) -> list[str]:
        """Known sources with that role, in the order they were first heard of."""
        return [name for name in self.status if self.role(name) == role]

    @property
    def gpu_tick(self) -> GpuTick | None:
        """The newest NVML (or replayed) tick, if any source sent one."""
        return self._latest_of(GpuTick)

    @property
    def host_sample(self) -> HostSample | None:
        """The newest host sample, if any."""
        return self._latest_of(HostSample)

    def _latest_of(self, kind: type) -> Any:
        for sample in self.latest.values():
            if isinstance(sample, kind):
                return sample
        return None

    def apply_sample(self, source: str, sample: Any) -> GpuChanges:
        """Store a sample; for a GPU tick also extend history and track lost GPUs."""
        self.latest[source] = sample
        status = self.status_of(source)
        if status.health == "waiting":
            # Failing sources clear on `CollectorRecovered`, which the loop sends first.
            status.health = "ok"
        if isinstance(sample, GpuTick):
            self.roles[source] = "gpu"
            return self._apply_tick(sample)
        if isinstance(sample, HostSample):
            self.roles[source] = "host"
        return GpuChanges()

    def _apply_tick(self, tick: GpuTick) -> GpuChanges:
        lost: list[GpuSample] = []
        back: list[GpuSample] = []
        for gpu in tick.devices:
            if gpu.error is not None:
                if gpu.uuid not in self.gpu_errors:
                    lost.append(gpu)
                self.gpu_errors[gpu.uuid] = gpu.error
                continue
            if self.gpu_errors.pop(gpu.uuid, None) is not None:
                back.append(gpu)
            self.history.setdefault(gpu.uuid, GpuHistory()).append(tick.taken_at, gpu)
        uuids = [gpu.uuid for gpu in tick.devices]
        if self.selected_uuid not in uuids:
            self.selected_uuid = uuids[0] if uuids else None
        return GpuChanges(tuple(lost), tuple(back))

    def mark_failed(self, source: str, reason: str) -> bool:
        """Record a failing tick; True when this starts a new outage (notify once per outage)."""
        status = self.status_of(source)
        new_outage = status.health != "failing"
        status.health, status.reason = "failing", reason
        return new_outage

    def mark_recovered(self, source: str) -> bool:
        """Clear a failure; True when the source had been failing."""
        status = self.status_of(source)
        was_failing = status.health in ("failing", "crashed")
        status.health, status.reason = "ok", None
        return was_failing

    def mark_unavailable(self, source: str, reason: str, notice: str | None = None) -> None:
        """The source cannot work here at all; `notice` is the banner line (default `reason`)."""
        status = self.status_of(source)
        status.health, status.reason = "unavailable", reason
        self.notices.append(notice or reason)

    def mark_finished(self, source: str) -> None:
        """A finite source ran out of samples; a failure it ended on stays on show."""
        status = self.status_of(source)
        if status.health not in ("failing", "crashed"):
            status.reason = None
        status.health = "finished"

    def finished(self, role: Role) -> bool:
        """True when a source of `role` has finished (a replay reached its end)."""
        return any(s.health == "finished" for n, s in self.status.items() if self.role(n) == role)

    def mark_crashed(self, source: str, reason: str) -> None:
        """The worker running the source died of a bug."""
        status = self.status_of(source)
        status.health, status.reason = "crashed", reason

    def problems(self, role: Role) -> list[str]:
        """Reasons why sources of `role` are failing, crashed, or ended on a failure."""
        return [
            status.reason or status.health
            for name, status in self.status.items()
            if self.role(name) == role
            and (status.health in ("failing", "crashed")
                 or (status.health == "finished" and status.reason))
        ]

    def unavailable(self, role: Role) -> list[str]:
        """Reasons why sources of `role` cannot run here."""
        return [
            status.reason or "unavailable"
            for name, status in self.status.items()
            if self.role(name) == role and status.health == "unavailable"
        ]

    def gpu_streaming(self) -> bool:
        """True while a GPU source has sent a tick and is still polling."""
        return self.gpu_tick is not None and any(
            self.role(name) == "gpu" and status.health in ("ok", "failing")
            for name, status in self.status.items()
        )

    def gpu_pids(self) -> set[int]:
        """Every pid the newest tick lists on any GPU (for the host collector's pid watch)."""
        tick = self.gpu_tick
        if tick is None:
            return set()
        return {p.pid for gpu in tick.devices for p in gpu.processes or ()}

    def select_next_gpu(self, step: int = 1) -> None:
        """Move the chart to the next (or previous) GPU of the newest tick."""
        tick = self.gpu_tick
        if tick is None or not tick.devices:
            return
        uuids = [gpu.uuid for gpu in tick.devices]
        current = uuids.index(self.selected_uuid) if self.selected_uuid in uuids else 0
        self.selected_uuid = uuids[(current + step) % len(uuids)]


def _mem_pct(gpu: GpuSample) -> float | None:
    if gpu.memory_used_bytes is None or not gpu.memory_total_bytes:
        return None
    return 100.0 * gpu.memory_used_bytes / gpu.memory_total_bytes
