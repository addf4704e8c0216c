"""The seam between a log tail and the parsers: detection, line parsers, documents, findings."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Protocol

from parsers.model import LogFinding, LogMetric


class LineParser(Protocol):
    """A stateful parser for one file generation (CSV header, multi-line blocks)."""

    def feed(self, line: str) -> LogMetric | None:
        """Parse one line; `None` when it holds no metric; `ValueError` for a bad value."""

    def reset(self) -> None:
        """Forget all state (a new file generation begins)."""


class LogFormats(Protocol):
    """What a log tail needs from `parsers/`; tests may pass a small stand-in."""

    def detect(self, lines: Sequence[str], path: str | None) -> str:
        """Name the format of a file from its first lines."""

    def make_parser(self, name: str) -> LineParser:
        """A fresh parser for format `name`."""

    def document_format(self, path: str, forced: str | None) -> str | None:
        """The whole-file format `path` is read with (`trainer_state.json`), else `None`."""

    def parse_document(self, name: str, text: str) -> list[LogMetric]:
        """Every metric of a whole document, oldest first; `ValueError` when malformed."""

    def scan_line(self, line: str) -> LogFinding | None:
        """A finding the line alone supports (OOM, traceback, download)."""

    def findings_from_metric(self, metric: LogMetric) -> Sequence[LogFinding]:
        """Findings the metric alone supports (NaN or Inf loss)."""


class RegistryFormats:
    """The real formats: `parsers.registry` and `parsers.findings`."""

    def __init__(self) -> None:
        from parsers import findings, registry

        self._registry = registry
        self._scan_line = findings.scan_line
        self._findings_from_metric = findings.findings_from_metric

    def detect(self, lines: Sequence[str], path: str | None) -> str:
        """Delegate to `parsers.registry.detect_format`."""
        return str(self._registry.detect_format(list(lines), path=path))

    def make_parser(self, name: str) -> LineParser:
        """Delegate to `parsers.registry.make_parser`."""
        parser: LineParser = self._registry.make_parser(name)
        return parser

    def document_format(self, path: str, forced: str | None) -> str | None:
        """A forced document format, or the one whose file name `path` carries."""
        documents = self._registry.DOCUMENT_FORMATS
        if forced is not None:
            return forced if forced in documents else None
        if os.path.basename(path) == "trainer_state.json":
            for name in documents:
                if "trainer_state" in str(name):
                    return str(name)
        return None

    def parse_document(self, name: str, text: str) -> list[LogMetric]:
        """Delegate to `parsers.registry.parse_trainer_state`."""
        return list(self._registry.parse_trainer_state(text))

    def scan_line(self, line: str) -> LogFinding | None:
        """Delegate to `parsers.findings.scan_line`."""
        finding: LogFinding | None = self._scan_line(line)
        return finding

    def findings_from_metric(self, metric: LogMetric) -> Sequence[LogFinding]:
        """Delegate to `parsers.findings.findings_from_metric` (one finding, several or none)."""
        found = self._findings_from_metric(metric)
        if found is None:
            return ()
        if isinstance(found, LogFinding):
            return (found,)
        return tuple(found)
