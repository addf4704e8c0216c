"""The read-only picture of one task that the dashboard and reports show."""

from __future__ import annotations

import os
from dataclasses import dataclass

from gpuherd.tasks.health import Finding
from parsers.vocabulary import KEY_METRICS

SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


@dataclass(frozen=True, slots=True)
class TaskView:
    """One followed log as the tasks panel shows it; an immutable snapshot."""

    task_id: str
    """The followed path (or checkpoint pattern): the row key."""
    label: str
    """A short name: the last two parts of the path."""
    status: str
    """`waiting` (no file yet), `running` (the log written within `active_s`: its file's
    mtime, else a line read; when its writer process is known, while that process lives and
    the last line is at most `stall_after_s` old), `stalled` (the writer lives, but no line
    for longer than `stall_after_s`), `finished` (every process that wrote the log has
    exited, and gpuherd did not start it), `idle` (no writer known and no line for
    `active_s`), `done` (the command gpuherd started exited with 0), `stopped` (it ended on
    SIGINT or SIGTERM), `failed` (it exited with another status, or an error finding came
    after the last metric, then silence or its writer's exit) or `error` (cannot be read)."""
    format: str | None = None
    step: int | None = None
    epoch: float | None = None
    latest: tuple[tuple[str, float], ...] = ()
    """The newest value of every metric, in the order they first appeared."""
    throughput: float | None = None
    throughput_name: str | None = None
    """`throughput/samples_s`, `throughput/tokens_s`, `throughput/it_s` (from the log) or
    `steps_s` (computed from step progress over time)."""
    eta_s: float | None = None
    lines_read: int = 0
    unparsed_lines: int = 0
    too_long_lines: int = 0
    generation: int = 0
    runs: int = 0
    """Runs seen in this log (a rerun that restarted the file adds one)."""
    findings: tuple[Finding, ...] = ()
    """Most serious first."""
    gpu_uuids: tuple[str, ...] = ()
    """GPUs the task runs on, when known."""
    gpu_util_pct: float | None = None
    """Mean utilization of those GPUs at the last tick."""
    last_progress_at: float | None = None
    """When a line was last read."""
    offset_bytes: int = 0
    size_bytes: int | None = None
    error: str | None = None
    """Why the log cannot be read right now (the collector's message)."""
    exit_code: int | None = None
    """The exit status of the command behind the task, once it ended."""
    pids: tuple[int, ...] = ()
    """The task's processes: the GPU processes that write its log or descend from its writer
    (or the queue's job), else the writers themselves; the last ones seen after they exit."""
    writer_pids: tuple[int, ...] = ()
    """Live processes holding the log open for writing (found in `/proc/PID/fd`)."""
    usual_interval_s: float | None = None
    """The median gap between the log's new lines while it is followed live."""
    stall_after_s: float | None = None
    """Silence after which this task reads `stalled` (set while its writer lives)."""
    lost_bytes: int = 0
    """Bytes of the log known lost when it was cut (copytruncate) before they were read."""
    lost_lines: int = 0
    """`lost_bytes` in lines, as the tail estimated them."""

    @property
    def running(self) -> bool:
        """Whether the task makes progress now (its speed and ETA mean something)."""
        return self.status == "running"

    @property
    def worst_severity(self) -> str | None:
        """`error`, `warning`, `info` or `None`: the badge colour."""
        return self.findings[0].severity if self.findings else None

    @property
    def catching_up(self) -> bool:
        """Whether a backlog is still being read."""
        return self.size_bytes is not None and self.offset_bytes < self.size_bytes

    def key_metrics(self) -> tuple[tuple[str, float], ...]:
        """The `KEY_METRICS` this task has, in that order."""
        values = dict(self.latest)
        return tuple((name, values[name]) for name in KEY_METRICS if name in values)


def label_of(task_id: str) -> str:
    """The last two parts of a path: `version_3/metrics.csv`, `exp1/train.log`."""
    parent = os.path.basename(os.path.dirname(task_id))
    return os.path.join(parent, os.path.basename(task_id)) if parent else task_id


def sort_findings(findings: list[Finding]) -> tuple[Finding, ...]:
    """Errors first, then warnings, then information; newest first within each."""
    return tuple(
        sorted(
            findings, key=lambda f: (SEVERITY_ORDER.get(f.severity, 3), -(f.last_seen_at or 0.0))
        )
    )
