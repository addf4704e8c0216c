"""`gpuherd queue add|ls|show|rm|cancel|pause|resume|move`: each prints one line on success.

Bad input and refused actions (a job in the wrong state, an unusable queue database) are one
line on stderr, `gpuherd queue ACTION: what is wrong`, and exit status 2; nothing is changed
then.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from collectors.base import CollectorUnavailable
from gpuherd.common import exit_codes
from gpuherd.present.format import format_size, visible, visible_lines
from gpuherd.queue import listing
from gpuherd.queue.addspec import build_spec
from gpuherd.queue.control import stop_job
from gpuherd.queue.jobs import Job, JobState
from gpuherd.queue.liveness import as_ended, end_seen, settle_job
from gpuherd.queue.options import QueueOptions
from gpuherd.queue.store import QueueError, QueueStore, default_state_dir
from gpuherd.queue.store_rows import DamagedRow
from gpuherd.queue.watch import runner_pid

if TYPE_CHECKING:
    from collectors.machine.nvml import NvmlBackend


def host_gpu_count(backend: NvmlBackend | None = None) -> tuple[int | None, str | None]:
    """The host's GPU count through NVML, or `None` and why it cannot be read (no driver)."""
    # NVML (pynvml and the GPU sampler) is loaded only here: `queue ls`, `add` without
    # `--gpus`, `cancel` and the rest do without it (about 30 ms less to start)
    from collectors.machine.nvml import NvmlSession

    session = NvmlSession(backend)
    try:
        return session.open(), None
    except CollectorUnavailable as error:
        return None, error.msg.split(". ")[0]
    finally:
        session.close()


def _add(store: QueueStore, args: QueueOptions, backend: NvmlBackend | None) -> str:
    if args.slurm:
        from gpuherd.queue.slurm_command import add_slurm

        return add_slurm(store, args)
    host = host_gpu_count(backend) if args.gpus > 1 else (None, None)
    spec, notes = build_spec(args, store, host)
    job = store.add(spec)
    for note in notes:
        print(visible(f"gpuherd queue add: {note}"), file=sys.stderr)
    place = listing.places(store.jobs((JobState.WAITING,))).get(job.id)
    gpus = "1 GPU" if spec.gpus == 1 else f"{spec.gpus} GPUs"
    need = format_size(spec.vram_bytes) if spec.vram_bytes else "0 B (no --vram)"
    said = (
        f"queued job {job.id} ({listing.job_name(job)}) at place {place} in line: needs "
        f"{need} on {gpus}"
    )
    if spec.after is not None:
        said += f", after job {spec.after}"
    return said + ("; the queue is paused" if store.paused() else "")


def _as_seen(store: QueueStore, jobs: list[Job], now: float) -> list[Job]:
    """The jobs, a running one whose supervisor and command are gone shown as it ended.

    Only while no runner holds the queue, and only shown: a runner records the end itself (it
    may retry an OOM) within seconds.
    """
    if runner_pid(store.path.parent) is not None:
        return jobs
    seen = []
    for job in jobs:
        end = end_seen(job)
        seen.append(job if end is None else as_ended(job, end, now))
    return seen


def _ls(store: QueueStore, args: QueueOptions) -> str:
    now = time.time()
    jobs = _as_seen(store, store.jobs(), now)
    from gpuherd.queue.slurm_command import slurm_json, slurm_table

    if args.json:
        return json.dumps(
            listing.jobs_json(jobs, now, store.damaged) + slurm_json(store)[0], indent=1
        )
    return listing.render_table(jobs, now, store.paused(), store.damaged) + slurm_table(store)


def _show(store: QueueStore, args: QueueOptions) -> str:
    now = time.time()
    [job] = _as_seen(store, [store.get(args.job)], now)
    return listing.render_job(
        job, now, listing.places(store.jobs()).get(job.id), show_secrets=args.show_secrets
    )


def _rm(store: QueueStore, args: QueueOptions) -> str:
    job = store.remove(args.job)
    if isinstance(job, DamagedRow):
        return f"removed job {job.job_id} (damaged in the queue database, {job.state!r})"
    kept = f"; its session stays in {job.session_dir}" if job.session_dir else ""
    return f"removed job {job.id} ({listing.job_name(job)}, {job.state.value}){kept}"


def _cancel(store: QueueStore, args: QueueOptions) -> str:
    if args.slurm:
        from gpuherd.queue.slurm_command import cancel_slurm

        return cancel_slurm(store, str(args.job))
    if not args.grace >= 0:
        raise QueueError(f"--grace {args.grace:g}: give seconds, 0 or more")
    job = store.request_cancel(args.job)
    if job.state is JobState.CANCELLED:
        return f"cancelled job {job.id} ({listing.job_name(job)}); it had not started"
    said = stop_job(job, grace_s=args.grace)
    # Only this job: settling others here would take their OOM retry from the runner.
    settled = settle_job(store, store.get(job.id), time.time())
    if settled is not None:
        code = "" if settled.exit_code is None else f", exit code {settled.exit_code}"
        said += f"; job {job.id} is {settled.state.value}{code}"
    return said


def _pause(store: QueueStore, args: QueueOptions) -> str:
    if store.paused():
        return "the queue was already paused"
    store.set_paused(True)
    return "queue paused: running jobs go on; no new job starts until `gpuherd queue resume`"


def _resume(store: QueueStore, args: QueueOptions) -> str:
    if not store.paused():
        return "the queue was not paused"
    store.set_paused(False)
    return "queue resumed"


def _move(store: QueueStore, args: QueueOptions) -> str:
    job = store.move(args.job, args.to)
    place = listing.places(store.jobs((JobState.WAITING,)))
    return f"moved job {job.id} ({listing.job_name(job)}) to place {place[job.id]} of {len(place)}"


_ACTIONS: dict[str, Callable[[QueueStore, QueueOptions], str]] = {
    "ls": _ls,
    "show": _show,
    "rm": _rm,
    "cancel": _cancel,
    "pause": _pause,
    "resume": _resume,
    "move": _move,
}


def run(args: QueueOptions, nvml_backend: NvmlBackend | None = None) -> int:
    """Run `args.queue_command` on the person's queue; 0, or 2 with one line on stderr.

    Args:
        args: the parsed command line.
        nvml_backend: NVML seam for tests (`queue add --gpus K` counts the host's GPUs).
    """
    action = args.queue_command
    try:
        store = QueueStore.open(default_state_dir())
        try:
            if action == "add":
                said = _add(store, args, nvml_backend)
            else:
                said = _ACTIONS[action](store, args)
        finally:
            store.close()
    except QueueError as error:
        print(visible(f"gpuherd queue {action}: {error.msg}"), file=sys.stderr)
        return exit_codes.USAGE
    print(visible_lines(said))  # names, commands, reasons, environments: shown, not obeyed
    return exit_codes.OK
