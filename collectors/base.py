"""The collector protocol, the events a collector loop emits, and the error hierarchy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar, Union

S = TypeVar("S")
S_co = TypeVar("S_co", covariant=True)


class GpuherdError(Exception):
    """Base of every error gpuherd shows to a person: a short title and a readable message."""

    def __init__(self, msg: str, title: str = "gpuherd") -> None:
        super().__init__(msg)
        self.msg = msg
        self.title = title

    def __str__(self) -> str:
        return self.msg

    @property
    def shown(self) -> str:
        """The error as a command prints it after `gpuherd: `: its title, then the message."""
        return f"{self.title}: {self.msg}"


class CollectorError(GpuherdError):
    """The source failed this tick (GPU lost, socket gone, file vanished); it may recover."""


class CollectorUnavailable(GpuherdError):
    """The source cannot work on this machine at all (no driver, library missing)."""


class SourceExhausted(GpuherdError):
    """A finite source (a replayed session) has nothing more to give; the loop ends quietly."""


class Collector(Protocol[S_co]):
    """One source of samples, polled by `collectors.loop.run_collector` on its own thread.

    `interval_s` is read before every wait, so a source may change it between samples (a replay
    does, to follow the recorded timing).
    """

    name: str
    interval_s: float

    def open(self) -> None:
        """Acquire resources once; may raise `CollectorUnavailable`."""

    def sample(self) -> S_co:
        """Take one sample (blocking); may raise `CollectorError` or `SourceExhausted`."""

    def close(self) -> None:
        """Release what `open` acquired; safe to call after a failed `open`."""


@dataclass(frozen=True, slots=True)
class Sampled(Generic[S]):
    """A collector produced a sample."""

    source: str
    sample: S


@dataclass(frozen=True, slots=True)
class Failed:
    """A collector raised `CollectorError`; the loop keeps polling."""

    source: str
    error: CollectorError


@dataclass(frozen=True, slots=True)
class Recovered:
    """A collector that had failed produced a sample again."""

    source: str


@dataclass(frozen=True, slots=True)
class Unavailable:
    """A collector's `open` raised `CollectorUnavailable`; its loop has ended."""

    source: str
    error: CollectorUnavailable


@dataclass(frozen=True, slots=True)
class Finished:
    """A finite collector ran out of samples; its loop has ended."""

    source: str


@dataclass(frozen=True, slots=True)
class Crashed:
    """The thread running a collector died of an unexpected exception (a bug); it has stopped.

    Sent by whoever runs the loop, never by `run_collector` itself. `source` is the collector's
    name, or the name of another thread of the sink (`record:close` in the dashboard).
    """

    source: str
    error: BaseException


CollectorEvent = Union[Sampled, Failed, Recovered, Unavailable, Finished, Crashed]  # noqa: UP007 (3.10 runtime alias)
"""Every event a sink of collectors gets; each sink dispatches on the type in one table."""
