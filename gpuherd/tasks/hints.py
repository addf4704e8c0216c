"""What is known of each task from outside its log (replayed sessions, the recorded command)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collectors.session.session_reader import SessionReader

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


def replay_hints(session: SessionReader) -> list[TaskHint]:
    """The recorded command's task: its pid (from the `start` event) and its GPUs.

    The GPUs are those `run_peaks` attributes to the command by its own processes; the pid
    matches the command's rows in `processes.csv` as the replay goes.
    """
    from collectors.session.session_format import EVENT, META  # the live dashboard does without

    if not session.meta.get(META.command):
        return []
    uuids = tuple(
        str(p["uuid"])
        for p in session.meta.get(META.run_peaks) or ()
        if isinstance(p, dict)
        and p.get("uuid")
        and p.get("method") == "per-process"
        and p.get("peak_bytes")
    )
    pid = next((e.get("pid") for e in session.events() if e.get("kind") == EVENT.start), None)
    owns = (lambda p, root=pid: p == root) if isinstance(pid, int) else None
    return [TaskHint(COMMAND_TASK, gpu_uuids=uuids, owns_pid=owns)]
