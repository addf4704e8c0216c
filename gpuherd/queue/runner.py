"""The queue runner: a sink of GPU ticks that settles, adopts, reserves and launches jobs.

One `step` is idempotent and safe after a kill -9 of a previous runner: everything it knows
comes from the queue database, the shared ledger and the processes on the host. The order
for one launch is: under the ledger's lock, re-decide with every user's live reservations,
`mark_launching` (a compare-and-set), reserve; then start the job's process held at its gate,
`mark_running`, and open the gate (see `gpuherd.queue.launch`). A job is never started twice.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from collectors.base import GpuherdError
from collectors.machine.nvml import NvmlBackend
from collectors.samples import GpuTick
from collectors.session.session_format import COMMAND_EXIT_FILE
from gpuherd.common import exit_codes
from gpuherd.common.queue_defaults import GRACE_S, MARGIN_BYTES, SETTLE_S
from gpuherd.engine.threads import run_here
from gpuherd.present.format import GIB, format_size
from gpuherd.proc.tree import ProcessTree
from gpuherd.queue.adopt import adopt
from gpuherd.queue.headless import Feed, Say, runner_lock, say_stderr, stop_on_signals
from gpuherd.queue.headroom import HeadroomWindow, Launch, decide
from gpuherd.queue.jobs import Job, JobState
from gpuherd.queue.launch import Started, session_dir_for, start
from gpuherd.queue.ledger import Ledger, LedgerView
from gpuherd.queue.liveness import process_start_time, read_job_end, settle_ended
from gpuherd.queue.store import QueueError, QueueStore, default_state_dir
from gpuherd.sources import gpu_source

OOM_FACTOR = 1.5
OOM_MIN_EXTRA_BYTES = 2 * GIB
WAIT_REASON_EVERY_S = 2.0
"""A changed wait reason is written at most this often (free memory moves every tick)."""
PAUSED = "the queue is paused (gpuherd queue resume)"
MAX_LAUNCHES_PER_STEP = 16
"""Launches in one step at most; the rest follow at the next tick."""


def oom_retry_need(need_bytes: int) -> int:
    """The need of an OOM retry: 1.5 times the old one, and at least 2 GiB more."""
    return max(int(need_bytes * OOM_FACTOR), need_bytes + OOM_MIN_EXTRA_BYTES)


@dataclass
class _Planned:
    job: Job
    launch: Launch
    session_dir: Path
    keys: tuple[str, ...]
    expires_at: float


class QueueRunner:
    """Launches waiting jobs when their GPUs have held room for the settle period.

    No threads and no NVML of its own: the caller feeds it ticks (`on_gpu_tick`) and calls
    `step`, both from the thread that opened `store`.
    """

    def __init__(
        self,
        store: QueueStore,
        ledger: Ledger,
        *,
        settle_s: float = SETTLE_S,
        margin_bytes: int = MARGIN_BYTES,
        grace_s: float = GRACE_S,
        clock: Callable[[], float] = time.time,
        state_dir: Path | None = None,
        say: Say = say_stderr,
    ) -> None:
        self.store, self.ledger, self.say = store, ledger, say
        self.settle_s, self.margin_bytes, self.grace_s = settle_s, margin_bytes, grace_s
        self.clock = clock
        self.state_dir = state_dir if state_dir is not None else default_state_dir()
        self.window = HeadroomWindow(settle_s)
        digest = hashlib.sha1(str(self.state_dir.resolve()).encode()).hexdigest()[:10]
        self.tag = f"q{os.getuid()}-{digest}"
        """Prefix of this queue's ledger entries (`<tag>:<job>:<attempt>:<k>`): opaque ids."""
        self._tick: GpuTick | None = None
        self._children: dict[int, Started] = {}
        self._trees: dict[int, ProcessTree] = {}
        self._released: set[str] = set()
        self._reasons: dict[int, tuple[str | None, float]] = {}
        self._adopted = False
        self._damaged_named: set[tuple[int, str]] = set()
        self._pid, self._pid_start = os.getpid(), process_start_time(os.getpid()) or 0.0

    @property
    def unreaped(self) -> tuple[Started, ...]:
        """The launches this runner started whose processes it has not reaped yet.

        A job outlives its runner by design: whoever ends the runner's process decides
        about them.
        """
        return tuple(self._children.values())

    def key(self, job_id: int, attempt: int, k: int) -> str:
        """The ledger id of a job's reservation on its k-th GPU."""
        return f"{self.tag}:{job_id}:{attempt}:{k}"

    def keys(self, job: Job, attempt: int | None = None) -> tuple[str, ...]:
        """Every ledger id of one launch of `job`."""
        n = attempt if attempt is not None else job.attempts
        return tuple(self.key(job.id, n, k) for k in range(max(1, job.spec.gpus)))

    def on_gpu_tick(self, tick: GpuTick) -> None:
        """Keep the tick's readings for the headroom rule and for measuring running jobs."""
        self.window.add(HeadroomWindow.readings_from_tick(tick))
        self._tick = tick

    def step(self) -> None:
        """Adopt after a restart, settle ended jobs, release, decide and launch."""
        now = self.clock()
        for pid in [pid for pid, s in self._children.items() if s.process.poll() is not None]:
            del self._children[pid]  # reaped: a zombie would still look alive
        if not self._adopted:
            # First, so a job a killed runner left launching is judged here, with its reason,
            # not by the generic timeout of settle_ended.
            self._adopted = True
            adopt(
                self.store, self.ledger, keys=self.keys, grace_s=self.grace_s, say=self.say, now=now
            )
        ended = settle_ended(self.store, now)
        reached = self._usage_reached()
        plan, launched = self._next_launch(now, reached), 0
        while plan is not None:
            self._launch(plan)
            launched += 1
            # Never claim one more than is launched: a claimed job would stay `launching`.
            plan = (
                self._next_launch(self.clock(), set()) if launched < MAX_LAUNCHES_PER_STEP else None
            )
        for job in ended:
            self._retry_oom(job)

    # --- bookkeeping under the ledger lock -------------------------------------------------

    def _next_launch(self, now: float, reached: set[str]) -> _Planned | None:
        """Under the ledger lock: drop stale entries, decide, claim and reserve one launch.

        One launch at a time, each decided again with the reservation of the one before, so
        at most one job is ever `launching` (a runner killed then costs at most that one).
        """
        jobs = self.store.jobs()
        self._name_damaged()
        active = {j.id: j for j in jobs if j.state in (JobState.LAUNCHING, JobState.RUNNING)}
        waiting = [j for j in jobs if j.state is JobState.WAITING]
        with self.ledger.locked() as view:
            live = []
            for reservation in view.live(gpu_totals=self._gpu_totals()):
                if self._stale(reservation.job, active, reached):
                    view.release(reservation.job)
                    self._released.add(reservation.job)
                else:
                    live.append(reservation)
            if not waiting:
                return None
            if self.store.paused():
                for job in waiting:
                    self._wait_reason(job.id, PAUSED, now)
                return None
            decision = decide(
                self.window, jobs, live, now, margin_bytes=self.margin_bytes, settle_s=self.settle_s
            )
            for job_id, why in decision.waiting.items():
                self._wait_reason(job_id, why, now)
            by_id = {j.id: j for j in jobs}
            for launch in decision.launches:
                plan = self._claim(view, by_id[launch.job_id], launch, now)
                if plan is not None:
                    return plan
        return None

    def _name_damaged(self) -> None:
        """Say once per row which stored rows are skipped as damaged (the rest go on)."""
        for row in self.store.damaged:
            if (row.job_id, row.problem) not in self._damaged_named:
                self._damaged_named.add((row.job_id, row.problem))
                self.say(
                    f"job {row.job_id} is damaged in the queue database ({row.problem}); "
                    f"it is skipped (gpuherd queue rm {row.job_id} removes it)"
                )

    def _gpu_totals(self) -> dict[str, int]:
        """Total memory per GPU UUID in the last reading (bounds what a reservation may claim)."""
        devices = self._tick.devices if self._tick is not None else ()
        return {d.uuid: d.memory_total_bytes for d in devices if d.memory_total_bytes is not None}

    def _stale(self, key: str, active: dict[int, Job], reached: set[str]) -> bool:
        """Whether one of this queue's ledger entries should go (other users' never do)."""
        parts = key.split(":")
        if parts[0] != self.tag or len(parts) != 4:
            return False
        job = active.get(int(parts[1])) if parts[1].isdigit() else None
        return job is None or str(job.attempts) != parts[2] or key in reached

    def _claim(self, view: LedgerView, job: Job, launch: Launch, now: float) -> _Planned | None:
        attempt = job.attempts + 1
        session = session_dir_for(self.state_dir, job, attempt)
        if not self.store.mark_launching(
            job.id, launch.gpu_uuids, launch.gpu_indices, str(session)
        ):
            return None  # changed meanwhile (cancelled, removed): nothing was reserved
        keys = self.keys(job, attempt)
        expires_at = now + self.grace_s
        for key, uuid in zip(keys, launch.gpu_uuids, strict=False):
            view.reserve(uuid, job.spec.vram_bytes, key, self._pid, self._pid_start, expires_at)
        self._reasons.pop(job.id, None)
        return _Planned(job, launch, session, keys, expires_at)

    def _launch(self, plan: _Planned) -> None:
        job = plan.job
        try:
            started = start(job, plan.session_dir, plan.launch.gpu_uuids, self.state_dir)
        except QueueError as error:
            self.store.mark_ended(
                job.id,
                JobState.FAILED,
                None,
                self.clock(),
                None,
                reason=f"could not start: {error.msg}",
            )
            self._release(plan.keys)
            self.say(f"job {job.id} failed to start: {error.msg}")
            return
        committed = self.store.mark_running(job.id, started.pid, started.start_time, self.clock())
        started.open_gate()
        if not committed:  # someone ended it meanwhile: the gated process gives up by itself
            self._release(plan.keys)
            return
        self._children[started.pid] = started
        with self.ledger.locked() as view:  # the reservation now lives as long as the job
            for key, uuid in zip(plan.keys, plan.launch.gpu_uuids, strict=False):
                view.release(key)
                view.reserve(
                    uuid, job.spec.vram_bytes, key, started.pid, started.start_time, plan.expires_at
                )
        gpus = ", ".join(str(i) for i in plan.launch.gpu_indices)
        self.say(
            f"started job {job.id} on GPU {gpus} (pid {started.pid}, session {plan.session_dir})"
        )

    def _release(self, keys: tuple[str, ...]) -> None:
        with self.ledger.locked() as view:
            for key in keys:
                view.release(key)

    # --- measuring, reasons, retries ------------------------------------------------------

    def _usage_reached(self) -> set[str]:
        """Ledger ids of running jobs done with their reservation.

        Either the job's processes (the recorder's tree) hold at least the reserved memory on
        that GPU now, or its command has ended (its exit record is written): it will not
        allocate any more, though its recorder may still be closing the session.
        """
        tick, out = self._tick, set[str]()
        devices = {d.uuid: d for d in tick.devices} if tick is not None else {}
        running = self.store.jobs([JobState.RUNNING])
        alive = {job.pid for job in running}
        self._trees = {pid: tree for pid, tree in self._trees.items() if pid in alive}
        for job in running:
            if job.pid is None:
                continue
            held = [
                (k, uuid)
                for k, uuid in zip(self.keys(job), job.gpu_uuids, strict=False)
                if k not in self._released
            ]
            if not held:
                continue
            if job.session_dir and (Path(job.session_dir) / COMMAND_EXIT_FILE).exists():
                out.update(k for k, _ in held)
                continue
            tree = self._trees.setdefault(job.pid, ProcessTree(job.pid))
            for key, uuid in held:
                device = devices.get(uuid)
                if device is None or not device.processes:
                    continue  # not listed (another PID namespace): the grace period ends it
                used = sum(
                    p.used_memory_bytes or 0 for p in device.processes if tree.contains(p.pid)
                )
                if used >= job.spec.vram_bytes:
                    out.add(key)
        return out

    def _wait_reason(self, job_id: int, reason: str | None, now: float) -> None:
        last, at = self._reasons.get(job_id, (None, 0.0))
        if reason == last or (last is not None and now - at < WAIT_REASON_EVERY_S):
            return
        self.store.set_wait_reason(job_id, reason)
        self._reasons[job_id] = (reason, now)

    def _retry_oom(self, job: Job) -> None:
        """Requeue once, with a larger need, a `--retry-oom` job that died of CUDA OOM."""
        if job.state is not JobState.FAILED or not job.spec.retry_oom or job.attempts != 1:
            return
        end = read_job_end(Path(job.session_dir)) if job.session_dir else None
        if end is None or not end.oom:
            return
        need = oom_retry_need(job.spec.vram_bytes)
        self.store.requeue(job.id, need)
        self.say(f"job {job.id} ran out of GPU memory: queued again needing {format_size(need)}")


def run_headless(
    state_dir: Path,
    ledger_dir: Path,
    *,
    settle_s: float = SETTLE_S,
    margin_bytes: int = MARGIN_BYTES,
    grace_s: float = GRACE_S,
    interval_s: float = 1.0,
    nvml_backend: NvmlBackend | None = None,
    stop: threading.Event | None = None,
    say: Say = say_stderr,
) -> int:
    """`gpuherd queue run`: run the queue until SIGINT/SIGTERM/SIGHUP (or `stop`).

    Takes the runner lock, builds the GPU source through the composition root and runs its
    loop on this thread, feeding every tick to a `QueueRunner`. Jobs keep running after it.
    Returns 0, 2 (another runner, an unusable state directory or ledger) or 3 (no GPU).
    """
    stop = stop if stop is not None else threading.Event()
    try:
        with runner_lock(state_dir):
            store = QueueStore.open(state_dir)
            try:
                ledger = Ledger(ledger_dir)
                runner = QueueRunner(
                    store,
                    ledger,
                    settle_s=settle_s,
                    margin_bytes=margin_bytes,
                    grace_s=grace_s,
                    state_dir=state_dir,
                    say=say,
                )
                feed = Feed(runner, stop, say)
                with stop_on_signals(stop):
                    runner.step()  # adopt what a previous runner left before the first tick
                    feed.banner = (
                        f"running the queue in {state_dir} (settle {settle_s:g} s, "
                        f"ledger {ledger_dir}); Ctrl-C stops the runner, not the jobs"
                    )
                    run_here(gpu_source(interval_s, nvml_backend), feed, stop)
                left = len(store.jobs([JobState.RUNNING, JobState.LAUNCHING]))
            finally:
                store.close()
    except GpuherdError as error:
        say(error.msg)
        return exit_codes.USAGE
    if feed.unavailable is not None:
        say(feed.unavailable)
        return exit_codes.NO_SOURCE
    say(f"runner stopped; {left} running job(s) keep running")
    return exit_codes.OK
