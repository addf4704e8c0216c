"""Which processes belong to a command: its root pid and every descendant."""

from __future__ import annotations

import psutil

from collectors.process_alive import process_start_time


class ProcessTree:
    """Answers "is this pid the recorded command or one of its descendants?" cheaply.

    Only pids the driver lists are asked about, so this walks a few parent chains per tick
    instead of scanning every process on the host. A pid is identified with its start time, so a
    recycled pid is asked about again.
    """

    def __init__(self, root_pid: int) -> None:
        self.root_pid = root_pid
        self._known: dict[tuple[int, float], bool] = {}

    def contains(self, pid: int) -> bool:
        """Whether `pid` is the root or descends from it (False when it cannot be seen)."""
        started = process_start_time(pid)
        try:
            proc = psutil.Process(pid)
        except (psutil.Error, OSError):
            return False
        if started is None:
            return False
        key = (pid, started)
        if key not in self._known:
            self._known[key] = self._walk(proc)
        return self._known[key]

    def _walk(self, proc: psutil.Process) -> bool:
        try:
            for _ in range(64):
                if proc.pid == self.root_pid:
                    return True
                parent = proc.parent()
                if parent is None or parent.pid <= 1:
                    return False
                proc = parent
        except (psutil.Error, OSError):
            return False
        return False
