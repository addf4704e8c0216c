"""The headroom rule: which waiting job may start on which GPU, from a window of readings."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from collectors.samples import GpuTick
from gpuherd.queue.jobs import Job, JobState
from gpuherd.queue.sizes import format_size

KEEP_EXTRA_S = 5.0
STALE_S = 5.0


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One GPU at one instant."""

    taken_at: float
    uuid: str
    index: int
    total_bytes: int
    free_bytes: int
    util_pct: float | None


class HeadroomWindow:
    """The last readings per GPU: the settle period plus a few ticks."""

    def __init__(self, settle_s: float = 10.0) -> None:
        self.settle_s = settle_s
        self.readings: dict[str, deque[GpuReading]] = {}

    def add(self, readings: Iterable[GpuReading]) -> None:
        """Keep `readings`, dropping those older than the settle period plus a margin."""
        for reading in readings:
            kept = self.readings.setdefault(reading.uuid, deque())
            kept.append(reading)
            while kept and kept[0].taken_at < reading.taken_at - self.settle_s - KEEP_EXTRA_S:
                kept.popleft()

    @staticmethod
    def readings_from_tick(tick: GpuTick) -> list[GpuReading]:
        """One reading per GPU of `tick` whose memory is known (free = total - used)."""
        return [GpuReading(tick.taken_at, d.uuid, d.index, d.memory_total_bytes,
                           d.memory_total_bytes - d.memory_used_bytes, d.gpu_util_pct)
                for d in tick.devices
                if d.error is None and d.memory_total_bytes is not None
                and d.memory_used_bytes is not None]


@dataclass(frozen=True, slots=True)
class Reservation:
    """Memory held for a launched job that has not allocated it yet."""

    gpu_uuid: str
    bytes: int
    job: str


@dataclass(frozen=True, slots=True)
class Launch:
    """Start this job on these GPUs."""

    job_id: int
    gpu_uuids: tuple[str, ...]
    gpu_indices: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Decision:
    """What to start now, and why every other waiting job waits."""

    launches: tuple[Launch, ...]
    waiting: dict[int, str]


def _streak(kept: Sequence[GpuReading], ok: object, now: float) -> float:
    """Seconds the readings have qualified without a break, up to `now`; -1 if the last fails."""
    start = None
    for reading in reversed(kept):
        if reading.taken_at > now:
            continue
        if not ok(reading):  # type: ignore[operator]
            break
        start = reading.taken_at
    return -1.0 if start is None else now - start


def decide(window: HeadroomWindow, jobs: Sequence[Job], reservations: Sequence[Reservation],
           now: float, *, margin_bytes: int = 1 << 30, settle_s: float = 10.0) -> Decision:
    """Launches for the waiting `jobs` in queue order, best fit; the rest with their reason."""
    reserved: dict[str, int] = {}
    for r in reservations:
        reserved[r.gpu_uuid] = reserved.get(r.gpu_uuid, 0) + r.bytes
    states = {j.id: j.state for j in jobs}
    launches: list[Launch] = []
    waiting: dict[int, str] = {}
    for job in jobs:
        if job.state is not JobState.WAITING:
            continue
        after = job.spec.after
        if after is not None and states.get(after) is not JobState.DONE:
            what = states[after].value if after in states else "gone"
            waiting[job.id] = f"waits for job {after} to finish ({what})"
            continue
        need = job.spec.vram_bytes
        fits: list[tuple[int, GpuReading]] = []
        reasons: list[tuple[float, str]] = []
        for uuid, kept in window.readings.items():
            if not kept or kept[-1].taken_at < now - STALE_S:
                continue
            held = reserved.get(uuid, 0)

            def ok(r: GpuReading, held: int = held, need: int = need,
                   limit: float = job.spec.max_util_pct) -> bool:
                return (r.free_bytes - held >= need + margin_bytes
                        and (r.util_pct is None or r.util_pct < limit))

            streak = _streak(kept, ok, now)
            last = kept[-1]
            if streak >= settle_s:
                fits.append((last.free_bytes - held - need, last))
                continue
            if last.util_pct is not None and last.util_pct >= job.spec.max_util_pct:
                why = f"GPU {last.index}: {last.util_pct:.0f} % busy (under " \
                      f"{job.spec.max_util_pct:.0f} % needed)"
            else:
                free = format_size(max(0, last.free_bytes - held))
                why = (f"GPU {last.index}: {free} free for {max(0.0, streak):.0f} s of "
                       f"{settle_s:.0f} s; needs {format_size(need)} + "
                       f"{format_size(margin_bytes)} margin")
            reasons.append((streak + (last.free_bytes - held) / 1e18, why))
        if len(fits) >= job.spec.gpus:
            chosen = sorted(fits, key=lambda f: (f[0], f[1].index))[: job.spec.gpus]
            launches.append(Launch(job.id, tuple(r.uuid for _, r in chosen),
                                   tuple(r.index for _, r in chosen)))
            for _, r in chosen:
                reserved[r.uuid] = reserved.get(r.uuid, 0) + need
        else:
            waiting[job.id] = (max(reasons)[1] if reasons else
                               "no GPU reading yet" if not fits else
                               f"{len(fits)} of {job.spec.gpus} GPUs have room")
    return Decision(tuple(launches), waiting)
