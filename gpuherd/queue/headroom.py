"""Which waiting jobs may start now, on which GPUs: a pure decision over a window of readings.

No clock and no I/O: the caller passes the readings, the live reservations and `now`, so the
same function runs in the runner, in tests over scripted timelines and over recorded sessions.
The rules are written out for users in docs/queue.md, "How a GPU is chosen".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise

from gpuherd.common.queue_defaults import MARGIN_BYTES, SETTLE_S
from gpuherd.present.format import fmt_gib_or_mib as _size
from gpuherd.queue.jobs import Job, JobState
from gpuherd.queue.readings import GpuReading, HeadroomWindow

__all__ = [
    "Decision",
    "GpuReading",
    "HeadroomWindow",
    "Launch",
    "Reservation",
    "decide",
    "reserved_by_gpu",
]

_EPS_S = 1e-6
"""Float slack when comparing a covered span with the settle period (sums of tick times)."""

STARVE_AFTER_S = 1800.0
"""How long the first job in line may be passed by later jobs before it holds the line."""


@dataclass(frozen=True, slots=True)
class Reservation:
    """Memory promised to a launched job that may not have allocated it yet."""

    gpu_uuid: str
    bytes: int
    job: str


@dataclass(frozen=True, slots=True)
class Launch:
    """Start this job now on these GPUs (in `CUDA_VISIBLE_DEVICES` order)."""

    job_id: int
    gpu_uuids: tuple[str, ...]
    gpu_indices: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Decision:
    """What to start now, and why every other waiting job waits."""

    launches: tuple[Launch, ...]
    waiting: dict[int, str]
    """Job id -> why it waits, in words."""


@dataclass(frozen=True, slots=True)
class _Gpu:
    """One GPU over the settle period, computed once per decision."""

    latest: GpuReading
    run: tuple[GpuReading, ...]
    """Readings from the one at or before `now - settle_s` to the latest, oldest first."""
    covered: bool
    """The run covers the settle period with usable readings and no gap."""
    min_free: int
    max_util: float | None
    position: int = 0
    """Place in the decision's GPU list (by index)."""


def reserved_by_gpu(reservations: Iterable[Reservation]) -> dict[str, int]:
    """Reserved bytes per GPU UUID."""
    out: dict[str, int] = {}
    for r in reservations:
        out[r.gpu_uuid] = out.get(r.gpu_uuid, 0) + r.bytes
    return out


def decide(
    window: HeadroomWindow,
    jobs: Sequence[Job],
    reservations: Sequence[Reservation],
    now: float,
    *,
    margin_bytes: int = MARGIN_BYTES,
    settle_s: float = SETTLE_S,
    starve_after_s: float = STARVE_AFTER_S,
) -> Decision:
    """Which waiting jobs start now, and on which GPUs; why the others wait.

    Args:
        window: The recent readings of every GPU.
        jobs: The waiting jobs and the jobs they wait for (`after`); others are ignored.
        reservations: Every live reservation on the host (every user's).
        now: The time the decision is for (the caller's clock).
        margin_bytes: Free memory a GPU must keep beyond the job's need.
        settle_s: How long a GPU must have qualified without a break.
        starve_after_s: Later jobs may pass the first waiting job until it has been queued
            this long; then nothing behind it starts until it does.

    Returns:
        The launches, in queue order, and a reason for every waiting job that does not start.
    """
    gpus = _gpus(window, now, settle_s)
    reserved = reserved_by_gpu(reservations)
    by_id = {job.id: job for job in jobs}
    waiting = sorted(
        (j for j in jobs if j.state is JobState.WAITING), key=lambda j: (j.position, j.id)
    )
    launches: list[Launch] = []
    reasons: dict[int, str] = {}
    holder: Job | None = None
    # Jobs asking the same get the same answer until a launch changes the reservations; a
    # queue of many alike jobs is then placed and explained once.
    misses: dict[tuple[int, int, float], str] = {}
    for job in waiting:
        blocked = _after_reason(job, by_id)
        if blocked is None and holder is not None:
            blocked = (
                f"waits behind job {holder.id}, first in line for "
                f"{_minutes(now - holder.created_at)}"
            )
        if blocked is not None:
            reasons[job.id] = blocked
            continue
        asks = (job.spec.vram_bytes, job.spec.gpus, job.spec.max_util_pct)
        reason = misses.get(asks)
        if reason is None:
            picked = _place(job, gpus, reserved, margin_bytes)
            if picked:
                launches.append(
                    Launch(
                        job.id,
                        tuple(g.latest.uuid for g in picked),
                        tuple(g.latest.index for g in picked),
                    )
                )
                for gpu in picked:  # later jobs in this decision see its memory as taken
                    uuid = gpu.latest.uuid
                    reserved[uuid] = reserved.get(uuid, 0) + job.spec.vram_bytes
                misses.clear()
                continue
            reason = misses[asks] = _why(
                job, gpus, reserved, margin_bytes, now, settle_s, window.max_gap_s
            )
        reasons[job.id] = reason
        if now - job.created_at >= starve_after_s and _could_fit(job, gpus, margin_bytes):
            holder = job
    return Decision(tuple(launches), reasons)


def _gpus(window: HeadroomWindow, now: float, settle_s: float) -> list[_Gpu]:
    """Each GPU's readings up to `now`, reduced to what the decision needs."""
    out: list[_Gpu] = []
    start = now - settle_s
    for uuid in window.uuids():
        kept = [r for r in window.readings(uuid) if r.taken_at <= now]
        if not kept:
            continue
        first = len(kept) - 1
        while first > 0 and kept[first].taken_at > start + _EPS_S:
            first -= 1
        run = tuple(kept[first:])
        covered = (
            run[0].taken_at <= start + _EPS_S
            and now - run[-1].taken_at <= window.max_gap_s
            and all(r.problem is None for r in run)
            and all(b.taken_at - a.taken_at <= window.max_gap_s for a, b in pairwise(run))
        )
        utils = [r.util_pct for r in run if r.util_pct is not None]
        out.append(
            _Gpu(
                run[-1], run, covered, min(r.free_bytes for r in run), max(utils) if utils else None
            )
        )
    out.sort(key=lambda g: g.latest.index)
    return [replace(g, position=i) for i, g in enumerate(out)]


def _place(job: Job, gpus: list[_Gpu], reserved: dict[str, int], margin_bytes: int) -> list[_Gpu]:
    """The best-fitting GPUs for the job (least headroom left), or none."""
    need = job.spec.vram_bytes
    limit = job.spec.max_util_pct
    fits: list[tuple[int, int, _Gpu]] = []
    for gpu in gpus:
        if not gpu.covered or (gpu.max_util is not None and gpu.max_util >= limit):
            continue
        left = gpu.min_free - reserved.get(gpu.latest.uuid, 0) - need - margin_bytes
        if left >= 0:
            fits.append((left, gpu.latest.index, gpu))
    count = max(1, job.spec.gpus)
    if len(fits) < count:
        return []
    fits.sort(key=lambda f: (f[0], f[1]))
    return sorted((f[2] for f in fits[:count]), key=lambda g: g.latest.index)


def _after_reason(job: Job, by_id: dict[int, Job]) -> str | None:
    after = job.spec.after
    if after is None:
        return None
    other = by_id.get(after)
    if other is None:
        return f"waits for job {after} (not in the queue)"
    if other.state is JobState.DONE:
        return None
    if other.state in (JobState.FAILED, JobState.CANCELLED):
        return (
            f"waits for job {after} ({other.state.value}): it starts only if that job is "
            "run again and succeeds"
        )
    return f"waits for job {after} ({other.state.value})"


def _could_fit(job: Job, gpus: list[_Gpu], margin_bytes: int) -> bool:
    """Whether enough GPUs are large enough for the job at all (an unknown size may be)."""
    need = job.spec.vram_bytes + margin_bytes
    large = sum(g.latest.total_bytes >= need or not g.latest.total_bytes for g in gpus)
    return large >= max(1, job.spec.gpus)


def _why(
    job: Job,
    gpus: list[_Gpu],
    reserved: dict[str, int],
    margin_bytes: int,
    now: float,
    settle_s: float,
    max_gap_s: float,
) -> str:
    """Why the job cannot start, in words, naming the GPU closest to qualifying."""
    need = job.spec.vram_bytes
    count = max(1, job.spec.gpus)
    needs = f"{_size(need)} + {_size(margin_bytes)} margin"
    if not gpus:
        return "no GPU readings yet"
    if count > len(gpus):
        return f"needs {count} GPUs, this host shows {len(gpus)}"
    if not _could_fit(job, gpus, margin_bytes):
        largest = max(g.latest.total_bytes for g in gpus)
        if count == 1:
            return f"needs {needs}, more than any GPU here holds ({_size(largest)})"
        large = sum(g.latest.total_bytes >= need + margin_bytes for g in gpus)
        return f"needs {count} GPUs with {needs}; only {large} of {len(gpus)} are that large"
    statuses = []
    for gpu in gpus:
        status = _status(gpu, job, reserved.get(gpu.latest.uuid, 0), margin_bytes, now, max_gap_s)
        if status[0] > 1 or status[4] + _EPS_S < settle_s:  # else it qualifies
            statuses.append(status)
    if not statuses:
        closest = "no GPU qualifies"
    else:
        rank, _, index, low, held_s = min(statuses)
        gpu = gpus[index]
        closest = _words(
            rank,
            gpu,
            low,
            held_s,
            reserved.get(gpu.latest.uuid, 0),
            needs,
            job.spec.max_util_pct,
            settle_s,
        )
    if count == 1:
        return closest
    qualify = len(gpus) - len(statuses)
    verb = "qualifies" if qualify == 1 else "qualify"
    return f"needs {count} GPUs, {qualify} {verb}; {closest}"


def _status(
    gpu: _Gpu, job: Job, reserved: int, margin_bytes: int, now: float, max_gap_s: float
) -> tuple[int, float, int, int, float]:
    """How far a GPU is from qualifying: (rank, distance, position, lowest free, held s).

    Ranks, nearest first: 1 usable but not for long enough, 2 too busy, 3 short of memory,
    4 silent, 5 lost. Words are made only for the nearest GPU (formatting is most of the cost).
    """
    latest = gpu.latest
    need = job.spec.vram_bytes + margin_bytes
    limit = job.spec.max_util_pct
    if latest.problem is not None:
        return (5, latest.index, gpu.position, 0, 0.0)
    silent_s = now - latest.taken_at
    if silent_s > max_gap_s:
        return (4, silent_s, gpu.position, 0, silent_s)
    short = need - (latest.free_bytes - reserved)
    if short > 0:
        return (3, short, gpu.position, latest.free_bytes, 0.0)
    if latest.util_pct is not None and latest.util_pct >= limit:
        return (2, latest.util_pct, gpu.position, latest.free_bytes, 0.0)
    # Usable now: how long it has been so without a break.
    start = latest
    low = latest.free_bytes
    run = gpu.run
    for k in range(len(run) - 2, -1, -1):
        before = run[k]
        if (
            before.problem is not None
            or run[k + 1].taken_at - before.taken_at > max_gap_s
            or before.free_bytes - reserved < need
            or (before.util_pct is not None and before.util_pct >= limit)
        ):
            break
        start, low = before, min(low, before.free_bytes)
    held_s = now - start.taken_at
    return (1, -held_s, gpu.position, low, held_s)


def _words(
    rank: int,
    gpu: _Gpu,
    low: int,
    held_s: float,
    reserved: int,
    needs: str,
    limit: float,
    settle_s: float,
) -> str:
    """One GPU's state, from `_status`, in words."""
    latest = gpu.latest
    name = f"GPU {latest.index}"
    if rank == 5:
        return f"{name}: {latest.problem}"
    if rank == 4:
        return f"{name}: no reading for {int(held_s)} s"
    if rank == 3:
        return f"{name}: {_free(low, reserved)}; needs {needs}"
    if rank == 2:
        return f"{name}: {latest.util_pct:.0f} % busy (limit {limit:g} %)"
    return f"{name}: {_free(low, reserved)} for {int(held_s)} s of {settle_s:g} s; needs {needs}"


def _free(free_bytes: int, reserved: int) -> str:
    if not reserved:
        return f"{_size(free_bytes)} free"
    return f"{_size(max(0, free_bytes - reserved))} free after {_size(reserved)} reserved"


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min"
