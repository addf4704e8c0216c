"""`gpuherd --queue`: the queue runner as one more sink of the dashboard's GPU ticks.

The runner takes the same per-user lock as `gpuherd queue run`, so a second runner of either
kind refuses. Its work (the ledger's lock, SQLite, starting processes) runs on a thread of its
own, never on the UI thread nor on the GPU collector's; the GPU collector's events reach it
through the dashboard's tap. Jobs run in sessions of their own, so they outlive the dashboard.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from collectors.base import CollectorEvent
from gpuherd.common.queue_defaults import GRACE_S, MARGIN_BYTES, SETTLE_S
from gpuherd.queue.headless import Feed, runner_lock
from gpuherd.queue.jobs import JobState
from gpuherd.queue.ledger import Ledger
from gpuherd.queue.runner import QueueRunner
from gpuherd.queue.store import QueueStore

KEPT_LINES = 50
"""What the runner said, kept for the panel (the last line) and for stderr after the exit."""
STOP_WAIT_S = 15.0
"""At exit, how long a step under way (a launch, a busy database) gets to finish."""


class BesideRunner:
    """A `QueueRunner` fed by the dashboard: `tap` on collector threads, work on its own.

    Args:
        gpu_source: The name of the GPU collector whose events feed the runner.
    """

    def __init__(self, gpu_source: str) -> None:
        self.gpu_source = gpu_source
        self.lines: deque[str] = deque(maxlen=KEPT_LINES)
        self._lock = threading.Lock()
        self._events: queue.SimpleQueue[CollectorEvent | None] = queue.SimpleQueue()
        self._stop = threading.Event()
        self._feed: Feed | None = None
        self._thread = threading.Thread(target=self._loop, name="queue-runner", daemon=True)

    def say(self, text: str) -> None:
        """Keep one line of the runner's (any thread)."""
        with self._lock:
            self.lines.append(text)

    def note(self) -> str | None:
        """The last line the runner said."""
        with self._lock:
            return self.lines[-1] if self.lines else None

    def tap(self, event: CollectorEvent) -> None:
        """The dashboard's tap, on a collector's thread: pass on the GPU collector's events."""
        if event.source == self.gpu_source and not self._stop.is_set():
            self._events.put(event)

    def start(self, runner: QueueRunner) -> None:
        """Run `runner` (its store open, the runner lock held) on the thread from now on."""
        self._feed = Feed(runner, self._stop, self.say)
        self._thread.start()

    def stop(self, timeout_s: float = STOP_WAIT_S) -> bool:
        """Stop the thread after its current step; whether it ended within `timeout_s`."""
        self._stop.set()
        self._events.put(None)
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def _loop(self) -> None:
        assert self._feed is not None
        try:
            self._feed.step()  # adopt what a previous runner left before the first tick
            while not self._stop.is_set():
                event = self._events.get()
                if event is None:
                    break
                self._feed(event)
        except BaseException as error:  # a bug: said on the panel and after the exit
            self._stop.set()
            self.say(f"the queue runner stopped: {error!r}")
            return
        if self._feed.unavailable is not None:
            self.say(f"no GPU readings ({self._feed.unavailable}): the queue does not run")


@contextmanager
def run_beside(
    state_dir: Path,
    ledger_dir: Path,
    gpu_source: str,
    *,
    settle_s: float = SETTLE_S,
    margin_bytes: int = MARGIN_BYTES,
    grace_s: float = GRACE_S,
) -> Iterator[BesideRunner]:
    """Hold the runner lock and run the queue while the `with` block (the dashboard) runs.

    Raises:
        RunnerLockedError: another runner of this user holds the state directory.
        QueueError: the state directory, the database or the ledger cannot be used.
    """
    with ExitStack() as stack:
        stack.enter_context(runner_lock(state_dir))
        store = QueueStore.open(state_dir)
        stack.callback(store.close)
        beside = BesideRunner(gpu_source)
        ledger = Ledger(ledger_dir, on_warning=beside.say)
        runner = QueueRunner(
            store,
            ledger,
            settle_s=settle_s,
            margin_bytes=margin_bytes,
            grace_s=grace_s,
            state_dir=state_dir,
            say=beside.say,
        )
        beside.say(
            f"this dashboard runs the queue (settle {settle_s:g} s, ledger {ledger_dir})"
            "; q leaves it, jobs keep running"
        )
        beside.start(runner)
        try:
            yield beside
        finally:
            if beside.stop():  # before the store closes: no step is under way any more
                left = len(store.jobs([JobState.RUNNING, JobState.LAUNCHING]))
                beside.say(f"runner stopped; {left} running job(s) keep running")
            else:
                beside.say("the queue runner did not stop in time; abandoned at exit")
