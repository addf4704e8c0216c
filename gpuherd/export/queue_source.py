"""The job queue's state for a scrape: this user's jobs by state, and the host's reservations.

Read only, and only what exists: the queue database (`gpuherd.queue.store`) is opened once it is
there, never created, and the shared reservation ledger (`gpuherd.queue.ledger`) is read under
its lock (held for a directory listing; given up after `LOCK_TIMEOUT_S`, which fails that
scrape's queue part only). Reservations are judged against the GPU totals the exporter last
read (`gpu_totals`), as a runner judges them; a GPU it has not read yet (or an exporter fed no GPU
readings) is not judged by size, so a claim larger than its GPU is exported as claimed until the
GPU's reading comes. A replayed host has no queue of this machine, so only live exporters
(`serve-metrics` without `--replay`, the live dashboard, `record`) read it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from gpuherd.export.queue_metrics import QueueState
from gpuherd.queue.jobs import JobState
from gpuherd.queue.ledger import Ledger, default_ledger_dir
from gpuherd.queue.state_files import DB_FILE
from gpuherd.queue.store import QueueStore, default_state_dir

LOCK_TIMEOUT_S = 1.0
"""A scrape waits at most this long for the ledger's lock (a queue deciding holds it briefly)."""


class QueueReader:
    """A `QueueProvider`: call it for the queue's state now.

    Args:
        state_dir: The person's queue directory (default: the queue's own default).
        ledger_dir: The host's shared ledger (default: the queue's own default).
        warn: Told what the ledger finds odd (an entry it refuses), once each.
        gpu_totals: Total memory per GPU UUID as last read; the exporter sets it
            (`use_gpu_totals`) from its own GPU readings.
    """

    def __init__(
        self,
        state_dir: Path | None = None,
        ledger_dir: Path | None = None,
        warn: object = None,
        gpu_totals: Callable[[], Mapping[str, int]] | None = None,
    ) -> None:
        self.state_dir = state_dir if state_dir is not None else default_state_dir()
        self.ledger_dir = ledger_dir if ledger_dir is not None else default_ledger_dir()
        self._warn = warn if callable(warn) else (lambda text: None)
        self._store: QueueStore | None = None
        self._ledger: Ledger | None = None
        self._lock = threading.Lock()  # two scrapes at once share one connection
        self._gpu_totals = gpu_totals

    def use_gpu_totals(self, gpu_totals: Callable[[], Mapping[str, int]]) -> None:
        """Judge reservations against these GPU totals (called at each scrape)."""
        self._gpu_totals = gpu_totals

    def __call__(self) -> QueueState:
        """Jobs per state (every state, 0 when none) and live reserved bytes per GPU UUID."""
        return QueueState(self._jobs(), self._reserved())

    def _jobs(self) -> dict[str, int]:
        counts = dict.fromkeys((state.value for state in JobState), 0)
        with self._lock:
            if self._store is None:
                if not (self.state_dir / DB_FILE).is_file():
                    return counts  # no queue yet: no jobs, and nothing is created
                self._store = QueueStore.open(self.state_dir)
            jobs = self._store.jobs()
        for job in jobs:
            counts[job.state.value] += 1
        return counts

    def _reserved(self) -> dict[str, int]:
        if not self.ledger_dir.is_dir():
            return {}
        if self._ledger is None:
            # One ledger for every scrape, so what it cannot trust is named once, not per scrape.
            self._ledger = Ledger(
                self.ledger_dir, on_warning=self._warn, lock_timeout_s=LOCK_TIMEOUT_S
            )
        ledger = self._ledger
        totals = self._gpu_totals() if self._gpu_totals is not None else {}
        with ledger.locked() as view:
            live = view.live(gpu_totals=totals)
        out: dict[str, int] = {}
        for reservation in live:
            out[reservation.gpu_uuid] = out.get(reservation.gpu_uuid, 0) + reservation.bytes
        return out

    def close(self) -> None:
        """Close the queue database."""
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None
