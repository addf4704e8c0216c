"""The queue runner's process plumbing: its lock, its signals, and the sink of its GPU loop."""

from __future__ import annotations

import fcntl
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Protocol

from collectors.base import (
    CollectorEvent,
    Failed,
    GpuherdError,
    Recovered,
    Sampled,
    Unavailable,
)
from collectors.samples import GpuTick
from gpuherd.present.format import visible

Say = Callable[[str], None]


def say_stderr(text: str) -> None:
    """One line for the person running the queue."""
    print(f"gpuherd: queue: {visible(text)}", file=sys.stderr, flush=True)


class TickSink(Protocol):
    """What the loop feeds: the queue runner."""

    def on_gpu_tick(self, tick: GpuTick) -> None:
        """Take one GPU reading."""

    def step(self) -> None:
        """Do one round of work."""


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
                f"{state_dir}; stop it first (one runner per user)",
                title="queue",
            ) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass  # a full disk: the pid only names the holder; the flock itself holds
        yield
    finally:
        os.close(fd)  # the kernel drops the flock with the last descriptor, even on kill -9


@contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP set `stop` (on the main thread; elsewhere nothing changes)."""
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


class Feed:
    """The collector loop's sink: each tick feeds the runner, then one `step`."""

    def __init__(self, runner: TickSink, stop: threading.Event, say: Say) -> None:
        self.runner, self.stop, self.say = runner, stop, say
        self.unavailable: str | None = None
        self.banner: str | None = None
        """Said at the first reading, so a host without a driver hears only why it stops."""
        self._problem: str | None = None

    def __call__(self, event: CollectorEvent) -> None:
        """Take one event of the GPU loop: a tick feeds the runner; every event steps it."""
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
            self.say(f"GPU readings failed: {event.error.msg}; no job starts until they come back")
        elif isinstance(event, Recovered):
            self.say("GPU readings are back")
        self.step()

    def step(self) -> None:
        """One runner step; an error of the ledger or the queue is said once, then retried."""
        try:
            self.runner.step()
        except GpuherdError as error:  # a ledger made unusable meanwhile, a full disk
            if error.msg != self._problem:
                self.say(f"{error.msg} (retrying every tick)")
            self._problem = error.msg
        else:
            self._problem = None
