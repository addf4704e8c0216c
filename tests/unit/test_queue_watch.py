"""The dashboard's look at the queue: who runs it, and looking creates or changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gpuherd.queue.headless import runner_lock
from gpuherd.queue.store import QueueStore
from gpuherd.queue.watch import QueueWatch, runner_pid
from tests.queue_helpers import mark_spec


def test_the_runner_is_whoever_holds_the_lock_not_whoever_the_file_names(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert runner_pid(state) is None
    with runner_lock(state):
        assert runner_pid(state) == os.getpid()
    # The file still names this (live) process, but no runner holds the lock any more.
    assert (state / "runner.lock").read_text().strip() == str(os.getpid())
    assert runner_pid(state) is None
    # Without the kernel's lock table, a live process with the written pid is taken for it.
    assert runner_pid(state, locks=tmp_path / "no-such-file") == os.getpid()


def test_a_look_reports_jobs_in_line_and_pause_and_leaves_the_database_alone(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    store = QueueStore.open(state)
    first = store.add(mark_spec("a", tmp_path, 2))
    second = store.add(mark_spec("b", tmp_path, 3))
    store.move(second.id, 1)
    store.set_paused(True)
    store.close()
    before = {p.name: p.read_bytes() for p in state.iterdir() if p.suffix == ".db"}
    watch = QueueWatch(state, clock=lambda: 42.0)
    try:
        look = watch.sample()
    finally:
        watch.close()
    assert look.exists and look.paused and look.taken_at == 42.0 and look.runner_pid is None
    assert [(j.id, j.place, j.state, j.need_bytes) for j in look.jobs] == [
        (second.id, 1, "waiting", 3 << 30),
        (first.id, 2, "waiting", 2 << 30),
    ]
    assert {p.name: p.read_bytes() for p in state.iterdir() if p.suffix == ".db"} == before


def test_a_database_replaced_or_removed_meanwhile_is_seen_as_it_is_now(tmp_path: Path) -> None:
    state = tmp_path / "state"
    store = QueueStore.open(state)
    store.add(mark_spec("a", tmp_path, 2))
    store.close()
    watch = QueueWatch(state)
    try:
        assert [j.name for j in watch.sample().jobs] == ["sh"]
        # Moved aside (as `queue ls` does with a corrupt one) and a new queue started.
        (state / "queue.db").rename(state / "old.db")
        for side in ("queue.db-wal", "queue.db-shm"):
            (state / side).unlink(missing_ok=True)
        assert not watch.sample().exists
        store = QueueStore.open(state)
        store.add(mark_spec("b", tmp_path, 1))
        store.add(mark_spec("c", tmp_path, 1))
        store.close()
        look = watch.sample()
        assert look.exists and [j.need_bytes for j in look.jobs] == [1 << 30, 1 << 30]
        # An empty file is a queue being created, not a broken one.
        (state / "queue.db").rename(state / "new.db")
        (state / "queue.db").touch(mode=0o600)
        assert not watch.sample().exists
    finally:
        watch.close()


ADD_ONE = (
    "import sys\nfrom pathlib import Path\nfrom gpuherd.queue.store import QueueStore\n"
    "from tests.queue_helpers import mark_spec\n"
    "store = QueueStore.open(Path(sys.argv[1]))\n"
    "store.add(mark_spec('late', Path(sys.argv[2]), 1))\nstore.close()\n"
)


def test_a_look_reads_the_jobs_again_only_after_another_process_changed_them(
    tmp_path: Path,
) -> None:
    # The dashboard looks every second; an unchanged queue costs a `PRAGMA data_version`, not
    # the jobs table (read once per commit of another connection).
    state = tmp_path / "state"
    store = QueueStore.open(state)
    store.add(mark_spec("a", tmp_path, 2))
    store.close()
    watch = QueueWatch(state)
    try:
        assert len(watch.sample().jobs) == 1 and watch.reads == 1
        for _ in range(3):
            assert len(watch.sample().jobs) == 1
        assert watch.reads == 1
        subprocess.run(
            [sys.executable, "-c", ADD_ONE, str(state), str(tmp_path)],
            check=True,
            cwd=Path(__file__).resolve().parents[2],
            timeout=60,
        )
        assert len(watch.sample().jobs) == 2 and watch.reads == 2
        assert len(watch.sample().jobs) == 2 and watch.reads == 2
    finally:
        watch.close()
