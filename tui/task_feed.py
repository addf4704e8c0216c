"""Routes log batches, discovery scans and GPU ticks into the state's task tracker (UI thread)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from collectors.base import Collector
from collectors.machine.writers import WritersTick
from collectors.roles import LOG, role_of
from collectors.samples import DiscoveredLogs, GpuTick, LogBatch
from gpuherd.engine.running import RunningSet
from tui.screens.task_detail import TaskDetailScreen
from tui.state import MonitorState
from tui.tasks import task_rows

if TYPE_CHECKING:
    from textual.app import App

    from gpuherd.tasks.hints import TaskHint
    from tui.screens.main import MainScreen

REDRAW_S = 0.25
"""Batches arriving within this time share one redraw of the tasks panel."""


class TaskFeed:
    """Owns the log tails the dashboard starts, and keeps the tasks panel in step.

    Every handler runs on the UI thread: the tracker in `state.tasks` is never touched from a
    collector thread. Which logs get a tail is the supervisor's rule (`gpuherd.sources`): one
    for each log a discovery scan lists, stopped when its run disappears. This feed runs them
    on the app's collector threads; a log that cannot be read stays on its row with the reason.
    """

    def __init__(
        self,
        app: App[Any],
        main: MainScreen,
        state: MonitorState,
        running: RunningSet,
        hints: Sequence[TaskHint] = (),
    ) -> None:
        self._app, self._main, self.state = app, main, state
        self._running = running
        self._tails = running.tails
        self._hints = {hint.task_id: hint for hint in hints}
        self._task_of: dict[str, str] = {}
        """Source name -> task id, for every tail (one log, one task) started or adopted."""
        self._redraw_pending = False

    def adopt(self, collectors: Sequence[Collector[Any]]) -> None:
        """Note the tails the app was started with, so a scan does not start them twice."""
        for collector in collectors:
            task_id = getattr(collector, "task_id", None)
            if role_of(collector) == LOG and isinstance(task_id, str):
                self._task_of[collector.name] = task_id
                if self._tails is not None:
                    self._tails.adopt(task_id)

    def discovered(self, found: DiscoveredLogs) -> None:
        """Note the tails the running set started for a scan; drop the tasks of vanished runs."""
        for task_id in found.started or ():
            tail = self._running.find_task(task_id)
            if tail is not None:
                self._task_of[tail.name] = task_id
                self.state.add_source(tail.name, role_of(tail))
        for task_id in found.stopped:
            self.state.tasks.remove(task_id)
            for source in [s for s, t in self._task_of.items() if t == task_id]:
                self.state.status.pop(source, None)
        self.schedule_redraw()

    def batch(self, source: str, batch: LogBatch) -> None:
        """Fold a batch into its task."""
        if self._dropped(source):
            return
        tracker = self.state.tasks
        status = self.state.status_of(source)
        if status.health == "waiting":
            status.health = "ok"
        if batch.notice:  # on the banner, once: the tail polls, and why
            self.state.notices.append(f"{source}: {batch.notice}")
        if batch.recreated and source not in self._task_of:
            tracker.remove(batch.path)  # a looping replay starts its next lap: a fresh task
        new = batch.path not in tracker.task_ids
        tracker.add_batch(batch)
        hint = self._hints.get(batch.path)
        if new and hint is not None:
            tracker.associate(batch.path, label=hint.label, gpu_uuids=hint.gpu_uuids or None)
        self.schedule_redraw()

    def gpu_tick(self, tick: GpuTick) -> None:
        """Map task pids to GPUs, feed utilization to the health rules."""
        tracker = self.state.tasks
        if not tracker.task_ids:
            return
        tracker.associate_owned_pids(tick, self._hints.values())
        tracker.add_gpu_tick(tick)
        self.schedule_redraw()

    def writers(self, found: WritersTick) -> None:
        """Which processes write the followed logs: the tasks' pids, GPUs and status."""
        tracker = self.state.tasks
        tracker.add_writers(found)
        if self.state.gpu_tick is not None:
            tracker.place(self.state.gpu_tick)  # the GPUs of pids found just now
        self.schedule_redraw()

    def ended(self, task_id: str, exit_code: int) -> None:
        """The command behind `task_id` exited: its row says so at once."""
        self.state.tasks.ended(task_id, exit_code)
        self.schedule_redraw()

    def failed(self, source: str, reason: str) -> None:
        """A tail cannot read its log: say why on the task's row."""
        task_id = self._task_id(source)
        if task_id is not None and not self._dropped(source):
            self.state.tasks.collector_failed(task_id, reason)
            self.schedule_redraw()

    def recovered(self, source: str) -> None:
        """The tail reads again."""
        task_id = self._task_id(source)
        if task_id is not None and task_id in self.state.tasks.task_ids:
            self.state.tasks.collector_recovered(task_id)
            self.schedule_redraw()

    def _task_id(self, source: str) -> str | None:
        """The task a tail feeds, also before its scan reached the UI thread."""
        task_id = self._task_of.get(source)
        if task_id is None:
            tail = self._running.find(source)
            found = getattr(tail, "task_id", None) if role_of(tail) == LOG else None
            if isinstance(found, str):
                task_id = self._task_of[source] = found
        return task_id

    def _dropped(self, source: str) -> bool:
        """A tail stopped after its run vanished may still post what it read last: ignore it."""
        task_id = self._task_id(source)
        return (
            self._tails is not None and task_id is not None and not self._tails.is_followed(task_id)
        )

    def schedule_redraw(self) -> None:
        """Redraw the tasks soon, once for everything that arrives meanwhile."""
        if not self._redraw_pending and self._app.is_running:
            self._redraw_pending = True
            self._app.set_timer(REDRAW_S, self.redraw)

    def redraw(self) -> None:
        """Push the tasks into the panel, and into the detail screen when it is open."""
        self._redraw_pending = False
        if not self._app.is_running:
            return
        if not self._main.is_mounted:
            # A source that fails at once (a log that cannot be followed) reports before the
            # dashboard's first screen is mounted on a slow machine; dropping this redraw
            # would leave its row unshown until some later batch, which may never come.
            self.schedule_redraw()
            return
        views = self.state.tasks.views()
        self._main.show_tasks(task_rows(views, self.state.gpu_tick))
        self._main.show_task_pids({pid: view.label for view in views for pid in view.pids})
        screen = self._app.screen
        if isinstance(screen, TaskDetailScreen):
            screen.show()
