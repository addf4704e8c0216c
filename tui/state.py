"""What the dashboard knows: latest samples, bounded history and source health (UI thread only)."""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from collectors.roles import GPU, HOST, sample_role
from collectors.samples import GpuSample, GpuTick, HostSample
from gpuherd.tasks import TaskTracker

HISTORY_LEN = 600
"""Points kept per GPU: ten minutes at the default 1 Hz."""

Health = Literal["waiting", "ok", "failing", "unavailable", "finished", "crashed"]


@dataclass
class SourceStatus:
    """Health and role of one collector as the dashboard last heard it."""

    health: Health = "waiting"
    reason: str | None = None
    """Why the source is failing, unavailable or crashed, in words a person can act on."""
    role: str | None = None
    """What its samples are for (`collectors.roles`); `None` until declared or first sampled."""


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


LOCAL_HOST = ""
"""The host key of samples that do not name one: the machine the dashboard reads."""


def host_of(sample: Any) -> str:
    """The host a sample describes: its `host` field, or `LOCAL_HOST` when it has none."""
    return getattr(sample, "host", None) or LOCAL_HOST


class MonitorState:
    """Everything the widgets render from; changed only by message handlers on the UI thread.

    Samples are kept per source and host, and found by role: panels ask for "every source of
    role R" (`samples`), never for "the first sample of type T", so two GPU sources (or two
    hosts) stay two.
    """

    def __init__(self) -> None:
        self.latest: dict[tuple[str, str], Any] = {}
        """Newest sample per (source name, host), in the order first heard."""
        self.status: dict[str, SourceStatus] = {}
        """Health and role per source name, in the order first heard."""
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
        self._gpu_tick: GpuTick | None = None

    def add_source(self, source: str, role: str | None) -> SourceStatus:
        """Note a source before it sends anything, with the role it declares (if any)."""
        status = self.status_of(source)
        if role is not None:
            status.role = role
        return status

    def role(self, source: str) -> str | None:
        """The role a source declared or its first known sample showed; `None` if neither."""
        status = self.status.get(source)
        return status.role if status is not None else None

    def status_of(self, source: str) -> SourceStatus:
        """Health of `source`, creating a `waiting` entry on first use."""
        return self.status.setdefault(source, SourceStatus())

    def sources(self, role: str | None) -> list[str]:
        """Known sources with that role, in the order they were first heard of."""
        return [name for name, status in self.status.items() if status.role == role]

    def samples(self, role: str) -> list[Any]:
        """The newest sample of every source and host of `role`, in the order first heard."""
        return [sample for (source, _), sample in self.latest.items() if self.role(source) == role]

    @property
    def gpu_tick(self) -> GpuTick | None:
        """Every GPU of every GPU source as one tick (the very tick when there is one source)."""
        return self._gpu_tick

    @property
    def host_sample(self) -> HostSample | None:
        """The newest sample of the first host source, preferring this machine's."""
        hosts = [s for s in self.samples(HOST) if isinstance(s, HostSample)]
        local = [s for s in hosts if host_of(s) == LOCAL_HOST]
        return next(iter(local or hosts), None)

    def apply_sample(self, source: str, sample: Any) -> GpuChanges:
        """Store a sample; for a GPU tick also extend history and track lost GPUs.

        A source that declared no role takes the role of its sample's type
        (`collectors.roles.ROLE_OF_SAMPLE`).
        """
        self.latest[(source, host_of(sample))] = sample
        status = self.status_of(source)
        if status.role is None:
            status.role = sample_role(sample)
        if status.health == "waiting":
            # Failing sources clear on `Recovered`, which the loop sends first.
            status.health = "ok"
        if status.role == GPU and isinstance(sample, GpuTick):
            self._gpu_tick = merged_tick([t for t in self.samples(GPU) if isinstance(t, GpuTick)])
            return self._apply_tick(sample)
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
        uuids = [gpu.uuid for gpu in self._gpu_tick.devices] if self._gpu_tick else []
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
        # Several sources can miss the same thing (the GPU collector and the containers'
        # GPU reader both need NVML): the banner says each reason once.
        if (notice or reason) not in self.notices:
            self.notices.append(notice or reason)

    def mark_finished(self, source: str) -> None:
        """A finite source ran out of samples; a failure it ended on stays on show."""
        status = self.status_of(source)
        if status.health not in ("failing", "crashed"):
            status.reason = None
        status.health = "finished"

    def finished(self, role: str) -> bool:
        """True when a source of `role` has finished (a replay reached its end)."""
        return any(s.health == "finished" for s in self.status.values() if s.role == role)

    def replay_over(self) -> bool:
        """Whether a replay has reached its end.

        Its GPU readings ran out, or the session holds none (the GPU source was unavailable)
        and every other source has ended too.
        """
        gpus = [s for s in self.status.values() if s.role == GPU]
        if any(s.health == "finished" for s in gpus):
            return True
        others = [s for s in self.status.values() if s.role != GPU]
        return (
            bool(gpus)
            and all(s.health == "unavailable" for s in gpus)
            and bool(others)
            and all(s.health != "ok" and s.health != "waiting" for s in others)
        )

    def mark_crashed(self, source: str, reason: str) -> None:
        """The worker running the source died of a bug."""
        status = self.status_of(source)
        status.health, status.reason = "crashed", reason

    def problems(self, role: str) -> list[str]:
        """Reasons why sources of `role` are failing, crashed, or ended on a failure."""
        return [
            status.reason or status.health
            for status in self.status.values()
            if status.role == role and _troubled(status)
        ]

    def problems_outside(self, roles: Collection[str]) -> list[str]:
        """`source: reason` for troubled sources whose role is not in `roles` (or who have none)."""
        return [
            f"{name}: {status.reason or status.health}"
            for name, status in self.status.items()
            if status.role not in roles and _troubled(status)
        ]

    def unavailable(self, role: str) -> list[str]:
        """Reasons why sources of `role` cannot run here."""
        return [
            status.reason or "unavailable"
            for status in self.status.values()
            if status.role == role and status.health == "unavailable"
        ]

    def gpu_streaming(self) -> bool:
        """True while a GPU source has sent a tick and is still polling."""
        return self.gpu_tick is not None and any(
            status.role == GPU and status.health in ("ok", "failing")
            for status in self.status.values()
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


def merged_tick(ticks: Sequence[GpuTick]) -> GpuTick | None:
    """One tick holding every GPU of `ticks`, in source order; the only tick itself if one.

    Versions are those of the first source; the time is the newest, so the header and the
    process ages follow the freshest reading.
    """
    if len(ticks) <= 1:
        return ticks[0] if ticks else None
    first = ticks[0]
    return GpuTick(
        taken_at=max(t.taken_at for t in ticks),
        devices=tuple(gpu for t in ticks for gpu in t.devices),
        driver_version=first.driver_version,
        nvml_version=first.nvml_version,
        cuda_driver_version=first.cuda_driver_version,
    )


def _troubled(status: SourceStatus) -> bool:
    return status.health in ("failing", "crashed") or (
        status.health == "finished" and bool(status.reason)
    )


def _mem_pct(gpu: GpuSample) -> float | None:
    if gpu.memory_used_bytes is None or not gpu.memory_total_bytes:
        return None
    return 100.0 * gpu.memory_used_bytes / gpu.memory_total_bytes
