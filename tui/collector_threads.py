"""The dashboard's collector threads: they live below, in `gpuherd.engine` (no Textual)."""

from __future__ import annotations

from gpuherd.engine.gate import EarlyCollectors, EventGate
from gpuherd.engine.threads import STOP_WAIT_S, CollectorThread, Crash
from gpuherd.engine.threads import SourceThreads as CollectorThreads

__all__ = ["STOP_WAIT_S", "CollectorThread", "CollectorThreads", "Crash", "EarlyCollectors",
           "EventGate"]
