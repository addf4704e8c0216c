"""Turn log batches and GPU ticks into per-task state: latest values, histories, rates, health."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from collectors.samples import GpuTick, LogBatch
from gpuherd.tasks.health import (
    LIVE_ONLY_KINDS,
    Finding,
    gpu_findings,
    judge_histories,
    severity_of,
)
from gpuherd.tasks.line_clock import LineClock
from gpuherd.tasks.series import DEFAULT_CHART_POINTS, DEFAULT_WINDOW_POINTS, MetricSeries, StepRate
from gpuherd.tasks.view import TaskView, label_of, sort_findings
from parsers.model import LogFinding, LogMetric
from parsers.vocabulary import IT_S, THROUGHPUT_NAMES, TOTAL_STEP_NAMES

if TYPE_CHECKING:
    from collectors.machine.writers import WritersTick


class OwnerHint(Protocol):
    """A task known from outside its log, with a way to tell its processes (`TaskHint`)."""

    @property
    def task_id(self) -> str:
        """The task the hint is about."""
        ...

    @property
    def owns_pid(self) -> Callable[[int], bool] | None:
        """Whether a GPU process belongs to the task, when that can be told."""
        ...


STOPPED_EXIT_CODES = frozenset({128 + 2, 128 + 15})
"""Exit statuses of a command stopped on purpose: SIGINT (Ctrl-C) and SIGTERM. SIGKILL (137)
may be the kernel's OOM killer, so it reads as failed."""
ERROR_QUIET_S = 5.0
"""A log whose last news is an error (a traceback, a CUDA OOM) and that has not been written
for this long, with no live writer known, has failed: its short-lived writer may never have
been seen, and `running` for another minute would be wrong. A log that writes more slowly
than every second gets five of its usual intervals instead (`_error_quiet_s`): a caught
traceback before a slow step is no end."""
REPLAY_PROBE = 8
"""First metrics of a file generation remembered to tell a rewrite from a new run."""


@dataclass
class _Run:
    """What one run in a log has shown; replaced when the log restarts with a new run."""

    series: dict[str, MetricSeries] = field(default_factory=dict)
    latest: dict[str, float] = field(default_factory=dict)
    latest_at: dict[str, float] = field(default_factory=dict)
    log_findings: dict[str, Finding] = field(default_factory=dict)
    rate: StepRate = field(default_factory=StepRate)
    step: int | None = None
    epoch: float | None = None
    max_position: float | None = None
    first: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    last_metric_at: float | None = None
    last_metric_line: tuple[int, int] | None = None
    """(generation, line) of the newest metric."""
    end_line: tuple[int, int] | None = None
    """(generation, line) of the newest line that said the run ended (`Training completed.`)."""


@dataclass
class _Task:
    task_id: str
    label: str
    run: _Run = field(default_factory=_Run)
    runs: int = 1
    format: str | None = None
    lines_read: int = 0
    unparsed: int = 0
    too_long: int = 0
    lost_bytes: int = 0
    lost_lines: int = 0
    generation: int = 0
    waiting: bool = True
    offset: int = 0
    size: int | None = None
    last_progress_at: float | None = None
    modified_at: float | None = None
    exit_code: int | None = None
    error: str | None = None
    replay: tuple[float, list[tuple[float, dict[str, float]]]] | None = None
    replaying: bool = False
    window_findings: list[Finding] = field(default_factory=list)
    gpu_findings: list[Finding] = field(default_factory=list)
    health_dirty: bool = False
    gpu_uuids: tuple[str, ...] = ()
    pids: frozenset[int] = frozenset()
    gpu_utils: deque[float] = field(default_factory=lambda: deque(maxlen=60))
    gpu_util: float | None = None
    num_classes: int | None = None
    total_steps: int | None = None
    writer_pids: tuple[int, ...] = ()
    had_writer: bool = False
    last_writers: tuple[int, ...] = ()
    lines: LineClock = field(default_factory=LineClock)


class TaskTracker:
    """Per-task state built from `LogBatch` samples (and GPU ticks); no I/O, no clock.

    Owned by one thread (the UI thread in the dashboard); "now" is the newest timestamp fed in.
    Memory per task is bounded: ring buffers of `chart_points` and `window_points` per metric.
    """

    def __init__(
        self,
        *,
        chart_points: int = DEFAULT_CHART_POINTS,
        window_points: int = DEFAULT_WINDOW_POINTS,
        active_s: float = 60.0,
        gpu_window: int = 60,
    ) -> None:
        self.chart_points = chart_points
        self.window_points = window_points
        self.active_s = active_s
        self.gpu_window = gpu_window
        self.now: float | None = None
        """The newest time seen in a batch or tick."""
        self._tasks: dict[str, _Task] = {}

    @property
    def task_ids(self) -> tuple[str, ...]:
        """Every task, in the order they were first seen."""
        return tuple(self._tasks)

    def add_batch(self, batch: LogBatch) -> None:
        """Fold one batch of a followed log into its task."""
        task = self._task(batch.path)
        self._tick(batch.taken_at)
        task.error = None
        task.waiting = batch.waiting
        task.format = batch.format or task.format
        task.label = batch.label or task.label
        task.offset, task.size = batch.offset_bytes, batch.size_bytes
        if batch.starts_generation and not batch.rotated:
            task.replay = (task.run.max_position or -math.inf, list(task.run.first))
            task.replaying = False
        if batch.generation != task.generation:
            task.run.first = []
        task.generation = batch.generation
        task.lines_read += batch.lines_read
        task.unparsed += batch.unparsed_lines
        task.too_long += batch.too_long_lines
        task.lost_bytes += batch.lost_bytes
        task.lost_lines += batch.lost_lines_estimate or 0
        if batch.lines_read:
            task.last_progress_at = batch.taken_at
        if batch.modified_at is not None:
            task.modified_at = batch.modified_at
        catching_up = batch.size_bytes is not None and batch.offset_bytes < batch.size_bytes
        if batch.lines_read and not catching_up:
            task.lines.arrived(batch.taken_at if batch.modified_at is None else batch.modified_at)
        if batch.ended_with is not None:
            task.exit_code = batch.ended_with
        for _line_no, metric in batch.metrics:
            self._add_metric(task, metric, batch.taken_at, catching_up)
        if batch.metrics:
            task.run.last_metric_line = (batch.generation, batch.metrics[-1][0])
        if batch.run_end_line is not None:
            task.run.end_line = (batch.generation, batch.run_end_line)
        for line_no, finding in batch.findings:
            self._add_log_finding(task, line_no, finding, batch.taken_at)

    def ended(self, task_id: str, exit_code: int) -> None:
        """The command whose output the task is has exited with `exit_code`."""
        self._task(task_id).exit_code = exit_code

    def writers_seen(
        self, task_id: str, at: float, writer_pids: Iterable[int], gpu_pids: Iterable[int] = ()
    ) -> None:
        """Who writes the task's log, as `/proc` showed it at `at`.

        `writer_pids` hold the log open for writing; `gpu_pids` are the GPU processes among
        them or under them. No writer pids after some were seen: they have all exited (the
        task is `finished`).
        """
        task = self._task(task_id)
        self._tick(at)
        task.writer_pids = tuple(writer_pids)
        gpus = frozenset(gpu_pids)
        if task.writer_pids:
            task.had_writer, task.last_writers = True, task.writer_pids
            if gpus:
                task.pids = gpus

    def collector_failed(self, task_id: str, message: str) -> None:
        """The log cannot be read now (directory, permission, ...)."""
        self._task(task_id).error = message

    def collector_recovered(self, task_id: str) -> None:
        """The log can be read again."""
        self._task(task_id).error = None

    def associate(
        self,
        task_id: str,
        *,
        gpu_uuids: Iterable[str] | None = None,
        pids: Iterable[int] | None = None,
        num_classes: int | None = None,
        total_steps: int | None = None,
        label: str | None = None,
    ) -> None:
        """Say what is known about a task from outside its log (the queue knows its pid)."""
        task = self._task(task_id)
        if gpu_uuids is not None:
            task.gpu_uuids = tuple(gpu_uuids)
        if pids is not None:
            task.pids = frozenset(pids)
        task.num_classes = num_classes if num_classes is not None else task.num_classes
        task.total_steps = total_steps if total_steps is not None else task.total_steps
        task.label = label or task.label

    def associate_owned_pids(self, tick: GpuTick, hints: Iterable[OwnerHint]) -> None:
        """Give each hinted task the pids of this tick that its `owns_pid` claims."""
        if not self.task_ids:
            return
        known = set(self.task_ids)
        for hint in hints:
            if hint.owns_pid is None or hint.task_id not in known:
                continue
            pids = {
                p.pid for gpu in tick.devices for p in gpu.processes or () if hint.owns_pid(p.pid)
            }
            if pids:
                self.associate(hint.task_id, pids=pids)

    def add_writers(self, found: WritersTick) -> None:
        """The processes found writing followed logs, for the tasks still followed."""
        known = set(self.task_ids)
        for log in found.logs:
            if log.task_id in known:
                self.writers_seen(log.task_id, found.taken_at, log.writer_pids, log.gpu_pids)

    def add_gpu_tick(self, tick: GpuTick) -> None:
        """Feed GPU utilization to the tasks that run on a known GPU (by uuid or by pid)."""
        self._tick(tick.taken_at)
        for task in self._tasks.values():
            _place(task, tick)
            utils = [
                d.gpu_util_pct
                for d in tick.devices
                if d.uuid in task.gpu_uuids and d.gpu_util_pct is not None
            ]
            task.gpu_util = sum(utils) / len(utils) if utils else None
            if task.gpu_util is None or not self._running(task):
                task.gpu_utils.clear()
                task.gpu_findings = []
                continue
            task.gpu_utils.append(task.gpu_util)
            task.gpu_findings = [self._finding(f, None) for f in gpu_findings(task.gpu_utils)]

    def place(self, tick: GpuTick) -> None:
        """Map tasks whose pids just became known to their GPUs in `tick` (no history fed)."""
        for task in self._tasks.values():
            _place(task, tick)

    def remove(self, task_id: str) -> None:
        """Forget a task (its log is no longer followed)."""
        self._tasks.pop(task_id, None)

    def view(self, task_id: str) -> TaskView | None:
        """The task as the panel shows it, or `None` for an unknown id."""
        task = self._tasks.get(task_id)
        return None if task is None else self._view(task)

    def views(self) -> tuple[TaskView, ...]:
        """Every task's view, in first-seen order."""
        return tuple(self._view(task) for task in self._tasks.values())

    def series(self, task_id: str, name: str) -> tuple[tuple[float, float], ...]:
        """Chart points `(x, value)` of one metric (x is the step, epoch or index)."""
        task = self._tasks.get(task_id)
        found = task.run.series.get(name) if task else None
        return found.points() if found is not None else ()

    def series_x_kind(self, task_id: str, name: str) -> str | None:
        """What the chart's x axis is for this metric: `step`, `epoch` or `index`."""
        task = self._tasks.get(task_id)
        found = task.run.series.get(name) if task else None
        return found.x_kind if found is not None else None

    def metric_names(self, task_id: str) -> tuple[str, ...]:
        """Every metric the task's current run has reported, in first-seen order."""
        task = self._tasks.get(task_id)
        return tuple(task.run.series) if task else ()

    def _task(self, task_id: str) -> _Task:
        task = self._tasks.get(task_id)
        if task is None:
            task = self._tasks[task_id] = _Task(task_id, label_of(task_id))
            task.gpu_utils = deque(maxlen=self.gpu_window)
        return task

    def _tick(self, at: float) -> None:
        self.now = at if self.now is None else max(self.now, at)

    def _add_metric(
        self, task: _Task, metric: LogMetric, received_at: float, catching_up: bool
    ) -> None:
        position = metric.step if metric.step is not None else metric.epoch
        run = task.run
        if position is not None and len(run.first) < REPLAY_PROBE:
            run.first.append((float(position), metric.as_dict()))
        if task.replay is not None and not self._resolve_replay(task, metric, position):
            return
        run = task.run
        at = metric.taken_at if metric.taken_at is not None else received_at
        all_series, latest, latest_at = run.series, run.latest, run.latest_at
        step, epoch = metric.step, metric.epoch
        for name, value in metric.values:
            series = all_series.get(name)
            if series is None:
                series = all_series[name] = MetricSeries(self.chart_points, self.window_points)
            series.add(value, step, epoch)
            latest[name] = value
            latest_at[name] = at
        run.step = metric.step if metric.step is not None else run.step
        run.epoch = metric.epoch if metric.epoch is not None else run.epoch
        if position is not None and (run.max_position is None or position > run.max_position):
            run.max_position = position
        run.last_metric_at = at
        own_time = metric.taken_at is not None and metric.taken_at != received_at
        if metric.step is not None and (own_time or not catching_up):
            run.rate.add(at, metric.step)
        task.health_dirty = True

    def _resolve_replay(self, task: _Task, metric: LogMetric, position: float | None) -> bool:
        """After a truncation: is this metric a replay (skip), a new run (reset) or new data?"""
        assert task.replay is not None
        old_max, first = task.replay
        if position is None:
            return not task.replaying
        if task.replaying:
            if position <= old_max:
                return False
            task.replay, task.replaying = None, False
            return True
        values = metric.as_dict()
        if any(p == position and _same(v, values) for p, v in first):
            task.replaying = position <= old_max
            if not task.replaying:
                task.replay = None
            return not task.replaying
        task.replay = None
        if position <= old_max:  # the steps started over with other values: a new run
            task.run = _Run(first=task.run.first[-1:])
            task.runs += 1
            task.window_findings, task.gpu_findings = [], []
        return True

    def _add_log_finding(self, task: _Task, line_no: int, finding: LogFinding, at: float) -> None:
        old = task.run.log_findings.get(finding.kind)
        count = old.count + 1 if old is not None else 1
        first = old.first_seen_at if old is not None else at
        task.run.log_findings[finding.kind] = Finding(
            finding.kind,
            severity_of(finding.kind, task.runs > 1),
            finding.evidence,
            line_no,
            count,
            first,
            at,
        )

    def _finding(self, finding: LogFinding, line_no: int | None) -> Finding:
        return Finding(
            finding.kind,
            severity_of(finding.kind, False),
            finding.evidence,
            line_no,
            1,
            self.now,
            self.now,
        )

    def usual_interval_s(self, task_id: str) -> float | None:
        """The median gap between line arrivals of the live log (`None` under 2 gaps)."""
        task = self._tasks.get(task_id)
        return None if task is None else task.lines.usual_interval_s()

    def stall_after_s(self, task_id: str) -> float:
        """Silence after which a task whose writer lives is `stalled`."""
        task = self._tasks.get(task_id)
        return self.active_s if task is None else task.lines.stall_after_s(self.active_s)

    def _running(self, task: _Task) -> bool:
        """Whether the log was written within `active_s` (its file's mtime; else a line read).

        Reading an old log's backlog is not running: what counts is when it was written. A
        task whose writer is known runs while the writer lives and lines keep coming: within
        `LineClock.stall_after_s` of the last write.
        """
        if task.exit_code is not None or (task.had_writer and not task.writer_pids):
            return False
        last = _last_write(task)
        window = task.lines.stall_after_s(self.active_s) if task.writer_pids else self.active_s
        return last is not None and self.now is not None and self.now - last <= window

    def _status(self, task: _Task) -> str:
        if task.error is not None:
            return "error"
        if task.waiting and not task.lines_read and not task.had_writer:
            return "waiting"
        if task.exit_code is not None:
            return (
                "done"
                if task.exit_code == 0
                else "stopped"
                if task.exit_code in STOPPED_EXIT_CODES
                else "failed"
            )
        ended_in_error = self._ended_in_error(task)
        if ended_in_error and not task.writer_pids and self._quiet_for(task, _error_quiet_s(task)):
            return "failed"
        if self._running(task):
            return "running"
        if task.writer_pids and not _said_it_ended(task.run):
            return "stalled"
        if ended_in_error:
            return "failed"
        return "finished" if task.had_writer or _said_it_ended(task.run) else "idle"

    def _ended(self, task: _Task) -> bool:
        """Whether the run has ended: its command exited, its writers left, or its log said so."""
        return (
            task.exit_code is not None
            or (task.had_writer and not task.writer_pids)
            or _said_it_ended(task.run)
        )

    @staticmethod
    def _ended_in_error(task: _Task) -> bool:
        """Whether an error finding (traceback, OOM) is the run's last news: no metric since."""
        last_metric = task.run.last_metric_at or -math.inf
        return any(
            f.severity == "error" and (f.last_seen_at or 0.0) >= last_metric
            for f in task.run.log_findings.values()
        )

    def _quiet_for(self, task: _Task, seconds: float) -> bool:
        """Whether the log has not been written for `seconds` (its mtime, else a line read)."""
        last = _last_write(task)
        return last is not None and self.now is not None and self.now - last >= seconds

    def _view(self, task: _Task) -> TaskView:
        if task.health_dirty:
            task.health_dirty = False
            task.window_findings = [
                self._finding(f, None)
                for _, f in judge_histories(task.run.series, task.num_classes)
            ]
        run = task.run
        throughput, throughput_name = self._throughput(run)
        # judged while the run went on; what speaks of a live run is left out once it ended
        window = [
            f
            for f in task.window_findings
            if f.kind not in LIVE_ONLY_KINDS or not self._ended(task)
        ]
        findings = [*run.log_findings.values(), *window, *task.gpu_findings]
        return TaskView(
            task.task_id,
            task.label,
            self._status(task),
            task.format,
            run.step,
            run.epoch,
            tuple(run.latest.items()),
            throughput,
            throughput_name,
            self._eta(task),
            task.lines_read,
            task.unparsed,
            task.too_long,
            task.generation,
            task.runs,
            sort_findings(findings),
            task.gpu_uuids,
            task.gpu_util,
            task.last_progress_at,
            task.offset,
            task.size,
            task.error,
            task.exit_code,
            tuple(sorted(task.pids)) or task.last_writers,
            task.writer_pids,
            task.lines.usual_interval_s(),
            task.lines.stall_after_s(self.active_s) if task.writer_pids else None,
            lost_bytes=task.lost_bytes,
            lost_lines=task.lost_lines,
        )

    def _throughput(self, run: _Run) -> tuple[float | None, str | None]:
        for name in THROUGHPUT_NAMES:
            if name in run.latest and self._fresh(run, name):
                return run.latest[name], name
        rate = run.rate.rate()
        return (rate, "steps_s") if rate is not None else (None, None)

    def _eta(self, task: _Task) -> float | None:
        run = task.run
        if "eta_s" in run.latest and self._fresh(run, "eta_s"):
            return max(0.0, run.latest["eta_s"] - ((self.now or 0.0) - run.latest_at["eta_s"]))
        total = task.total_steps or next(
            (int(run.latest[n]) for n in TOTAL_STEP_NAMES if n in run.latest), None
        )
        rate = run.rate.rate()
        if rate is None and IT_S in run.latest and self._fresh(run, IT_S):
            rate = run.latest[IT_S]
        if total is None or run.step is None or not rate or rate <= 0:
            return None
        return max(0.0, (total - run.step) / rate)

    def _fresh(self, run: _Run, name: str) -> bool:
        return self.now is None or self.now - run.latest_at[name] <= self.active_s


def _said_it_ended(run: _Run) -> bool:
    """Whether the log said the run ended, and no metric came after that line.

    A metric after it is a new run in the same file; an end line's own metric (the Trainer's
    `train_runtime` dict) still counts as the end.
    """
    return run.end_line is not None and (
        run.last_metric_line is None or run.end_line >= run.last_metric_line
    )


def _place(task: _Task, tick: GpuTick) -> None:
    if task.pids:
        found = tuple(
            d.uuid
            for d in tick.devices
            if d.processes and any(p.pid in task.pids for p in d.processes)
        )
        task.gpu_uuids = found or task.gpu_uuids


def _same(a: dict[str, float], b: dict[str, float]) -> bool:
    common = a.keys() & b.keys()
    return bool(common) and all(
        a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])) for k in common
    )


def _last_write(task: _Task) -> float | None:
    """When the log was last written: its file's mtime, else when a line was last read."""
    return task.modified_at if task.modified_at is not None else task.last_progress_at


def _error_quiet_s(task: _Task) -> float:
    """How long a log whose last news is an error must be quiet to have failed."""
    usual = task.lines.usual_interval_s()
    return ERROR_QUIET_S if usual is None else max(ERROR_QUIET_S, 5 * usual)
