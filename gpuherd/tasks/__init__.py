"""Per-task state from followed training logs: latest values, histories, rates, ETA and health.

Headless: the dashboard and the recorder feed `LogBatch` samples and GPU ticks into a
`TaskTracker` on one thread and read immutable `TaskView` snapshots and chart series back.
"""

from __future__ import annotations

from gpuherd.tasks.health import Finding
from gpuherd.tasks.tracker import TaskTracker
from gpuherd.tasks.view import TaskView

__all__ = ["Finding", "TaskTracker", "TaskView"]
