"""At the end of a recording, read every followed log to its end, and count what could not be."""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from collectors.logs.logtail_digest import MAX_FINDINGS_PER_BATCH
from collectors.session.session_format import EVENT
from gpuherd.record.logsink import LogSink

STALL_S = 10.0
"""No byte read for this long (a hung filesystem, a log that cannot be read any more): stop
waiting and report what was left. A tail reads a backlog 1 MiB at a time, about a second's
work on a slow shared core, so progress is never this slow otherwise."""
NOTICE_AFTER_S = 2.0
"""A drain longer than this is announced, with how much is left and how to stop it."""
POLL_S = 0.02

INTERRUPTED, STALLED, WRITE_FAILED = "interrupted", "stalled", "write_failed"
"""Why reading stopped before the end: a second interrupt, no progress, the session failed."""


@dataclass(frozen=True, slots=True)
class Unread:
    """What of one followed log was not recorded when the recording closed."""

    path: str
    unread_bytes: int
    reason: str
    """`interrupted`, `stalled` or `write_failed`."""
    lines_estimate: int | None = None
    """About how many lines that is, from the bytes per line read so far; `None` if unknown."""


def mib(count: int) -> str:
    """Bytes for people: `12.3 MB`."""
    return f"{count / 1e6:,.1f} MB" if count >= 100_000 else f"{count:,} bytes"


class LogDrain:
    """Waits until each followed log has been recorded up to its size when the drain began.

    Progress is read from `offsets` (bytes recorded so far per path, kept by `LogSink` on the
    writer thread), so a log counts as read once its rows are written, not when the tail
    got its bytes. There is no time limit while bytes keep coming: only `cancel` (a second
    interrupt), a failed session (`failed`) or `STALL_S` without progress end it early; then
    `unread()` says how much of which log was left.
    """

    def __init__(
        self,
        offsets: Mapping[str, int],
        seen: Mapping[str, tuple[int, int]] | None = None,
        *,
        stall_s: float = STALL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.offsets = offsets
        self.seen: Mapping[str, tuple[int, int]] = seen if seen is not None else {}
        """Per path, the generation a tail reads and its size at the last look (`LogSink`)."""
        self.stall_s = stall_s
        self.cancel = threading.Event()
        """Set (from a signal handler or another thread) to stop waiting at once."""
        self.reason: str | None = None
        """Why the last `run` stopped early; `None` when every log was read to its end."""
        self._clock = clock
        self._targets: dict[str, int] = {}
        self._reading: dict[str, tuple[int, int]] = {}

    def run(
        self,
        paths: Iterable[str],
        *,
        wake: Callable[[], None] | None = None,
        failed: Callable[[], bool] = lambda: False,
        notice: Callable[[str], None] | None = None,
    ) -> None:
        """Wait for `paths` to be recorded up to the size they (and the files read) have now.

        Args:
            paths: the followed logs (task ids).
            wake: called every poll, to cut a polling tail's wait short.
            failed: whether the session stopped writing (then nothing more can be recorded).
            notice: told once, after `NOTICE_AFTER_S`, how much is left and how to stop.
        """
        for path in paths:
            self._targets[path] = _log_size(path)  # gone: only what the tail had open is left
            if path in self.seen:
                self._reading[path] = self.seen[path]
        started = last_progress = self._clock()
        seen, announced = -1, notice is None
        while True:
            left = self.left_bytes()
            if left == 0:
                self.reason = None
                return
            done = sum(self.offsets.get(path, 0) for path in self._targets)
            now = self._clock()
            if done != seen:
                seen, last_progress = done, now
            reason = (
                INTERRUPTED
                if self.cancel.is_set()
                else WRITE_FAILED
                if failed()
                else STALLED
                if now - last_progress >= self.stall_s
                else None
            )
            if reason is not None:
                self.reason = reason
                return
            if not announced and now - started >= NOTICE_AFTER_S:
                announced = True
                assert notice is not None
                notice(
                    f"reading the rest of the logs ({mib(left)} left); interrupt again "
                    "to stop reading and close the session now"
                )
            if wake is not None:
                wake()
            self.cancel.wait(POLL_S)

    def left_bytes(self) -> int:
        """Bytes not recorded yet, over all logs, of what they held when the drain began."""
        return sum(self._left(path, target) for path, target in self._targets.items())

    def unread(self, lines_per_byte: Mapping[str, float] | None = None) -> list[Unread]:
        """What was left of each log when the drain stopped early (call once writing ended).

        Args:
            lines_per_byte: per path, lines read per byte read so far, to estimate lines.
        """
        if self.reason is None:
            return []
        out = []
        for path, target in self._targets.items():
            left = self._left(path, target)
            if left > 0:
                rate = (lines_per_byte or {}).get(path)
                out.append(
                    Unread(path, left, self.reason, None if rate is None else round(left * rate))
                )
        return out

    def _left(self, path: str, target: int) -> int:
        # A log rotated or truncated meanwhile is smaller now: the new file only has to be
        # read to its own end. The file the tail is on may be the old one, renamed or deleted
        # (read through its open descriptor): what it saw there has to be read too.
        offset = self.offsets.get(path, 0)
        generation, size = self._reading.get(path, (0, 0))
        # Until the tail moves on, the file it was on when the drain began is read to the size
        # it had then (the tail ends a generation only once it is read to its end).
        reading = size - offset if self.seen.get(path, (0, 0))[0] == generation else 0
        target = min(target, _log_size(path))
        return max(0, target - offset, reading)


def _log_size(path: str) -> int:
    """Bytes a log holds now; 0 when it is gone or is no regular file.

    A directory's own size, or a FIFO's, is nothing a tail reads: counting it once made
    `record --log DIR` wait 10 s at the end and warn of 4,096 bytes not recorded.
    """
    try:
        info = os.stat(path)
    except OSError:
        return 0
    return info.st_size if stat.S_ISREG(info.st_mode) else 0


def dropped_event(task: str, unread: Unread, stall_s: float = STALL_S) -> dict[str, Any]:
    """The `log_dropped` event (for `events.jsonl`) of a log not read to its end."""
    lines = "" if unread.lines_estimate is None else f" (about {unread.lines_estimate:,} lines)"
    why = {
        INTERRUPTED: "reading was interrupted",
        WRITE_FAILED: "the session could not be written",
        STALLED: f"the log could not be read any further (no progress for {stall_s:g} s)",
    }.get(unread.reason, unread.reason)
    event: dict[str, Any] = {
        "kind": EVENT.log_dropped,
        "source": task,
        "task": task,
        "path": unread.path,
        "unread_bytes": unread.unread_bytes,
        "reason": unread.reason,
        "msg": f"{mib(unread.unread_bytes)}{lines} at the end of {unread.path} not recorded: {why}",
    }
    if unread.lines_estimate is not None:
        event["unread_lines_estimate"] = unread.lines_estimate
    return event


def findings_dropped_event(task: Mapping[str, Any]) -> dict[str, Any]:
    """The `log_dropped` event of findings over the per-read cap (`LogSink.tasks_meta` row)."""
    count = task["findings_dropped"]
    return {
        "kind": EVENT.log_dropped,
        "source": task["task"],
        "task": task["task"],
        "path": task["path"],
        "findings": count,
        "msg": f"{count:,} findings of {task['path']} not recorded (more than "
        f"{MAX_FINDINGS_PER_BATCH} in one read of the log)",
    }


def unread_events(drain: LogDrain, sink: LogSink) -> list[dict[str, Any]]:
    """`log_dropped` events for what of the logs was not recorded (once writing has ended)."""
    tasks = sink.tasks_meta()
    rates = {
        path: task["lines"] / offset
        for task in tasks
        if (path := task["path"]) and (offset := sink.offsets.get(path))
    }
    events = [
        dropped_event(sink.label(unread.path), unread, drain.stall_s)
        for unread in drain.unread(rates)
    ]
    return events + [findings_dropped_event(task) for task in tasks if task["findings_dropped"]]
