"""Typed options of each command: what `gpuherd.commands` hands the engine instead of argparse's.

Each command's `run` turns argparse's namespace into one of these frozen objects at the edge
(`from_namespace`); the modules that do the work take the object, so a flag's name and type are
written here once and mypy sees every use. Field names are the flags' `dest` names; the queue's
actions have theirs in `gpuherd.queue.options`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Protocol, TypeVar

from gpuherd.queue.defaults import GRACE_S, MARGIN_BYTES, SETTLE_S

T = TypeVar("T")


def from_namespace(cls: type[T], namespace: object, **overrides: Any) -> T:
    """`cls` with each field from the attribute of the same name (or `overrides`), else its default.

    A flag that a command does not have (a replay has no `--log`) keeps the field's default;
    a list (a repeatable flag) becomes a tuple.
    """
    names = {field.name for field in fields(cls)}  # type: ignore[arg-type]
    values = {name: getattr(namespace, name) for name in names if hasattr(namespace, name)}
    # A repeatable flag (`--log`) arrives as a list: a tuple keeps the options frozen inside.
    values = {name: tuple(v) if isinstance(v, list) else v for name, v in values.items()}
    values.update(overrides)
    return cls(**values)


class MetricsFlags(Protocol):
    """`--serve-metrics` and its TLS pair, as every command that exports has them."""

    @property
    def serve_metrics(self) -> str | None:
        """`[HOST:]PORT` to serve at, or `None` when not asked."""

    @property
    def metrics_cert(self) -> str | None:
        """The certificate's PEM file, for HTTPS."""

    @property
    def metrics_key(self) -> str | None:
        """The private key's PEM file, for HTTPS."""


@dataclass(frozen=True, slots=True)
class MonitorOptions:
    """The dashboard: live (`monitor`), a recorded session (`replay`) or the demo (`demo`)."""

    interval: float = 1.0
    log: tuple[str, ...] = ()
    watch: tuple[str, ...] = ()
    serve_metrics: str | None = None
    metrics_cert: str | None = None
    metrics_key: str | None = None
    queue: bool = False
    settle: float = SETTLE_S
    margin_bytes: int = MARGIN_BYTES
    grace: float = GRACE_S
    replay: str | None = None
    speed: float = 1.0
    demo: bool = False


@dataclass(frozen=True, slots=True)
class RecordOptions:
    """`record DIR [-- CMD]`, headless or behind the dashboard (`--tui`)."""

    record: str
    duration: str | None = None
    tui: bool = False
    log: tuple[str, ...] = ()
    watch: tuple[str, ...] = ()
    interval: float = 1.0
    peak_interval: float = 0.02
    serve_metrics: str | None = None
    metrics_cert: str | None = None
    metrics_key: str | None = None
    child_command: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ServeMetricsOptions:
    """`serve-metrics [HOST:]PORT`: the exporter alone."""

    listen: str
    replay: str | None = None
    speed: float = 1.0
    interval: float = 1.0
    log: tuple[str, ...] = ()
    watch: tuple[str, ...] = ()
    metrics_cert: str | None = None
    metrics_key: str | None = None
    serve_metrics: str | None = None
    """Unused: the address is `listen`; here so the exporter reads every command alike."""


@dataclass(frozen=True, slots=True)
class FleetOptions:
    """`fleet PROMETHEUS`: the fleet view."""

    prometheus: str
    interval: float = 2.0
    stale_after: float = 60.0
    forget_after: float = 3600.0


@dataclass(frozen=True, slots=True)
class SnapshotOptions:
    """`snapshot [--json]`."""

    json: bool = False


@dataclass(frozen=True, slots=True)
class ParseOptions:
    """`parse FILE...`."""

    files: tuple[str, ...] = ()
    log_format: str | None = None
    json: bool = False


@dataclass(frozen=True, slots=True)
class SummarizeOptions:
    """`summarize DIR`."""

    session_dir: str
    json: bool = False
    md: bool = False


@dataclass(frozen=True, slots=True)
class NoteOptions:
    """`note DIR`."""

    session_dir: str
    example: str
    dry_run: bool = False
