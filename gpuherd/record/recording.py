"""One recording: writer, recorder, peak sampler and log tasks, started and stopped together."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from collectors.base import Collector, CollectorEvent, Sampled
from collectors.machine.nvml import NvmlBackend
from collectors.roles import LOG, SLURM, role_of
from collectors.samples import DiscoveredLog, DiscoveredLogs, GpuTick, LogBatch
from collectors.session.session_format import (
    COMMAND_EXIT_FILE,
    COMMAND_LOG_FILE,
    EVENT,
    META,
    PEAK_TRACE_COLUMNS,
    PEAK_TRACE_FILE,
)
from collectors.slurm.samples import SlurmTick
from gpuherd.common.safe_files import Directory
from gpuherd.record.drain import LogDrain, unread_events
from gpuherd.record.logsink import LogSink
from gpuherd.record.peaks import DEFAULT_PEAK_INTERVAL_S, PeakSampler, PeakTracker
from gpuherd.record.recorder import Recorder
from gpuherd.record.slurm_record import SlurmRecord, slurm_meta
from gpuherd.session.session import SessionWriteError, SessionWriter
from gpuherd.sources import (
    DISCOVERY_INTERVAL_S,
    LiveSources,
    SourceOptions,
    live_sources,
    peak_probe,
)

if TYPE_CHECKING:
    from gpuherd.summary.summary import Summary

COMMAND_TASK = "command"
FIRST_READING_WAIT_S = 2.0
"""How long `start` waits for the first fast reading, so the command's baseline is known."""
FIRST_SLURM_WAIT_S = 5.0
"""How long `start` waits, inside a Slurm job, for the first reading of the job (`squeue`):
without it a command that ends at once would leave no row of its job in `slurm.csv`."""
TRACE_ENV = "GPUHERD_PEAK_TRACE"
"""When set (to anything but empty or 0), every fast reading is also written to
`peak_trace.csv` at the end, so a benchmark can check each reading against a known workload."""


@dataclass(frozen=True, slots=True)
class RecordEvent:
    """A lifecycle event (`start`, `exit`, `signal`, `disk_full`) for `events.jsonl`.

    It travels through the recorder's queue like a sample, so the one writer thread writes it.
    """

    fields: dict[str, Any]


def _started(found: DiscoveredLogs) -> list[DiscoveredLog]:
    """The logs whose tails the running set started for the scan `found`."""
    started = set(found.started or ())
    return [log for log in found.logs if log.task_id in started]


def _write_record_event(writer: SessionWriter, event: RecordEvent) -> None:
    writer.write_event(event.fields)


@dataclass
class RecordingOptions:
    """What to record."""

    logs: Sequence[str] = ()
    """Training logs to follow (paths or globs); each file is a task named by its absolute
    path. A missing path is waited for; globs are expanded again every `discovery_interval_s`
    and once more at the end."""
    watch: Sequence[str] = ()
    """Directories to look for run files in (Lightning, Hugging Face, `*.log`), again every
    `discovery_interval_s` and once more at the end."""
    discovery_interval_s: float = DISCOVERY_INTERVAL_S
    """Seconds between two scans of the `logs` globs and `watch` directories."""
    command: Sequence[str] = ()
    """The recorded command (for `meta.json` and the `command` task); empty when none."""
    interval_s: float = 1.0
    """Seconds between full samples."""
    peak_interval_s: float = DEFAULT_PEAK_INTERVAL_S
    """Seconds between fast memory readings; 0 turns the fast sampler off."""
    own_collectors: bool = True
    """Run NVML, host and log collectors here. False when a dashboard runs them and feeds
    `Recording.emit`; the fast peak sampler always runs here."""
    nvml_backend: NvmlBackend | None = None
    """NVML seam for tests; `None` is the real driver."""
    extra_meta: dict[str, Any] = field(default_factory=dict)
    tap: Callable[[CollectorEvent], None] | None = None
    """Also gets every collector event, on the collector's thread (the metrics exporter)."""
    on_peaks: Callable[[GpuTick, Mapping[str, int]], None] | None = None
    """Told each row's fast-sampler peaks per GPU UUID, on the writer thread (the exporter)."""


class FollowedLog(Protocol):
    """A source of role `log` as the drain needs it: the path it follows, a way to wake it."""

    path: str

    def wake(self) -> None:
        """Read now instead of at the next interval."""


class Recording:
    """Start with `start()`, feed nothing (or `emit` from a dashboard), end with `stop()`.

    Raises from `start()`: `gpuherd.session.session.SessionError` subclasses (locked, existing
    session,
    unwritable directory); nothing is left running then.
    """

    def __init__(self, directory: str | os.PathLike[str], options: RecordingOptions) -> None:
        self.directory = Path(directory)
        self.options = options
        self.tracker = PeakTracker(trace=os.environ.get(TRACE_ENV, "") not in ("", "0"))
        self.command_log = self.directory / COMMAND_LOG_FILE
        self.command_exit = self.directory / COMMAND_EXIT_FILE
        labels = {str(self.command_log): COMMAND_TASK} if options.command else {}
        self.log_sink = LogSink(labels)
        self.drain = LogDrain(self.log_sink.offsets, self.log_sink.seen)
        """Reads the logs to their end at `stop`; `cancel_drain` cuts it short."""
        self.drain_notice: Callable[[str], None] | None = None
        """Told when reading the logs to their end at `stop` takes a while (for stderr)."""
        self.sources: LiveSources | None = None
        """This machine's sources (`gpuherd.sources`), when the recording runs its own; their
        tail supervisor decides what is followed. A dashboard feeding `emit` runs its own."""
        if options.own_collectors:
            self.sources = live_sources(
                SourceOptions(
                    interval_s=options.interval_s,
                    logs=options.logs,
                    watch=options.watch,
                    exclude=[str(self.directory)],
                    discovery_interval_s=options.discovery_interval_s,
                    headless=True,
                    nvml_backend=options.nvml_backend,
                )
            )
        self.writer: SessionWriter | None = None
        self.recorder: Recorder | None = None
        self.sampler: PeakSampler | None = None
        self.warnings: list[str] = []
        """Things worth telling the person after `stop` (nothing is lost because of them)."""
        self.stopped_at_duration = False
        """--duration ended the command: the person's own limit, not a failure."""
        self._stopped = False
        self._lock = threading.Lock()
        self._opened: Directory | None = None
        """The session directory as the writer opened it: later writes go there, not by path."""

    @property
    def stop_event(self) -> threading.Event:
        """Set when the recording has to end early (a write failed: disk full)."""
        assert self.recorder is not None
        return self.recorder.stop_event

    @property
    def error(self) -> SessionWriteError | None:
        """Why recording stopped early, if it did."""
        return None if self.recorder is None else self.recorder.error

    def _collectors(self) -> list[Collector[Any]]:
        sources = self.sources
        if sources is None:
            return []
        paths = [log.task_id for log in sources.discovery.scan()] if sources.has_logs else []
        paths += [str(self.command_log)] if self.options.command else []
        tails = [sources.tail(path) for path in paths if sources.tails.claim(path)]
        collectors = [*sources.machine(), *tails]
        if self._rescans():
            collectors.append(sources.discovery_collector())
        return collectors

    def _rescans(self) -> bool:
        """Whether anything can appear later: a `--log` glob or a `--watch` directory."""
        return self.sources is not None and self.sources.rescans()

    def _tails(self) -> list[FollowedLog]:
        """The tails this recording runs (those it started with and those found later).

        Known by their role, not their class: a log's tail and a tracker run's reader alike.
        """
        if self.recorder is None:
            return []
        return [
            cast("FollowedLog", c)
            for c in self.recorder.collectors
            if getattr(c, "role", None) == LOG
        ]

    def _on_discovered(self, writer: SessionWriter, found: DiscoveredLogs) -> None:
        """A discovery scan while recording (on the writer thread): note what it started.

        Scans a dashboard feeds in (`own_collectors=False`) are its business: it runs the tails.
        """
        if not self._rescans():
            return
        for log in _started(found):
            writer.write_event(
                {
                    "t": found.taken_at,
                    "kind": EVENT.log_found,
                    "task": log.task_id,
                    "source": log.source,
                }
            )

    def _final_scan(self) -> None:
        """Follow files that appeared since the last scan, so that draining reads them too.

        Lightning writes `metrics.csv` when `fit` ends, often after the last periodic scan.
        """
        assert self.recorder is not None
        if not self._rescans() or self.sources is None:
            return
        now = time.time()
        found = self.recorder.running.discovered(DiscoveredLogs(now, self.sources.discovery.scan()))
        for log in _started(found):
            self.recorder.emit(
                Sampled(
                    "record",
                    RecordEvent(
                        {
                            "t": now,
                            "kind": EVENT.log_found,
                            "task": log.task_id,
                            "source": log.source,
                        }
                    ),
                )
            )

    def start(self) -> None:
        """Open the session directory and start every thread."""
        o = self.options
        meta = {
            META.interval_s: o.interval_s,
            META.peak_interval_s: o.peak_interval_s if o.peak_interval_s > 0 else None,
            **slurm_meta(os.environ),
            **o.extra_meta,
        }
        if o.command:
            meta[META.command] = list(o.command)
        self.writer = SessionWriter(self.directory, meta)
        self._opened = self.writer.opened_directory()
        if o.command:
            # Created here, new (O_EXCL, never through a link), before the supervisor appends.
            self.writer.create_empty(COMMAND_LOG_FILE)
        sources = self.sources
        collectors = self._collectors()
        slurm_names = {c.name for c in collectors if role_of(c) == SLURM}
        slurm_heard = threading.Event()

        def tap(event: CollectorEvent) -> None:  # on the sources' threads
            if event.source in slurm_names:
                slurm_heard.set()  # a tick, or why there is none
            if o.tap is not None:
                o.tap(event)

        self.recorder = Recorder(
            self.writer,
            collectors,
            pid_watch=sources.pid_watch if sources is not None else None,
            tails=sources.tails if sources is not None and self._rescans() else None,
            peaks=self._take_peaks,
            tap=tap if slurm_names else o.tap,
            handlers={
                LogBatch: self.log_sink,
                RecordEvent: _write_record_event,
                DiscoveredLogs: self._on_discovered,
                SlurmTick: SlurmRecord(),
            },
        )
        if o.peak_interval_s > 0:
            probe = peak_probe(o.peak_interval_s, o.nvml_backend)
            self.sampler = PeakSampler(probe, self.tracker, self.recorder.emit)
        self.recorder.start()
        if self.sampler is not None:
            self.sampler.start()
            self.sampler.wait_first(FIRST_READING_WAIT_S)
        if slurm_names and "SLURM_JOB_ID" in os.environ:
            # the job's first reading (or its failure) before the command starts: a command
            # that ends at once keeps its job in slurm.csv
            slurm_heard.wait(FIRST_SLURM_WAIT_S)

    def _take_peaks(self, tick: GpuTick) -> dict[str, int]:
        peaks = self.tracker.take(tick)
        if self.options.on_peaks is not None:
            self.options.on_peaks(tick, peaks)
        return peaks

    def emit(self, event: CollectorEvent) -> None:
        """Feed one collector event (thread-safe); the dashboard's collectors call this."""
        if self.recorder is not None and not self._stopped:
            self.recorder.emit(event)

    def event(self, kind: str, **fields: Any) -> None:
        """Write a lifecycle event to `events.jsonl` (through the writer thread)."""
        self.emit(Sampled("record", RecordEvent({"t": time.time(), "kind": kind, **fields})))

    def command_started(self, pid: int) -> None:
        """The recorded command runs as `pid`: fix the baseline, write the `start` event."""
        self.tracker.start_run(pid)
        self.event(EVENT.start, pid=pid, command=list(self.options.command))

    def drain_logs(self, paths: Sequence[str] | None = None) -> None:
        """Wait until every followed log is recorded up to its size now, however long it takes.

        The command's final lines (an OOM message, the last metrics, a flood of them) are often
        written just before it exits, after the tail's last read. Only `cancel_drain` (a second
        interrupt), a failed write or a tail that makes no progress at all (a hung filesystem)
        end the wait early; `stop` then reports what was left unread.

        Args:
            paths: the logs to wait for; default: the ones this recording's own tails follow.
        """
        tails = self._tails()
        if paths is None:
            paths = [tail.path for tail in tails]

        def wake() -> None:
            for tail in tails:
                tail.wake()

        self.drain.run(
            paths, wake=wake, failed=lambda: self.error is not None, notice=self.drain_notice
        )

    def cancel_drain(self) -> None:
        """Stop reading the logs to their end (a second interrupt); safe from a signal handler."""
        self.drain.cancel.set()

    def stop(self, **meta_updates: Any) -> SessionWriteError | None:
        """Stop every thread, write what is pending, close the session with `meta_updates`.

        Returns the write error that ended (or ends) the recording, if any.
        """
        with self._lock:
            if self._stopped or self.writer is None or self.recorder is None:
                return self.error
            self._stopped = True
        if self.sampler is not None:
            self.sampler.stop()
        self._final_scan()
        if self.options.own_collectors:  # a dashboard drains its own tails before `stop`
            self.drain_logs()
        stopped = self.recorder.shutdown()  # sets stop_event: no tail starts from here on
        if self.sources is not None:
            self.sources.close()
        if not stopped:
            # The writer thread is stuck (an fsync on a hung network filesystem): using the
            # writer from here would race it. What it flushed before is on disk.
            return SessionWriteError(
                f"recording stopped: writing to {self.directory} hangs; "
                "the session was not closed (its last seconds may be "
                "missing)"
            )
        error = self.recorder.error
        final = self.tracker.final_tick()
        dropped = unread_events(self.drain, self.log_sink)
        self.warnings += [event["msg"] for event in dropped]
        try:  # the writer thread has ended: this thread may use the writer now
            if error is None and final is not None:
                self.writer.write_gpu_tick(final, self.tracker.take(final))
            for event in dropped if error is None else ():
                self.writer.write_event(event)
        except SessionWriteError as failure:
            error = failure
        meta = dict(meta_updates)
        meta[META.run_peaks] = [p.as_dict() for p in self.tracker.run_peaks()]
        meta[META.tasks] = self.log_sink.tasks_meta()
        unread = {e["path"]: e["unread_bytes"] for e in dropped if "unread_bytes" in e}
        for task in meta[META.tasks]:
            task["unread_bytes"] = unread.get(task["path"], 0)
        if self.sampler is not None and self.sampler.unavailable:
            meta[META.peak_sampler] = f"unavailable: {self.sampler.unavailable}"
        try:
            if error is None:
                self.log_sink.flush(self.writer)
            self.writer.close(**meta)
        except SessionWriteError as failure:
            error = error or failure
        if self.tracker.trace is not None and error is None:
            try:
                self._write_trace()
            except OSError as failure:
                self.warnings.append(f"could not write {PEAK_TRACE_FILE}: {failure.strerror}")
        return error

    def _write_trace(self) -> None:
        assert self.tracker.trace is not None
        lines = [",".join(PEAK_TRACE_COLUMNS) + "\n"]
        lines += [
            f"{t!r},{index},{used}\n"
            for t, readings in self.tracker.trace
            for index, used in enumerate(readings)
            if used is not None
        ]
        if self._opened is not None:
            self._opened.write_atomic(PEAK_TRACE_FILE, "".join(lines).encode("utf-8"))

    def write_summary(self) -> Summary:
        """Write `summary.json` and `summary.md` into the directory recorded into, then let it go.

        Through the descriptor the writer opened and checked, not the path, which may name
        something else by now.
        """
        from gpuherd.summary.report import write_summary  # pandas, only now

        try:
            return write_summary(self.directory, self._opened)
        finally:
            self.release_directory()

    def release_directory(self) -> None:
        """Close the session directory's descriptor (idempotent)."""
        if self._opened is not None:
            self._opened.close()
            self._opened = None
