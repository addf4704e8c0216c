"""A small stand-in for `parsers/` and the shared harness of the log-tail tests.

The stand-in keeps the tail tests independent of the exact metric names the real parsers pick:
`step=N loss=X` lines become `train/loss` at step N; `value=bad` raises ValueError.
"""

from __future__ import annotations

import json
import math
import os
import queue
import re
import threading
import time

from collectors.base import Failed, Recovered, Sampled, Unavailable
from collectors.loop import run_collector
from parsers.model import LogFinding, LogMetric

_KV = re.compile(r"step=(\S+) loss=(\S+)")


class StandinParser:
    def __init__(self) -> None:
        self.fed = 0

    def feed(self, line: str) -> LogMetric | None:
        self.fed += 1
        match = _KV.search(line)
        if match is None:
            return None
        return LogMetric((("train/loss", float(match.group(2))),), step=int(match.group(1)))

    def reset(self) -> None:
        self.fed = 0


class StandinFormats:
    def __init__(self) -> None:
        self.detected: list[list[str]] = []

    def detect(self, lines, path):
        self.detected.append(list(lines))
        return "kv"

    def make_parser(self, name):
        if name != "kv":
            raise KeyError(name)
        return StandinParser()

    def document_format(self, path, forced):
        if forced == "trainer_state" or os.path.basename(path) == "trainer_state.json":
            return "trainer_state"
        return None

    def parse_document(self, name, text):
        history = json.loads(text)["log_history"]
        return [LogMetric(tuple((k, float(v)) for k, v in row.items() if k != "step"),
                          step=row.get("step")) for row in history]

    def scan_line(self, line):
        if "out of memory" in line:
            return LogFinding("oom", line)
        return None

    def findings_from_metric(self, metric):
        return [LogFinding("nan", f"{k}={v}") for k, v in metric.values if math.isnan(v)]


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
        self.thread = threading.Thread(target=run_collector,
                                       args=(collector, self.queue.put, self.stop), daemon=True)

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
        return (f"{len(self.batches)} batches, steps={self.steps()[-20:]}, "
                f"lines={self.lines_read()}, failures={[str(f) for f in self.failures[-3:]]}")
