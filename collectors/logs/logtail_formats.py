"""The seam between a log tail and the parsers: detection, line parsers, documents, findings."""

from __future__ import annotations

import glob
import math
import operator
import os
import stat
from collections.abc import Sequence
from typing import Protocol

from parsers import findings, registry
from parsers.json_document import read_document
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

    def detect_late(self, lines: Sequence[str], path: str | None) -> str | None:
        """A console format later lines of a `generic` log show (banners came first), or None."""

    def make_parser(self, name: str, path: str | None = None) -> LineParser:
        """A fresh parser for format `name`, for the file at `path` (some name metrics by it)."""

    def document_format(self, path: str, forced: str | None) -> str | None:
        """The whole-file format `path` is read with (`trainer_state.json`), else `None`."""

    def is_document(self, name: str) -> bool:
        """Whether format `name` is a whole-file format (detection may name one late)."""

    def parse_document(self, name: str, text: str) -> list[LogMetric]:
        """Every metric of a whole document, oldest first; `ValueError` when malformed."""

    def scan_line(self, line: str) -> LogFinding | None:
        """A finding the line alone supports (OOM, traceback, download)."""

    def findings_from_metric(self, metric: LogMetric) -> Sequence[LogFinding]:
        """Findings the metric alone supports (NaN or Inf loss)."""

    def ends_run(self, line: str) -> bool:
        """Whether the line says the training run has ended (`Training completed.`)."""


class RegistryFormats:
    """The real formats: `parsers.registry`, `parsers.hf_trainer` and `parsers.findings`.

    Formats in `off` are never detected (`parsers.registry.FRAMEWORK_FORMATS`, to measure the
    generic reader alone); a forced one is still used.
    """

    off: frozenset[str] = frozenset()

    def __init__(self, off: frozenset[str] = frozenset()) -> None:
        self.off = off

    def detect(self, lines: Sequence[str], path: str | None) -> str:
        """Delegate to `parsers.registry.detect_format`."""
        return registry.detect_format(lines, path, self.off)

    def detect_late(self, lines: Sequence[str], path: str | None) -> str | None:
        """Delegate to `parsers.registry.detect_late_format`."""
        return registry.detect_late_format(lines, path, self.off)

    def make_parser(self, name: str, path: str | None = None) -> LineParser:
        """Delegate to `parsers.registry.make_parser` (`ValueError` for an unknown name)."""
        return registry.make_parser(name, path=path)

    def document_format(self, path: str, forced: str | None) -> str | None:
        """A forced document format, else the one the file's first bytes (or its name) show.

        A file that does not exist yet or is still empty is told by its name alone; if its
        text turns out to be a document later, line detection says so (`is_document`).
        """
        if forced is not None:
            return forced if forced in registry.DOCUMENT_FORMATS else None
        name = registry.detect_format(_head_lines(path), path, self.off)
        return name if name in registry.DOCUMENT_FORMATS else None

    def is_document(self, name: str) -> bool:
        """Whether `name` is read as a whole document, not line by line."""
        return name in registry.DOCUMENT_FORMATS

    def parse_document(self, name: str, text: str) -> list[LogMetric]:
        """Delegate to `parsers.json_document.read_document` (its unparsed records dropped)."""
        return read_document(name, text)[0]

    # Called for every line of a fast log: the functions themselves, not methods calling them.
    scan_line = staticmethod(findings.scan_line)
    ends_run = staticmethod(findings.ends_run)

    def findings_from_metric(self, metric: LogMetric) -> Sequence[LogFinding]:
        """Delegate to `parsers.findings.findings_from_metric` when a value is not finite."""
        # Called for every metric of a fast log: one sum in C rules out almost all of them
        # (a sum of finite values is finite, or overflows and then takes the full look).
        if math.isfinite(sum(map(_value, metric.values))):
            return ()
        return findings.findings_from_metric(metric)


_value = operator.itemgetter(1)

HEAD_BYTES = 64 * 1024
"""Bytes of a file looked at to tell a document from a line log when a tail opens."""


def _head_lines(path: str) -> list[str]:
    """The first lines of `path`, decoded; none when it is a pattern, missing or unreadable.

    Errors are left to the tail's own reads, which report them with their reason.
    """
    if glob.has_magic(path):
        return []
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return []  # opening a FIFO would block until a writer comes
        with open(path, "rb") as handle:
            head = handle.read(HEAD_BYTES)
    except OSError:
        return []
    return head.decode("utf-8", "replace").splitlines()
