"""GPU readings as the queue sees them, and the window that keeps the last few of each GPU."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from collectors.samples import GpuTick
from gpuherd.common.queue_defaults import SETTLE_S


@dataclass(frozen=True, slots=True)
class GpuReading:
    """One GPU at one instant, as the queue sees it."""

    taken_at: float
    uuid: str
    index: int
    total_bytes: int
    free_bytes: int
    util_pct: float | None
    """`None` when the device does not report utilization (then memory alone decides)."""
    problem: str | None = None
    """Why this reading is unusable (GPU lost, memory not reported); such a reading never
    qualifies and breaks the settle period."""


class HeadroomWindow:
    """The last readings of each GPU: enough to cover the settle period, and no more."""

    def __init__(self, settle_s: float = SETTLE_S, *, max_gap_s: float = 5.0) -> None:
        self.settle_s = settle_s
        self.max_gap_s = max_gap_s
        """A longer silence between two readings (or since the last) breaks the settle period:
        nothing is known about the GPU in between."""
        self._by_gpu: dict[str, deque[GpuReading]] = {}

    def add(self, readings: Iterable[GpuReading]) -> None:
        """Add one round of readings; a known GPU absent from a non-empty round counts as lost."""
        batch = list(readings)
        if not batch:
            return
        for reading in batch:
            self._append(reading)
        taken_at = max(r.taken_at for r in batch)
        seen = {r.uuid for r in batch}
        missing = [q[-1] for uuid, q in self._by_gpu.items() if uuid not in seen]
        for last in missing:
            self._append(
                GpuReading(
                    taken_at,
                    last.uuid,
                    last.index,
                    last.total_bytes,
                    0,
                    None,
                    "missing from the last reading",
                )
            )

    def _append(self, reading: GpuReading) -> None:
        kept = self._by_gpu.setdefault(reading.uuid, deque())
        if kept and reading.taken_at <= kept[-1].taken_at:
            return  # a repeated or late round says nothing newer
        kept.append(reading)
        horizon = reading.taken_at - self.settle_s
        # Keep one reading at or before the horizon: it says what the GPU was at its start.
        while len(kept) >= 2 and kept[1].taken_at <= horizon:
            kept.popleft()

    def readings(self, uuid: str) -> tuple[GpuReading, ...]:
        """The kept readings of one GPU, oldest first."""
        return tuple(self._by_gpu.get(uuid, ()))

    def uuids(self) -> tuple[str, ...]:
        """Every GPU seen so far."""
        return tuple(self._by_gpu)

    @staticmethod
    def readings_from_tick(tick: GpuTick) -> list[GpuReading]:
        """One NVML round as readings (free = total - used); a failed GPU gives a problem."""
        out: list[GpuReading] = []
        for gpu in tick.devices:
            total, used = gpu.memory_total_bytes, gpu.memory_used_bytes
            problem = gpu.error
            if problem is None and (total is None or used is None):
                problem = "memory not reported"
            if problem is None and not gpu.uuid.startswith(("GPU-", "MIG-")):
                problem = "its UUID is not known yet"
            if problem is not None or total is None or used is None:
                out.append(
                    GpuReading(tick.taken_at, gpu.uuid, gpu.index, total or 0, 0, None, problem)
                )
            else:
                out.append(
                    GpuReading(
                        tick.taken_at,
                        gpu.uuid,
                        gpu.index,
                        total,
                        max(0, total - used),
                        gpu.gpu_util_pct,
                    )
                )
        return out
