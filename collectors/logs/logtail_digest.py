"""Digest the lines of one log, followed or finished: detection, metrics, findings, counts."""

from __future__ import annotations

import gc
from collections.abc import Iterable
from dataclasses import dataclass

from collectors.base import CollectorUnavailable
from collectors.logs.logtail_formats import LineParser, LogFormats
from collectors.logs.tracebacks import TracebackHold
from parsers.model import LogFinding, LogMetric
from parsers.registry import LATE_DETECT_LINES

DETECT_LINES = 200
"""Lines a detection looks at, as `gpuherd parse` does (banners can fill the first dozens)."""
DETECT_HOLD_BYTES = 1024 * 1024
"""Most bytes of lines held back while waiting for detection."""
MAX_FINDINGS_PER_BATCH = 200


class _NoLines:
    """The parser of a document format's lines: none of them is a metric on its own."""

    def feed(self, line: str) -> LogMetric | None:
        """Give nothing: the document is parsed whole."""
        return None

    def reset(self) -> None:
        """Nothing to forget."""


@dataclass(frozen=True, slots=True)
class DigestParts:
    """What the lines read since the last `take()` gave."""

    metrics: tuple[tuple[int, LogMetric], ...]
    findings: tuple[tuple[int, LogFinding], ...]
    unparsed_lines: int
    findings_dropped: int
    first_unparsed: tuple[int, str] | None = None
    """The first unparsed line (or one with values left out) since the last `take()`, and why."""
    run_end_line: int | None = None
    """The last line since the last `take()` that says the run ended (`ends_run`)."""


def left_out(metric: LogMetric) -> str:
    """Why a metric's line counts as unparsed although it gave values."""
    return (
        f"{metric.unparsed_values} value(s) left out (not a number, a step or epoch that "
        "is no count, or infinite where only a loss may be); the others kept"
    )


class LineDigest:
    """Feeds lines of one file generation to the right parser and gathers what they give.

    Until the format is known (forced, or detected at the end of the first read or after
    `DETECT_LINES` lines), lines wait in a small buffer; then they are parsed in order, so none
    is lost to detection. A format detected from fewer lines is provisional: the lines of each
    read wait again, detection runs on the first lines including them, and they are parsed with
    its answer, until `DETECT_LINES` have been seen. A `generic` log whose lines gave no metric
    yet keeps waiting that way for `LATE_DETECT_LINES` more lines, each read's lines checked
    for a console format (`LogFormats.detect_late`), so banners before a progress bar do not
    fix the format. A new generation (`restart()`) detects again unless the format is forced.
    A forced format reads what the detected one would: a console format's own lines and the
    plain `key=value` lines beside them (`parsers.registry.make_parser`).

    `gpuherd parse` digests a finished file with this same class (no `received_at`, no cap on
    findings), so a file gives the same metrics and findings whichever way it is read.
    """

    def __init__(
        self,
        formats: LogFormats,
        path: str,
        forced_format: str | None = None,
        max_findings: int = MAX_FINDINGS_PER_BATCH,
    ) -> None:
        self._formats = formats
        self._path = path
        self._forced = forced_format
        self._max_findings = max_findings
        self.format: str | None = None
        """The format in use; `None` while detection waits for lines."""
        self._parser: LineParser | None = None
        self._waiting: list[tuple[int, str, float | None, bool]] = []
        self._first_lines: list[tuple[int, str]] = []
        self._sampling = forced_format is None  # gathering `_first_lines` for detection
        self._held_bytes = 0
        self._provisional = False
        self._late_lines = 0  # lines of a `generic` log checked by `detect_late`
        self._generic_metrics = False  # the generic parser found a metric: a generic log
        self._metrics: list[tuple[int, LogMetric]] = []
        self._findings: list[tuple[int, LogFinding]] = []
        self._unparsed = 0
        self._first_unparsed: tuple[int, str] | None = None
        self._dropped = 0
        self._run_end: int | None = None
        self._tracebacks = TracebackHold()
        if forced_format is not None:
            self._use(forced_format)

    def finish(self) -> None:
        """The file generation has ended: detect the lines still waiting, end a held traceback."""
        self.detect_if_due(force=True)
        ended = self._tracebacks.flush()
        if ended is not None:
            self._keep_finding(*ended)

    def restart(self) -> None:
        """A new file generation begins: forget parser state, detect again unless forced."""
        self.finish()
        if self._forced is not None:
            if self._parser is not None:
                self._parser.reset()
        else:
            self.format, self._parser = None, None
            self._first_lines, self._provisional, self._sampling = [], False, True
            self._late_lines, self._generic_metrics = 0, False

    def add(self, lines: Iterable[tuple[int, str]], received_at: float | None) -> None:
        """Digest complete lines `(line_no, text)`; `received_at` stamps untimed metrics."""
        rest = iter(lines)
        while self._sampling or self._holding():
            item = next(rest, None)
            if item is None:
                return
            line_no, text = item
            self._scan(line_no, text)
            if self._sampling and len(self._first_lines) < DETECT_LINES:
                self._first_lines.append((line_no, text))
            if self._holding():
                self._hold(line_no, text, received_at, False)
            else:
                self._parse(line_no, text, received_at, False)
        # Detection has settled, and nothing makes lines wait again before `restart`: the
        # checks above are skipped for the rest, the hot path of a log written fast.
        self._parse_lines(rest, received_at, False, scan=True)

    def add_update(self, line_no: int, text: str, received_at: float | None) -> None:
        r"""Digest the newest state of a `\r`-updated line still being written."""
        self._scan(line_no, text)
        if self._holding():
            self._hold(line_no, text, received_at, True)
        else:
            self._parse(line_no, text, received_at, True)

    def detect_if_due(self, force: bool = False) -> None:
        """Detect the format; called at the end of each read (`force`) and on restart.

        Without `force`, held lines wait until `DETECT_LINES` of them (or `DETECT_HOLD_BYTES`)
        have gathered; at the end of a read they are detected whatever their number.
        """
        if self._forced is not None or not self._waiting:
            return
        if not force and len(self._waiting) < DETECT_LINES and self._held_bytes < DETECT_HOLD_BYTES:
            return
        self._detect()
        held, self._waiting, self._held_bytes = self._waiting, [], 0
        for line_no, text, received_at, update in held:
            self._parse(line_no, text, received_at, update)

    def take(self) -> DigestParts:
        """Hand over what was gathered and start gathering afresh."""
        findings = tuple(sorted(self._findings, key=lambda item: item[0]))
        parts = DigestParts(
            tuple(self._metrics),
            findings,
            self._unparsed,
            self._dropped,
            self._first_unparsed,
            self._run_end,
        )
        self._metrics, self._findings, self._unparsed, self._dropped = [], [], 0, 0
        self._first_unparsed, self._run_end = None, None
        return parts

    def _holding(self) -> bool:
        """Whether new lines wait for a detection before they are parsed."""
        return (
            self._parser is None
            or self._provisional
            or (
                self.format == "generic"
                and not self._generic_metrics
                and self._late_lines < LATE_DETECT_LINES
                and self._forced is None
            )
        )

    def _detect(self) -> None:
        earlier: list[str] = []  # lines a provisional format has parsed already
        if self._parser is None or self._provisional:
            if self._parser is not None:
                first_waiting = self._waiting[0][0]
                earlier = [text for number, text in self._first_lines if number < first_waiting]
            sample = [text for _, text in self._first_lines] or [
                text for _, text, _, _ in self._waiting
            ]
            self._provisional = len(self._first_lines) < DETECT_LINES
            name = self._formats.detect(sample, self._path)
            if not self._provisional:  # settled: the sample is not needed any more
                self._sampling, self._first_lines = False, []
        else:  # a generic log of banners so far: do these lines start a console format?
            self._late_lines += len(self._waiting)
            lines = [text for _, text, _, _ in self._waiting[:DETECT_LINES]]
            name = self._formats.detect_late(lines, self._path) or "generic"
        if name != self.format:
            self._use(name)
            self._warm(earlier)

    def _warm(self, lines: list[str]) -> None:
        """Feed a new parser the lines read before it, dropping what they give.

        A provisional format read them already (their metrics are out); its successor still
        needs the state they set, such as an epoch header or the start of a table.
        """
        assert self._parser is not None
        for text in lines:
            try:
                self._parser.feed(text)
            except ValueError:
                pass

    def _use(self, name: str) -> None:
        if self._formats.is_document(name):
            # A whole-file format (a trainer state whose first read was partial): no line
            # gives a metric; the tail sees `format` and reads the file as a document.
            self._parser, self.format = _NoLines(), name
            return
        try:
            self._parser = self._formats.make_parser(name, self._path)
        except (KeyError, ValueError) as error:
            raise CollectorUnavailable(
                f"{self._path}: unknown log format {name!r} ({error})", title="log"
            ) from error
        self.format = name

    def _hold(self, line_no: int, text: str, received_at: float | None, update: bool) -> None:
        self._waiting.append((line_no, text, received_at, update))
        self._held_bytes += len(text)
        if len(self._waiting) >= DETECT_LINES or self._held_bytes >= DETECT_HOLD_BYTES:
            self.detect_if_due()

    def _parse(self, line_no: int, text: str, received_at: float | None, update: bool) -> None:
        self._parse_lines(((line_no, text),), received_at, update)

    def _parse_lines(
        self,
        lines: Iterable[tuple[int, str]],
        received_at: float | None,
        update: bool,
        scan: bool = False,
    ) -> None:
        """Parse lines with the format's parser; `scan` runs the findings scan on each first."""
        assert self._parser is not None
        feed = self._parser.feed
        scan_line = self._formats.scan_line if scan else None
        ends_run = self._formats.ends_run
        from_metric = self._formats.findings_from_metric
        keep = self._metrics.append
        tracebacks = self._tracebacks
        # Counted in locals and stored once: this loop runs for every line of a fast log.
        unparsed = 0
        first_unparsed = self._first_unparsed
        metrics_before = len(self._metrics)
        # Every parsed line allocates a few tuples and a `LogMetric` that all stay alive until
        # `take()`: the cyclic collector finds nothing among them, yet runs again and again
        # over the growing batch (about a tenth of the time of a timestamped log's lines).
        # They hold no cycles, so collection is paused for this loop only; the `finally`
        # turns it back on if it was on before.
        collecting = gc.isenabled()
        gc.disable()
        try:
            for line_no, text in lines:
                if scan_line is not None:
                    if tracebacks.held is not None:
                        self._traceback_line(text)
                    finding = scan_line(text)
                    if finding is not None:
                        self._add_finding(line_no, finding)
                    if ends_run(text):
                        self._run_end = line_no
                try:
                    metric = feed(text)
                except ValueError as error:
                    unparsed += 1
                    if first_unparsed is None:
                        first_unparsed = (line_no, str(error)[:200])
                    continue
                if metric is None:
                    continue
                if metric.unparsed_values:  # e.g. a bad CSV cell
                    unparsed += 1
                    if first_unparsed is None:
                        first_unparsed = (line_no, left_out(metric))
                if metric.taken_at is None and received_at is not None:
                    metric = LogMetric(metric.values, metric.step, metric.epoch, received_at)
                keep((line_no, metric))
                findings = from_metric(metric)
                if findings:
                    for finding in findings:
                        self._add_finding(line_no, finding)
        finally:
            if collecting:
                gc.enable()
            if not update:  # an update is parsed again when its line completes: count it then
                self._unparsed += unparsed
                self._first_unparsed = first_unparsed
            if self.format == "generic" and len(self._metrics) > metrics_before:
                self._generic_metrics = True

    def _scan(self, line_no: int, text: str) -> None:
        if self._tracebacks.held is not None:
            self._traceback_line(text)
        finding = self._formats.scan_line(text)
        if finding is not None:
            self._add_finding(line_no, finding)
        if self._formats.ends_run(text):
            self._run_end = line_no

    def _traceback_line(self, text: str) -> None:
        ended = self._tracebacks.line(text)
        if ended is not None:
            self._keep_finding(*ended)

    def _add_finding(self, line_no: int, finding: LogFinding) -> None:
        if finding.kind == "traceback":  # reported at its last line, unless a Ctrl-C ends it
            ended = self._tracebacks.hold(line_no, finding)
            if ended is not None:
                self._keep_finding(*ended)
            return
        self._keep_finding(line_no, finding)

    def _keep_finding(self, line_no: int, finding: LogFinding) -> None:
        if len(self._findings) < self._max_findings:
            self._findings.append((line_no, finding))
        else:
            self._dropped += 1
