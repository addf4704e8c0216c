"""The job queue's state in the exporter: a real queue database and a real shared ledger."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from collectors.base import Sampled
from gpuherd.export.address import parse_listen
from gpuherd.export.exporter import Exporter
from gpuherd.export.queue_source import QueueReader
from gpuherd.queue.jobs import JobSpec, JobState
from gpuherd.queue.ledger import Ledger
from gpuherd.queue.store import QueueStore
from tests.fakes import GiB
from tests.prometheus import free_port, get, wait_for
from tests.queue_helpers import Gpu, tick

REPO = Path(__file__).resolve().parents[2]
SESSION = REPO / "tests" / "data" / "sessions" / "e2e"


def a_queue(state: Path, ledger_dir: Path) -> None:
    """Two waiting jobs, one cancelled, one running and one done; 20 + 4 GiB reserved on one
    GPU by this (live) process and 8 GiB on another."""
    store = QueueStore.open(state)
    try:
        ids = [store.add(JobSpec(argv=("python", f"job{n}.py"), cwd="/tmp")).id for n in range(5)]
        store.request_cancel(ids[2])
        for job_id in ids[3:]:
            assert store.mark_launching(job_id, ["GPU-q"], [0], f"/tmp/s{job_id}")
            assert store.mark_running(job_id, os.getpid(), time.time(), time.time())
        assert store.mark_ended(ids[4], JobState.DONE, 0, time.time(), GiB)
    finally:
        store.close()
    started = psutil.Process().create_time()
    with Ledger(ledger_dir).locked() as view:
        for uuid, size, job in (
            ("GPU-q", 20 * GiB, "4"),
            ("GPU-q", 4 * GiB, "5"),
            ("GPU-r", 8 * GiB, "6"),
        ):
            view.reserve(uuid, size, job, os.getpid(), started, time.time() + 600)


def test_jobs_by_state_and_reserved_bytes_per_gpu(tmp_path: Path) -> None:
    a_queue(tmp_path / "state", tmp_path / "ledger")
    reader = QueueReader(tmp_path / "state", tmp_path / "ledger")
    try:
        state = reader()
    finally:
        reader.close()
    assert state.jobs_by_state == {
        "waiting": 2,
        "launching": 0,
        "running": 1,
        "done": 1,
        "failed": 0,
        "cancelled": 1,
    }
    assert state.reserved_bytes_by_uuid == {"GPU-q": 24 * GiB, "GPU-r": 8 * GiB}


def test_untrusted_ledger_files_are_named_once_across_scrapes(tmp_path: Path) -> None:
    a_queue(tmp_path / "state", tmp_path / "ledger")
    for n in range(3):
        (tmp_path / "ledger" / f"junk-{n}").write_text("x")
    said: list[str] = []
    reader = QueueReader(tmp_path / "state", tmp_path / "ledger", warn=said.append)
    try:
        for _ in range(3):
            assert reader().reserved_bytes_by_uuid == {"GPU-q": 24 * GiB, "GPU-r": 8 * GiB}
    finally:
        reader.close()
    assert said == [
        f"ledger: 3 files in {tmp_path / 'ledger'} are not counted (the first, "
        "junk-0: not a ledger entry); each is named once"
    ]


def test_no_queue_yet_is_every_state_at_zero_and_nothing_is_created(tmp_path: Path) -> None:
    # docs/fleet.md: 0 when none; an absent series reads as "no data", not as "no jobs"
    state_dir, ledger_dir = tmp_path / "state", tmp_path / "ledger"
    reader = QueueReader(state_dir, ledger_dir)
    state = reader()
    assert state.jobs_by_state == {
        "waiting": 0,
        "launching": 0,
        "running": 0,
        "done": 0,
        "failed": 0,
        "cancelled": 0,
    }
    assert state.reserved_bytes_by_uuid == {}
    assert not state_dir.exists() and not ledger_dir.exists()


def scrape(port: int) -> dict[tuple[str, str], float]:
    status, body = get(f"http://127.0.0.1:{port}/metrics")
    if status != 200:
        return {}
    return {
        (s.name, s.labels.get("state") or s.labels.get("uuid", "")): s.value
        for f in text_string_to_metric_families(body)
        for s in f.samples
        if s.name.startswith("gpuherd_queue_")
    }


@pytest.mark.parametrize("replay", [False, True])
def test_a_live_exporter_serves_this_machines_queue_and_a_replay_does_not(
    tmp_path: Path, replay: bool
) -> None:
    a_queue(tmp_path / "state", tmp_path / "ledger")
    port = free_port()
    env = {
        **os.environ,
        "GPUHERD_STATE_DIR": str(tmp_path / "state"),
        "GPUHERD_LEDGER_DIR": str(tmp_path / "ledger"),
    }
    extra = ["--replay", str(SESSION), "--speed", "1000"] if replay else []
    process = subprocess.Popen(
        [sys.executable, "-m", "gpuherd", "serve-metrics", str(port), *extra],
        cwd=REPO,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: get(f"http://127.0.0.1:{port}/metrics")[0] == 200, what="the exporter")
        if replay:
            time.sleep(0.5)
            assert scrape(port) == {}
            return
        found = wait_for(lambda: scrape(port), what="the queue's series")
        assert found == {
            ("gpuherd_queue_jobs", "waiting"): 2,
            ("gpuherd_queue_jobs", "launching"): 0,
            ("gpuherd_queue_jobs", "running"): 1,
            ("gpuherd_queue_jobs", "done"): 1,
            ("gpuherd_queue_jobs", "failed"): 0,
            ("gpuherd_queue_jobs", "cancelled"): 1,
            ("gpuherd_queue_reserved_bytes", "GPU-q"): 24 * GiB,
            ("gpuherd_queue_reserved_bytes", "GPU-r"): 8 * GiB,
        }
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert "Traceback" not in stderr and "scrape failed" not in stderr


def test_a_reservation_larger_than_its_gpu_is_not_exported_once_the_gpu_is_read(
    tmp_path: Path,
) -> None:
    """A `2**60`-byte claim tied to a live process: judged against the exporter's own reading."""
    a_queue(tmp_path / "state", tmp_path / "ledger")
    with Ledger(tmp_path / "ledger").locked() as view:
        view.reserve(
            "GPU-q", 2**60, "7", os.getpid(), psutil.Process().create_time(), time.time() + 600
        )
        view.reserve(
            "GPU-r", 72 * GiB, "8", os.getpid(), psutil.Process().create_time(), time.time() + 600
        )  # 8 + 72 = the whole GPU: still counted
    said: list[str] = []
    reader = QueueReader(tmp_path / "state", tmp_path / "ledger", warn=said.append)
    exporter = Exporter(
        parse_listen(str(free_port())), "box-1", queue=reader, report=lambda line: None
    )
    try:
        # No GPU read yet: nothing to judge sizes by, so the claim is exported as made.
        assert reader().reserved_bytes_by_uuid == {"GPU-q": 24 * GiB + 2**60, "GPU-r": 80 * GiB}
        exporter.emit(
            Sampled("gpus", tick([Gpu("GPU-q", total=80 * GiB), Gpu("GPU-r", total=80 * GiB)]))
        )
        assert reader().reserved_bytes_by_uuid == {"GPU-q": 24 * GiB, "GPU-r": 80 * GiB}
    finally:
        exporter.close()
    assert len(said) == 1 and said[0].endswith(
        f"it reserves {2**60} bytes on GPU-q, more than that GPU's total ({80 * GiB} bytes); "
        "not counted"
    )
