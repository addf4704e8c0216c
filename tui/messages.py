"""Messages that carry collector events from collector threads to the UI thread."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from textual.message import Message

from collectors.base import CollectorError, CollectorUnavailable
from collectors.discovery import DiscoveredLogs
from collectors.samples import LogBatch

if TYPE_CHECKING:
    from gpuherd.record.dashboard import RecordingEnded, RecordResult


@dataclass
class SampleReceived(Message):
    """A collector produced a sample."""

    source: str
    """Name of the collector, for example `nvml` or `host`."""
    sample: Any
    """The immutable sample (`GpuTick`, `HostSample`, ...)."""

    def can_replace(self, message: Message) -> bool:
        """Let a newer sample from the same source supersede this one when the UI lags."""
        return isinstance(message, SampleReceived) and message.source == self.source


@dataclass
class CollectorFailed(Message):
    """A collector raised `CollectorError` this tick; it keeps polling and may recover."""

    source: str
    error: CollectorError


@dataclass
class CollectorCrashed(Message):
    """A thread of the dashboard died of an unexpected exception (a bug); it has stopped.

    `source` is the collector's name, or `record:close` for the thread closing a recording.
    """

    source: str
    error: BaseException


@dataclass
class CollectorRecovered(Message):
    """A collector that had failed produced a sample again."""

    source: str


@dataclass
class SourceUnavailable(Message):
    """A collector cannot work on this machine (no driver, library missing); it has stopped."""

    source: str
    error: CollectorUnavailable


@dataclass
class SourceFinished(Message):
    """A finite collector (a replayed session) has no more samples; it has stopped."""

    source: str


@dataclass
class LogBatchReceived(Message):
    """A followed (or replayed) training log produced a batch of metrics and findings.

    Never replaceable: every batch carries metrics the next one does not repeat.
    """

    source: str
    batch: LogBatch


@dataclass
class LogsDiscovered(Message):
    """A scan of the `--log` globs and `--watch` directories; never replaceable either."""

    source: str
    found: DiscoveredLogs


def sample_message(source: str, sample: Any) -> Message:
    """The message that carries `sample` to the UI thread."""
    if isinstance(sample, LogBatch):
        return LogBatchReceived(source, sample)
    if isinstance(sample, DiscoveredLogs):
        return LogsDiscovered(source, sample)
    return SampleReceived(source, sample)


@dataclass
class RecordingEnding(Message):
    """The recording made from the dashboard has to end (the command exited, --duration)."""

    ended: RecordingEnded


@dataclass
class RecordingClosed(Message):
    """The session directory is closed and its summary written (or why not)."""

    result: RecordResult
