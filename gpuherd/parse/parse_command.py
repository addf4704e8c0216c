"""`gpuherd parse`: print the metrics and health findings found in training-log files."""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable, Iterator
from itertools import islice
from typing import IO, Any

from collectors.logs.logtail_digest import LineDigest, left_out
from collectors.logs.logtail_formats import RegistryFormats
from collectors.logs.logtail_lines import (
    DEFAULT_MAX_LINE_BYTES,
    READ_CHUNK_BYTES,
    LineAssembler,
    read_lines,
)
from gpuherd.common import exit_codes
from gpuherd.common.options import ParseOptions
from gpuherd.parse.trends import TrendHistory
from gpuherd.present.format import visible
from parsers.findings import findings_from_metric
from parsers.json_document import read_document
from parsers.model import LogFinding, LogMetric
from parsers.registry import DOCUMENT_FORMATS, FORMAT_NAMES

SAMPLE_LINES = 200
"""Lines read before choosing a format."""
MAX_DOCUMENT_BYTES = 256 << 20
PATH_WIDTH = 40
"""Width of the table's FILE:LINE column; a longer path is cut in its middle."""
FORMAT_WIDTH = max(len(name) for name in FORMAT_NAMES)

Emit = Callable[[dict[str, Any]], None]


def run(args: ParseOptions) -> int:
    """Parse every file in `args.files`; 0, 1 if any file gave nothing, 2 on a bad --format.

    A file gives nothing when it cannot be read, is empty, holds no text (a binary file), or
    when no line of it matched a forced `--format`; each is one stderr line. Text that holds
    no metric and no finding (a CSV with its header only) is no failure: one stderr line says
    so, and the status stays 0.
    """
    if args.log_format is not None and args.log_format not in FORMAT_NAMES:
        names = ", ".join(FORMAT_NAMES)
        print(f"gpuherd parse: unknown format {args.log_format!r}; known: {names}", file=sys.stderr)
        return exit_codes.USAGE
    emit = _json_emitter(sys.stdout) if args.json else _TableEmitter(sys.stdout)
    status = exit_codes.OK
    for path in args.files:
        tracked = _parse_store(path, emit)
        if tracked is not None:
            status = status if tracked else exit_codes.FAILED
            continue
        try:
            report = parse_file(path, args.log_format, emit)
        except BrokenPipeError:
            raise  # the reader went away (`| head`): `cli.main` ends quietly
        except OSError as error:
            print(visible(f"gpuherd parse: {path}: {_reason(error)}"), file=sys.stderr)
            status = exit_codes.FAILED
            continue
        except ValueError as error:  # a document that is not valid JSON
            print(visible(f"gpuherd parse: {path}: {error}"), file=sys.stderr)
            status = exit_codes.FAILED
            continue
        problem = _nothing_read(report, args.log_format)
        if problem is not None:
            print(visible(f"gpuherd parse: {path}: {problem}"), file=sys.stderr)
            status = exit_codes.FAILED
            continue
        if report.cut_lines:
            cap = f"{DEFAULT_MAX_LINE_BYTES // 1024} KiB"
            print(
                visible(
                    f"gpuherd parse: {path}: {report.cut_lines} line(s) longer than "
                    f"{cap}; the first {cap} of each read"
                ),
                file=sys.stderr,
            )
        if report.unparsed:
            what = "log_history entr(y/ies)" if report.format in DOCUMENT_FORMATS else "line(s)"
            print(
                visible(
                    f"gpuherd parse: {path}: {report.unparsed} unparsed {what} as {report.format}; "
                    f"first at {report.first_unparsed_line}: {report.first_error}"
                ),
                file=sys.stderr,
            )
        elif not (report.metrics or report.findings):
            # Text read without trouble that holds nothing to report (a CSV with its header
            # only, a config file): no failure, but silence would read as one.
            print(visible(f"gpuherd parse: {path}: {_nothing_found(report)}"), file=sys.stderr)
    sys.stdout.flush()
    return status


def _parse_store(path: str, emit: Emit) -> bool | None:
    """Parse a tracker's store (`gpuherd.parse.parse_trackers`); `None` when `path` is none."""
    from gpuherd.parse import parse_trackers

    try:
        runs = parse_trackers.store_runs(path)
    except OSError:
        return None  # said as for any file, by `parse_file`
    if runs is None:
        return None

    def warn(message: str) -> None:
        print(visible(f"gpuherd parse: {message}"), file=sys.stderr)

    if parse_trackers.parse_runs(runs, emit, warn, json_number) == 0:
        warn(f"{path}: {len(runs)} run(s), no metric in any")
        return False
    return True


def _nothing_read(report: FileReport, forced: str | None) -> str | None:
    """Why a file gave nothing at all, in words; `None` when it gave something or is text."""
    if report.metrics or report.findings:
        return None
    if report.bytes_read == 0:
        return "empty"
    if report.text_lines == 0 and report.format not in DOCUMENT_FORMATS:
        return "no text lines (binary?)"
    if forced is not None:
        return f"no line matched --format {forced}; without --format it reads as {report.detected}"
    return None


def _nothing_found(report: FileReport) -> str:
    if report.format in DOCUMENT_FORMATS:
        return f"no log_history entry holds a metric (read as {report.format})"
    return (
        f"no metric and no finding in {report.text_lines} text line(s), read as "
        f"{report.format}; --format names another format"
    )


class FileReport:
    """What parsing one file found, besides the emitted records."""

    def __init__(self, log_format: str) -> None:
        self.format = log_format
        self.lines = 0
        self.metrics = 0
        self.unparsed = 0
        self.first_unparsed_line: str | None = None
        """Where the first unparsed line is: `line N`, or `entry N` of a document."""
        self.first_error = ""
        self.findings = 0
        self.bytes_read = 0
        self.text_lines = 0
        """Lines that are not blank and hold no NUL or other control byte (a binary has none)."""
        self.detected = log_format
        """The format detection picks, even when `--format` forced another."""
        self.cut_lines = 0
        """Lines longer than the line cap, read up to it (as the log tail reads them)."""

    def count_error(self, line_number: int, error: ValueError | str, where: str = "line") -> None:
        """Count one unparsed line (or one with values left out), remembering the first."""
        self.unparsed += 1
        if self.first_unparsed_line is None:
            self.first_unparsed_line = f"{where} {line_number}"
            self.first_error = str(error)[:200]


def parse_file(
    path: str, log_format: str | None, emit: Emit, off: frozenset[str] = frozenset()
) -> FileReport:
    r"""Parse one file, streaming it, and pass each metric value and finding to `emit`.

    The file is read as a log tail reads it: cut into lines by `collectors.logs.logtail_lines`
    (`\r` redraws, the line cap, NUL holes, invalid UTF-8) and digested by
    `collectors.logs.logtail_digest.LineDigest` (detection, late detection, tracebacks, findings),
    so `parse` only adds the trend findings of the whole run and formats the output. Formats
    in `off` are never detected (see `parsers.registry.FRAMEWORK_FORMATS`).

    Raises:
        OSError: the file cannot be opened or read (missing, a directory, no permission).
        ValueError: a document format whose text is not valid JSON.
    """
    formats = RegistryFormats(off)
    with open(path, "rb") as handle:
        document = formats.document_format(path, log_format)
        report = None if document is None else _parse_document(path, handle, document, emit)
        if report is None:
            report = _digest_file(path, handle, formats, log_format, emit)
        if report.format in DOCUMENT_FORMATS and report.lines == 0:  # named late, by lines
            report = _parse_document(path, handle, report.format, emit)
        report.bytes_read = handle.tell()
        report.detected = report.format if log_format is None else _detected(handle, formats, path)
        return report


def _digest_file(
    path: str, handle: IO[bytes], formats: RegistryFormats, forced: str | None, emit: Emit
) -> FileReport:
    """Feed the file, chunk by chunk, through the tail's `LineDigest`; emit what each gave."""
    # the whole path: MLflow's metric files are named by the directories above them
    digest = LineDigest(formats, os.path.abspath(path), forced, max_findings=sys.maxsize)
    assembler = LineAssembler()
    report = FileReport(forced or "generic")
    history = TrendHistory()
    ended = False
    while not ended:
        chunk = handle.read(READ_CHUNK_BYTES)
        ended = not chunk
        lines = assembler.feed(chunk) if chunk else assembler.flush()
        report.text_lines += sum(map(_is_text, (text for _, text in lines)))
        digest.add(lines, None)
        if ended:
            digest.finish()
        if digest.format in DOCUMENT_FORMATS:
            report.format = digest.format
            return report  # a document after all: `parse_file` reads it whole
        _emit_parts(path, digest, report, history, emit)
    report.format = digest.format or formats.detect([], os.path.abspath(path))
    report.lines = assembler.line_no
    report.cut_lines = assembler.too_long
    for number, finding in history.findings():
        report.findings += 1
        emit(_finding_record(path, number, finding))
    return report


def _emit_parts(
    path: str, digest: LineDigest, report: FileReport, history: TrendHistory, emit: Emit
) -> None:
    """Emit what the digest gathered, line by line: each line's metric, then its findings."""
    parts = digest.take()
    log_format = digest.format or "generic"
    report.format = log_format
    if parts.first_unparsed is not None and report.first_unparsed_line is None:
        report.count_error(*parts.first_unparsed)
        report.unparsed -= 1  # counted below, with the others
    report.unparsed += parts.unparsed_lines
    if parts.run_end_line is not None:
        history.end_line = parts.run_end_line
    findings = iter(parts.findings)
    pending = next(findings, None)
    for number, metric in parts.metrics:
        while pending is not None and pending[0] < number:
            report.findings += 1
            emit(_finding_record(path, *pending))
            pending = next(findings, None)
        report.metrics += 1
        _emit_metric(path, number, log_format, metric, emit)
        history.add(number, metric)
    while pending is not None:
        report.findings += 1
        emit(_finding_record(path, *pending))
        pending = next(findings, None)


def _detected(handle: IO[bytes], formats: RegistryFormats, path: str) -> str:
    """The format detection picks from the file's first lines (beside a forced one)."""
    handle.seek(0)
    sample = [text for _, text in islice(read_lines(handle), SAMPLE_LINES)]
    return formats.detect(sample, os.path.abspath(path))


_CONTROL = frozenset(chr(code) for code in range(32)) - {"\t", "\r", "\x1b"} | {"\ufffd"}
"""Characters no text log holds: control bytes (tab, CR redraws and ANSI colour escapes are
text) and the replacement of invalid UTF-8."""


def _is_text(line: str) -> bool:
    return bool(line.strip()) and _CONTROL.isdisjoint(line)


def iter_lines(handle: IO[bytes]) -> Iterator[str]:
    """Every line of a binary file as `parse` reads it (`read_lines`), blank ones as `""`.

    The n-th string is line n, for callers that number lines by counting them.
    """
    last = 0
    for number, text in read_lines(handle):
        yield from [""] * (number - last - 1)
        yield text
        last = number


def _parse_document(path: str, handle: IO[bytes], log_format: str, emit: Emit) -> FileReport:
    handle.seek(0)
    data = handle.read(MAX_DOCUMENT_BYTES + 1)
    if len(data) > MAX_DOCUMENT_BYTES:
        raise ValueError(f"{log_format} document larger than {MAX_DOCUMENT_BYTES} bytes")
    report = FileReport(log_format)
    history = TrendHistory()
    # a document has no log lines: `line` counts its records (log_history entries)
    metrics, unparsed = read_document(log_format, data.decode("utf-8", "replace"))
    for entry, reason in unparsed:
        report.count_error(entry, reason, "entry")
    for number, metric in enumerate(metrics, 1):
        if metric.unparsed_values:
            report.count_error(number, left_out(metric), "record")
        report.metrics += 1
        _emit_metric(path, number, log_format, metric, emit)
        for found in findings_from_metric(metric):
            emit(_finding_record(path, number, found))
        history.add(number, metric)
    for number, finding in history.findings():
        emit(_finding_record(path, number, finding))
    report.lines = data.count(b"\n") + 1
    return report


def _emit_metric(path: str, number: int, log_format: str, metric: LogMetric, emit: Emit) -> None:
    for name, value in metric.values:
        record: dict[str, Any] = {
            "file": path,
            "line": number,
            "format": log_format,
            "metric": name,
            "value": json_number(value),
        }
        if metric.step is not None:
            record["step"] = metric.step
        if metric.epoch is not None:
            record["epoch"] = json_number(metric.epoch)
        if metric.taken_at is not None:
            record["taken_at"] = metric.taken_at
        emit(record)


def _finding_record(path: str, number: int, finding: LogFinding) -> dict[str, Any]:
    return {"file": path, "line": number, "finding": finding.kind, "evidence": finding.evidence}


def json_number(value: float) -> float | int | str:
    """A value as strict JSON allows: NaN and infinities become "nan", "inf", "-inf"."""
    if math.isfinite(value):
        return int(value) if value.is_integer() and abs(value) < 2**53 else value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def _json_emitter(out: IO[str]) -> Emit:
    def emit(record: dict[str, Any]) -> None:
        out.write(json.dumps(record, allow_nan=False) + "\n")

    return emit


class _TableEmitter:
    """Readable rows: `file:line  format  step  epoch  metric  value`, findings marked `!`.

    The FILE:LINE column keeps its width: a longer path loses its middle (`short_where`).
    """

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.header_done = False

    def __call__(self, record: dict[str, Any]) -> None:
        if not self.header_done:
            self.out.write(
                f"{'FILE:LINE':<{PATH_WIDTH}} {'FORMAT':<{FORMAT_WIDTH}} {'STEP':>8} "
                f"{'EPOCH':>7}  {'METRIC':<28} VALUE\n"
            )
            self.header_done = True
        # The path and the evidence are the log's (its name, its lines): shown, not obeyed.
        where = short_where(visible(record["file"]), record["line"])
        if "finding" in record:
            self.out.write(
                visible(f"{where:<{PATH_WIDTH}} ! {record['finding']}: {record['evidence']}") + "\n"
            )
            return
        step = record.get("step", "")
        epoch = record.get("epoch", "")
        value = record["value"]
        shown = f"{value:.6g}" if isinstance(value, float) else str(value)
        self.out.write(
            visible(
                f"{where:<{PATH_WIDTH}} {record['format']:<{FORMAT_WIDTH}} "
                f"{step!s:>8} {epoch!s:>7}  {record['metric']:<28} {shown}"
            )
            + "\n"
        )


def short_where(path: str, line: int, width: int = PATH_WIDTH) -> str:
    """`path:line` in at most `width` characters.

    A longer path keeps its start and its end (the file name), joined by `…`.
    """
    suffix = f":{line}"
    room = width - len(suffix)
    if len(path) <= room:
        return path + suffix
    head = max(room // 3, 1)
    tail = max(room - head - 1, 1)
    return f"{path[:head]}…{path[-tail:]}{suffix}"


def _reason(error: OSError) -> str:
    if isinstance(error, IsADirectoryError):
        return "is a directory, not a log file"
    if isinstance(error, FileNotFoundError):
        return "no such file"
    if isinstance(error, PermissionError):
        return "permission denied"
    return error.strerror or str(error)
