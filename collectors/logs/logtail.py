"""Follow one training log: wake on file events, read new bytes by offset, parse what they hold."""

from __future__ import annotations

import dataclasses
import glob
import os
import threading
import time
from collections.abc import Callable

from collectors.base import CollectorError
from collectors.logs.logtail_digest import LineDigest
from collectors.logs.logtail_document import DocumentFollower
from collectors.logs.logtail_files import FileFollower
from collectors.logs.logtail_formats import LogFormats, RegistryFormats
from collectors.logs.logtail_lines import DEFAULT_MAX_LINE_BYTES, LineAssembler
from collectors.logs.logtail_waker import TailWaker, WakeSubscription, needs_polling
from collectors.roles import LOG
from collectors.samples import LogBatch
from parsers.model import LogMetric

READ_BUDGET_BYTES = 64 * 1024
"""Most bytes read per sample; a big backlog is read over several samples without waiting, so
memory stays bounded by one batch however large the file is. One read chunk: the metrics of a
batch live until the batch is written, and the fewer of them are alive at once, the less the
garbage collector has to walk (a 1 MiB batch of short lines cost about 1 us a line in
collections, 64 KiB half of that)."""
SETTLE_S = 0.05
"""Shortest time between two reads: a writer flushing every line is read in small batches,
not one wake-up per line."""
DETACHED_POLL_S = 0.2
"""How often a renamed file that may still grow is looked at (no file event names it)."""
DOCUMENT_RETRIES = 3
"""Reads of an unchanged document that fails to parse before it is reported as an error (a
half-written file parses on the next try)."""


class LogTailCollector:
    """Follows one training log and parses what is appended to it; one `LogBatch` per sample.

    `sample()` itself waits: until the shared `TailWaker` reports a change of the file, or at most
    `poll_interval_s`, after which the file is looked at anyway. Hence `interval_s` (the pause
    `run_collector` adds between samples) is 0. On filesystems where inotify misses writes
    (NFS, CIFS, Lustre, FUSE; see `needs_polling`), or with `poll=True`, no watch is placed and
    the file is checked every `poll_interval_s`.
    """

    def __init__(
        self,
        path: str,
        *,
        format: str | None = None,
        poll_interval_s: float = 1.0,
        poll: bool = False,
        waker: TailWaker | None = None,
        formats: LogFormats | None = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        read_budget_bytes: int = READ_BUDGET_BYTES,
        settle_s: float = SETTLE_S,
        mounts_path: str = "/proc/mounts",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = f"log:{path}"
        self.role = LOG
        self.path = path
        self.task_id = path
        """The task this tail feeds: one task per followed log."""
        self.interval_s = 0.0
        self.poll_interval_s = poll_interval_s
        self.force_poll = poll
        self.polling = poll
        """Whether the file is polled instead of watched (decided in `open()`)."""
        self.watch_error: str | None = None
        """Why the waker could not watch the file's directory, while it cannot: the tail
        reads every `poll_interval_s` instead, and its next batch says so once (`notice`)."""
        self._notice: str | None = None
        self._forced_format = format
        self._waker = waker
        self._own_waker = False
        self._formats = formats
        self._max_line_bytes = max_line_bytes
        self._budget = read_budget_bytes
        self._settle_s = settle_s
        self._mounts_path = mounts_path
        self._clock = clock
        self._wake = threading.Event()
        self._sub: WakeSubscription | None = None
        self._more = True  # read without waiting: at start, and while a backlog remains
        self._last_read = 0.0
        self._document: str | None = None
        self._follower: FileFollower | None = None
        self._docs: DocumentFollower | None = None
        self._digest: LineDigest | None = None
        self._lines = LineAssembler(max_line_bytes)
        self._announced = 0
        self._lines_total = 0  # complete lines read in every generation
        self._doc_emitted = 0
        self._doc_generation = 0
        self._doc_failures = 0

    def open(self) -> None:
        """Pick the parsers, decide between watching and polling, and subscribe to wake-ups."""
        if self._formats is None:
            self._formats = RegistryFormats()
        self._document = self._formats.document_format(self.path, self._forced_format)
        if self._document is not None:
            self._docs = DocumentFollower(self.path)
        else:
            self._follower = FileFollower(self.path)
            self._digest = LineDigest(self._formats, self.path, self._forced_format)
        self.polling = self.force_poll or needs_polling(self.path, self._mounts_path)
        if not self.polling:
            if self._waker is None:
                self._waker, self._own_waker = TailWaker(), True
            created = self._follower.file_created if self._follower is not None else None
            self._sub = self._waker.subscribe(self.path, self._wake, on_created=created)

    def sample(self) -> LogBatch:
        """Wait for a change (or `poll_interval_s`), then read what is new.

        Raises:
            CollectorError: the path is a directory, unreadable, or (for a whole-file format)
                too large or malformed; the next sample tries again.
        """
        self._wait()
        batch = self._sample_document() if self._docs is not None else self._sample_lines()
        if self._notice is not None:
            batch, self._notice = dataclasses.replace(batch, notice=self._notice), None
        return batch

    def close(self) -> None:
        """Drop the watch and close the file; stop the waker if this collector made it."""
        if self._waker is not None and self._sub is not None:
            self._waker.unsubscribe(self._sub)
            self._sub = None
        if self._own_waker and self._waker is not None:
            self._waker.close()
            self._waker, self._own_waker = None, False
        if self._follower is not None:
            self._follower.close()

    @property
    def pending_bytes(self) -> int:
        """Bytes held for the line still being written (bounded by the line cap)."""
        return self._lines.pending_bytes

    def wake(self) -> None:
        """Cut the current wait short (at shutdown, or when something else saw a change)."""
        self._wake.set()

    def _wait(self) -> None:
        if self._sub is not None and self._waker is not None:
            self._watch(self._sub, self._waker)
        if self._more:  # a backlog or a new file generation: read on without waiting
            self._more = False
            self._wake.clear()
            return
        detached = self._follower is not None and self._follower.detached
        self._wake.wait(
            min(self.poll_interval_s, DETACHED_POLL_S) if detached else self.poll_interval_s
        )
        self._wake.clear()
        since = time.monotonic() - self._last_read
        if since < self._settle_s:
            time.sleep(self._settle_s - since)
        self._last_read = time.monotonic()

    def _watch(self, sub: WakeSubscription, waker: TailWaker) -> None:
        """Keep the file watched; when inotify refuses, poll and say why once."""
        if waker.watch(sub) or sub.error is None:
            self.watch_error = None
            return
        if sub.error != self.watch_error:
            self.watch_error = sub.error
            self._notice = (
                f"{sub.error}; reading the log every {self.poll_interval_s:g} s "
                "instead of on each write"
            )

    def _sample_lines(self) -> LogBatch:
        follower, digest = self._follower, self._digest
        assert follower is not None and digest is not None
        now = self._clock()  # lines without a time of their own carry the batch's
        if not follower.check():
            return LogBatch(
                self.path,
                now,
                digest.format,
                waiting=True,
                generation=follower.generation,
                file_path=self.path,
            )
        starts = follower.generation != self._announced
        if starts:
            self._announced = follower.generation
            self._lines = LineAssembler(self._max_line_bytes)
            digest.restart()
        lines_before, long_before = self._lines.line_no, self._lines.too_long
        self._read(follower, digest, now)
        if follower.ending is not None and not self._more:
            digest.add(self._lines.flush(), now)
            digest.detect_if_due(force=True)
            follower.end_generation()
            self._more = True
        else:
            update = self._lines.take_update()
            if update is not None:
                digest.add_update(*update, now)
            digest.detect_if_due(force=True)
        too_long = self._lines.too_long - long_before  # cut, their heads parsed
        parts = digest.take()
        lost = follower.take_lost()
        self._lines_total += self._lines.line_no - lines_before
        if (
            digest.format is not None
            and self._formats is not None
            and self._formats.is_document(digest.format)
        ):
            return self._become_document(digest.format, now)
        started = follower.started if starts else None
        return LogBatch(
            self.path,
            now,
            digest.format,
            parts.metrics,
            parts.findings,
            lines_read=self._lines.line_no - lines_before,
            unparsed_lines=parts.unparsed_lines,
            too_long_lines=too_long,
            findings_dropped=parts.findings_dropped,
            lost_bytes=lost,
            lost_lines_estimate=self._lines_in(lost, follower.data_bytes),
            generation=self._announced,
            rotated=started == "rotated",
            truncated=started == "truncated",
            recreated=started == "recreated",
            file_path=self.path,
            offset_bytes=follower.offset,
            size_bytes=follower.size,
            modified_at=follower.modified_at,
            run_end_line=parts.run_end_line,
        )

    def _lines_in(self, lost_bytes: int, data_bytes: int) -> int | None:
        """`lost_bytes` in lines, at the bytes per line of what was read."""
        if not lost_bytes or not self._lines_total or not data_bytes:
            return None
        return round(lost_bytes * self._lines_total / data_bytes)

    def _become_document(self, name: str, now: float) -> LogBatch:
        """Read this file as a whole document from now on.

        Its text, not its name, said so once its first lines were written (the name said a
        line log when the tail opened).
        """
        if self._follower is not None:
            self._follower.close()
        self._follower, self._digest = None, None
        self._document, self._docs = name, DocumentFollower(self.path)
        self._more = True  # parse the document on the next sample, without waiting
        return self._document_batch(now, (), True, False)

    def _read(self, follower: FileFollower, digest: LineDigest, now: float) -> None:
        budget = self._budget
        while budget > 0:
            data = follower.read_chunk()
            if not data:
                return
            budget -= len(data)
            digest.add(self._lines.feed(data), now)
            if len(data) < follower.chunk_bytes:
                return
        self._more = True

    def _sample_document(self) -> LogBatch:
        docs, formats, name = self._docs, self._formats, self._document
        assert docs is not None and formats is not None and name is not None
        docs.path = self._resolve_pattern()
        if self._sub is not None:
            self._sub.path = docs.path  # watch the directory of the match, not of the pattern
        text = docs.read_if_changed()
        taken_at = self._clock()
        if text is None:
            return self._document_batch(taken_at, (), docs.size is None, False)
        try:
            metrics = formats.parse_document(name, text)
        except ValueError as error:
            self._doc_failures += 1
            if self._doc_failures >= DOCUMENT_RETRIES:
                raise CollectorError(
                    f"{docs.path}: cannot parse as {name}: {error}", title="log"
                ) from error
            return self._document_batch(taken_at, (), False, False)
        docs.accept()
        self._doc_failures = 0
        restarted = len(metrics) < self._doc_emitted or self._doc_generation == 0
        if restarted:
            self._doc_generation += 1
            self._doc_emitted = 0
        fresh = tuple(
            (
                index + 1,
                m if m.taken_at is not None else LogMetric(m.values, m.step, m.epoch, taken_at),
            )
            for index, m in enumerate(metrics)
            if index >= self._doc_emitted
        )
        self._doc_emitted = len(metrics)
        return self._document_batch(taken_at, fresh, False, restarted and self._doc_generation > 1)

    def _document_batch(
        self,
        taken_at: float,
        metrics: tuple[tuple[int, LogMetric], ...],
        waiting: bool,
        truncated: bool,
    ) -> LogBatch:
        docs, formats = self._docs, self._formats
        assert docs is not None and formats is not None
        findings = tuple(
            (line_no, finding)
            for line_no, metric in metrics
            for finding in formats.findings_from_metric(metric)
        )
        size = docs.size or 0
        return LogBatch(
            self.path,
            taken_at,
            self._document,
            metrics,
            findings,
            lines_read=len(metrics),
            generation=self._doc_generation,
            truncated=truncated,
            waiting=waiting,
            file_path=docs.path,
            offset_bytes=size,
            size_bytes=docs.size,
            modified_at=docs.modified_at,
        )

    def _resolve_pattern(self) -> str:
        """The newest file a glob `path` matches (checkpoint-N/trainer_state.json)."""
        if not glob.has_magic(self.path):
            return self.path
        newest, newest_key = self.path, (-1, "")
        for match in glob.glob(self.path):
            try:
                key = (os.stat(match).st_mtime_ns, match)
            except OSError:
                continue
            if key > newest_key:
                newest, newest_key = match, key
        return newest
