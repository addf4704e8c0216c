"""The shared harness of the log-tail tests: a threaded loop runner and a detection spy."""

from __future__ import annotations

import queue
import threading
import time

from collectors.base import Failed, Recovered, Sampled, Unavailable
from collectors.logs.logtail_formats import RegistryFormats
from collectors.loop import run_collector


class SpyFormats(RegistryFormats):
    """The real formats, remembering what detection was shown."""

    def __init__(self) -> None:
        self.detected: list[list[str]] = []

    def detect(self, lines, path):
        self.detected.append(list(lines))
        return super().detect(lines, path)


class TailHarness:
    """Runs one collector through the real `run_collector` loop on a thread."""

    def __init__(self, collector) -> None:
        self.collector = collector
        self.queue: queue.Queue = queue.Queue()
        self.stop = threading.Event()
        self.batches = []
        self.failures = []
        self.recoveries = 0
        self.unavailable = []
        self.thread = threading.Thread(
            target=run_collector, args=(collector, self.queue.put, self.stop), daemon=True
        )

    def __enter__(self) -> TailHarness:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.collector.wake()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive()

    def pump_until(self, condition, timeout_s: float = 20.0, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out waiting for {what}; got {self.summary()}")
            try:
                event = self.queue.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            if isinstance(event, Sampled):
                self.batches.append(event.sample)
            elif isinstance(event, Failed):
                self.failures.append(event.error)
            elif isinstance(event, Recovered):
                self.recoveries += 1
            elif isinstance(event, Unavailable):
                self.unavailable.append(event.error)

    def metrics(self):
        """(generation, line_no, step) of every metric received, in order."""
        return [(b.generation, n, m.step) for b in self.batches for n, m in b.metrics]

    def steps(self):
        return [m.step for b in self.batches for _, m in b.metrics]

    def lines_read(self) -> int:
        return sum(b.lines_read for b in self.batches)

    def summary(self) -> str:
        return (
            f"{len(self.batches)} batches, steps={self.steps()[-20:]}, "
            f"lines={self.lines_read()}, failures={[str(f) for f in self.failures[-3:]]}"
        )
