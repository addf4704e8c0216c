"""What a restarted runner takes over: half-launched jobs and running jobs' reservations."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gpuherd.queue.jobs import Job, JobState
from gpuherd.queue.ledger import Ledger
from gpuherd.queue.liveness import LOST_WHILE_LAUNCHING, process_start_time, recording_pid
from gpuherd.queue.store import QueueStore

STOPPED_WHILE_LAUNCHING = LOST_WHILE_LAUNCHING
"""Why a job whose launch a stopped runner cut off waits again."""


def adopt(
    store: QueueStore,
    ledger: Ledger,
    *,
    keys: Callable[[Job], tuple[str, ...]],
    grace_s: float,
    say: Callable[[str], None],
    now: float,
) -> None:
    """Take over after a runner that stopped (even by kill -9); never starts anything.

    A `launching` job without a pid is adopted when its session directory shows a live
    recorder, else put back in line (`QueueStore.unlaunch`): its process (if any) waits at the
    launch gate and gives up, because the job was never committed as running, so its command
    never started and running it later cannot run it twice. A running job still inside the grace
    period gets its reservation back under its own pid, in case the old runner had it under
    the runner's pid (which died with it).
    """
    for job in store.jobs([JobState.LAUNCHING]):
        if job.pid is not None:
            continue
        pid = recording_pid(Path(job.session_dir)) if job.session_dir else None
        started = process_start_time(pid) if pid is not None else None
        if (
            pid is not None
            and started is not None
            and store.mark_running(job.id, pid, started, now)
        ):
            say(f"adopted job {job.id}: its recording runs (pid {pid})")
        elif store.unlaunch(job.id, STOPPED_WHILE_LAUNCHING):
            say(f"job {job.id} is {STOPPED_WHILE_LAUNCHING}")
    running = [
        j
        for j in store.jobs([JobState.RUNNING])
        if j.pid is not None
        and j.pid_start_time is not None
        and j.started_at is not None
        and j.started_at + grace_s > now
    ]
    if not running:
        return
    with ledger.locked() as view:
        held = {r.job for r in view.live()}
        for job in running:
            assert job.pid is not None and job.pid_start_time is not None
            assert job.started_at is not None
            for key, uuid in zip(keys(job), job.gpu_uuids, strict=False):
                if key not in held:
                    view.reserve(
                        uuid,
                        job.spec.vram_bytes,
                        key,
                        job.pid,
                        job.pid_start_time,
                        job.started_at + grace_s,
                    )
