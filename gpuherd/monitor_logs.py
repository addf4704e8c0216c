"""Training logs for the dashboard: discovery, one tail per log, and what is known of each task."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from collectors.base import Collector
from collectors.samples import LogBatch
from collectors.session_format import EVENT, META

if TYPE_CHECKING:
    from collectors.logtail_waker import TailWaker
    from collectors.session_reader import SessionReader

# The tail, its parsers and watchdog are imported by `log_sources`, when there are logs to
# follow: the dashboard's start-up (a first frame within a second) does not pay for them.

DISCOVERY_INTERVAL_S = 10.0
"""Seconds between two scans of the `--log` globs and `--watch` directories."""
COMMAND_TASK = "command"
"""The task name `metrics.csv` gives the recorded command's own output."""


@dataclass(frozen=True)
class TaskHint:
    """What is known about a task from outside its log."""

    task_id: str
    label: str | None = None
    gpu_uuids: tuple[str, ...] = ()
    """GPUs the task ran on, when the session says so."""
    owns_pid: Callable[[int], bool] | None = None
    """Whether a GPU process belongs to the task (the recorded command or its children)."""


@dataclass
class LogSources:
    """The discovery collector, a maker of tails for what it finds, and the shared waker."""

    collectors: list[Collector[Any]]
    tail: Callable[[str], Collector[LogBatch]]
    waker: TailWaker
    hints: list[TaskHint] = field(default_factory=list)

    def close(self) -> None:
        """Stop the waker's observer thread (after the dashboard has exited)."""
        self.waker.close()


def log_sources(logs: Sequence[str], watch: Sequence[str], *, exclude: Sequence[str] = (),
                interval_s: float = DISCOVERY_INTERVAL_S) -> LogSources:
    """Follow `--log` paths and globs and the run files under `--watch` directories.

    `exclude` names directories never scanned (a recording's own session directory, whose
    `command.log` is followed as the `command` task already).
    """
    from collectors.discovery import DiscoveryCollector, LogDiscovery
    from collectors.logtail import LogTailCollector
    from collectors.logtail_waker import TailWaker

    waker = TailWaker()
    discovery = LogDiscovery(logs, watch, exclude=[os.path.abspath(d) for d in exclude])

    def tail(path: str) -> Collector[LogBatch]:
        return LogTailCollector(path, waker=waker)

    return LogSources([DiscoveryCollector(discovery, interval_s)], tail, waker)


def replay_hints(session: SessionReader) -> list[TaskHint]:
    """The recorded command's task: its pid (from the `start` event) and its GPUs.

    The GPUs are those `run_peaks` attributes to the command by its own processes; the pid
    matches the command's rows in `processes.csv` as the replay goes.
    """
    if not session.meta.get(META.command):
        return []
    uuids = tuple(str(p["uuid"]) for p in session.meta.get(META.run_peaks) or ()
                  if isinstance(p, dict) and p.get("uuid") and p.get("method") == "per-process"
                  and p.get("peak_bytes"))
    pid = next((e.get("pid") for e in session.events() if e.get("kind") == EVENT.start), None)
    owns = (lambda p, root=pid: p == root) if isinstance(pid, int) else None
    return [TaskHint(COMMAND_TASK, gpu_uuids=uuids, owns_pid=owns)]
