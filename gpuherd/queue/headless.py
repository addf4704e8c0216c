"""`gpuherd queue run`: one runner per user, fed by the NVML collector's loop, no Textual."""

from __future__ import annotations

import fcntl
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from collectors.base import (
    CollectorEvent,
    Failed,
    GpuherdError,
    Recovered,
    Sampled,
    Unavailable,
)
from collectors.loop import run_collector
from collectors.nvml import NvmlBackend
from collectors.samples import GpuTick
from gpuherd import exit_codes
from gpuherd.queue.jobs import JobState
from gpuherd.queue.ledger import Ledger
from gpuherd.queue.runner import QueueRunner, Say, _stderr
from gpuherd.queue.store import QueueStore
from gpuherd.sources import gpu_source

RUNNER_LOCK = "runner.lock"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class RunnerLockedError(GpuherdError):
    """Another `gpuherd queue run` of this user holds the state directory."""


@contextmanager
def runner_lock(state_dir: Path) -> Iterator[None]:
    """Hold `<state>/runner.lock` (flock) for the runner's life; RunnerLockedError if taken."""
    state_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = state_dir / RUNNER_LOCK
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "unknown"
            raise RunnerLockedError(
                f"another `gpuherd queue run` (pid {holder}) already runs the queue in "
                f"{state_dir}; stop it first (one runner per user)", title="queue") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # the kernel drops the flock with the last descriptor, even on kill -9


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handle(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {signum: signal.signal(signum, handle) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


class _Feed:
    """The collector loop's sink: each tick feeds the runner, then one `step`."""

    def __init__(self, runner: QueueRunner, stop: threading.Event, say: Say) -> None:
        self.runner, self.stop, self.say = runner, stop, say
        self.unavailable: str | None = None
        self.banner: str | None = None
        """Said at the first reading, so a host without a driver hears only why it stops."""
        self._problem: str | None = None

    def __call__(self, event: CollectorEvent) -> None:
        if isinstance(event, Unavailable):
            self.unavailable = event.error.msg
            self.stop.set()
            return
        if self.banner is not None:
            self.say(self.banner)
            self.banner = None
        if isinstance(event, Sampled) and isinstance(event.sample, GpuTick):
            self.runner.on_gpu_tick(event.sample)
        elif isinstance(event, Failed):
            self.say(f"GPU readings failed: {event.error.msg}; no job starts until they "
                     "come back")
        elif isinstance(event, Recovered):
            self.say("GPU readings are back")
        self.step()

    def step(self) -> None:
        try:
            self.runner.step()
        except GpuherdError as error:  # a ledger made unusable meanwhile, a full disk
            if error.msg != self._problem:
                self.say(f"{error.msg} (retrying every tick)")
            self._problem = error.msg
        else:
            self._problem = None


def run(state_dir: Path, ledger_dir: Path, *, settle_s: float = 10.0,
        margin_bytes: int = 1 << 30, grace_s: float = 120.0, interval_s: float = 1.0,
        nvml_backend: NvmlBackend | None = None, stop: threading.Event | None = None,
        say: Say = _stderr) -> int:
    """Run the queue until SIGINT/SIGTERM/SIGHUP (or `stop`); jobs keep running after it."""
    stop = stop if stop is not None else threading.Event()
    try:
        with runner_lock(state_dir):
            store = QueueStore.open(state_dir)
            try:
                ledger = Ledger(ledger_dir)
                runner = QueueRunner(store, ledger, settle_s=settle_s, margin_bytes=margin_bytes,
                                     grace_s=grace_s, state_dir=state_dir, say=say)
                feed = _Feed(runner, stop, say)
                with _stop_on_signals(stop):
                    runner.step()  # adopt what a previous runner left before the first tick
                    feed.banner = (f"running the queue in {state_dir} (settle {settle_s:g} s, "
                                   f"ledger {ledger_dir}); Ctrl-C stops the runner, not the jobs")
                    run_collector(gpu_source(interval_s, nvml_backend), feed, stop)
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
