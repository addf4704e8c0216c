"""The dashboard's look at the queue: who runs it, and looking creates or changes nothing."""

from __future__ import annotations

import os
from pathlib import Path

from gpuherd.queue.headless import runner_lock
from gpuherd.queue.store import QueueStore
from gpuherd.queue.watch import QueueWatch, runner_pid
from tests.queue_helpers import mark_spec


def test_the_runner_is_whoever_holds_the_lock_not_whoever_the_file_names(tmp_path: Path
                                                                          ) -> None:
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
        tmp_path: Path) -> None:
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
        (second.id, 1, "waiting", 3 << 30), (first.id, 2, "waiting", 2 << 30)]
    assert {p.name: p.read_bytes() for p in state.iterdir() if p.suffix == ".db"} == before
