"""What the dashboard is built from: one dataclass, written once (no Textual here)."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from collectors.base import Collector, CollectorEvent
from collectors.samples import LogBatch

if TYPE_CHECKING:
    from gpuherd.engine.gate import EarlyCollectors
    from gpuherd.engine.running import PidSink
    from gpuherd.monitor_logs import TaskHint
    from gpuherd.record.dashboard import DashboardRecording
    from gpuherd.sources import TailSupervisor


@dataclass
class DashboardOptions:
    """The dashboard over a source set (live, replayed, or fakes in tests)."""

    collectors: Sequence[Collector[Any]]
    """Sources to poll, one thread each."""
    title: str = "gpuherd"
    """Terminal title."""
    clock: Callable[[], float] = time.time
    """Wall clock for the header in live mode (injected for deterministic snapshots)."""
    hostname: str = field(default_factory=socket.gethostname)
    """Shown in the header."""
    replay_label: str | None = None
    """`REPLAY <dir> x<speed>`; set in replay mode, where the header shows the recorded time
    instead of the wall clock."""
    notices: Sequence[str] = ()
    """Banner lines from the start (replay warnings, a private PID namespace)."""
    task_hints: Sequence[TaskHint] = ()
    """What is known about tasks beyond their logs (a recorded command's pid)."""
    recording: DashboardRecording | None = None
    """A started `record --tui` recording: the app reports how it ends and closes it when its
    command exits. It is a sink of the same running set (`early`, or `tap`)."""
    early: EarlyCollectors | None = None
    """The running set of `collectors` with its gate (`gpuherd.engine.gate`), started before
    Textual was imported; the app handles its held events on mount. `None`: the app makes
    one from the three fields below and starts it on mount."""
    pid_watch: PidSink | None = None
    """Without `early`: told every GPU pid after each tick (the host collector reads it)."""
    tail: TailSupervisor | Callable[[str], Collector[LogBatch]] | None = None
    """Without `early`: decides which logs a discovery scan finds get a tail, or makes tails
    for a supervisor of the app's own. `None`: logs are not followed."""
    tap: Callable[[CollectorEvent], None] | None = None
    """Without `early`: also called with every collector event, on the collector's thread."""
