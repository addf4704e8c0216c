"""The queue store: states, order, compare-and-set transitions, files, damage and races."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from gpuherd.queue.jobs import Job, JobSpec, JobState
from gpuherd.queue.store import QueueError, QueueStore

GIB = 1 << 30


def spec(n: int = 0, **fields: object) -> JobSpec:
    base: dict[str, object] = {"argv": ("python", f"train{n}.py"), "cwd": "/work"}
    return JobSpec(**(base | fields))  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path) -> QueueStore:
    opened = QueueStore.open(tmp_path / "state")
    yield opened
    opened.close()


def ids(jobs: list[Job]) -> list[int]:
    return [job.id for job in jobs]


def waiting_order(store: QueueStore) -> list[int]:
    return ids(store.jobs((JobState.WAITING,)))


def run_job(store: QueueStore, job_id: int) -> None:
    assert store.mark_launching(job_id, ["GPU-a"], [0], f"/s/{job_id}")
    assert store.mark_running(job_id, 4242, 1000.5, 1001.0)


def test_a_job_reads_back_as_it_was_added(store: QueueStore) -> None:
    first = store.add(spec(1))
    given = spec(
        2,
        env=(("A", "1"), ("B", "x=y")),
        name="big",
        gpus=2,
        vram_bytes=20 * GIB,
        max_util_pct=5.0,
        after=first.id,
        retry_oom=True,
    )
    second = store.add(given)
    assert (first.id, first.position, second.id, second.position) == (1, 1, 2, 2)
    assert store.get(2) == second
    assert second.spec == given
    assert second.state is JobState.WAITING and second.attempts == 0
    assert second.owner_uid == os.getuid() and second.gpu_uuids == () and second.pid is None


def test_jobs_list_waiting_in_line_then_the_rest_by_id(store: QueueStore) -> None:
    for n in range(4):
        store.add(spec(n))
    run_job(store, 2)
    store.move(4, 1)
    assert ids(store.jobs()) == [4, 1, 3, 2]
    assert ids(store.jobs((JobState.RUNNING,))) == [2]
    assert store.jobs((JobState.DONE,)) == []


@pytest.mark.parametrize(
    ("job_id", "to", "order", "place"),
    [
        (3, 1, [3, 1, 2, 4], 1),  # to the front
        (4, 2, [1, 4, 2, 3], 2),  # into the middle
        (1, 4, [2, 3, 4, 1], 4),  # to the end
        (2, 99, [1, 3, 4, 2], 4),  # past the end: last
        (2, 2, [1, 2, 3, 4], 2),  # where it is already
    ],
)
def test_move_puts_a_waiting_job_at_its_new_place(
    store: QueueStore, job_id: int, to: int, order: list[int], place: int
) -> None:
    for n in range(4):
        store.add(spec(n))
    store.move(job_id, to)
    assert waiting_order(store) == order
    assert order.index(job_id) + 1 == place


def test_move_counts_places_among_waiting_jobs_only(store: QueueStore) -> None:
    for n in range(4):
        store.add(spec(n))
    run_job(store, 1)
    store.move(4, 1)
    assert waiting_order(store) == [4, 2, 3]
    store.move(2, 3)
    assert waiting_order(store) == [4, 3, 2]
    assert store.add(spec(9)).id == 5 and waiting_order(store) == [4, 3, 2, 5]


def test_move_refusals(store: QueueStore) -> None:
    store.add(spec(1))
    store.add(spec(2))
    run_job(store, 1)
    with pytest.raises(QueueError, match=r"^job 1 is running: only a waiting job can move$"):
        store.move(1, 1)
    with pytest.raises(QueueError, match=r"^position 0 does not exist: 1 is the first in line$"):
        store.move(2, 0)
    with pytest.raises(QueueError, match=r"^no job 9 in the queue$"):
        store.move(9, 1)
    assert waiting_order(store) == [2]


def test_cancel_a_waiting_job_ends_it_and_a_running_one_is_only_marked(store: QueueStore) -> None:
    store.add(spec(1))
    store.add(spec(2))
    run_job(store, 2)
    cancelled = store.request_cancel(1)
    assert cancelled.state is JobState.CANCELLED and cancelled.ended_at is not None
    marked = store.request_cancel(2)
    assert marked.state is JobState.RUNNING and marked.cancel_requested
    with pytest.raises(QueueError, match=r"^job 1 already ended \(cancelled\)$"):
        store.request_cancel(1)
    assert store.mark_ended(2, JobState.CANCELLED, 143, 2000.0, None)
    with pytest.raises(QueueError, match=r"^job 2 already ended \(cancelled\)$"):
        store.request_cancel(2)


def test_remove_refuses_running_jobs_and_jobs_others_wait_for(store: QueueStore) -> None:
    store.add(spec(1))
    store.add(spec(2))
    store.add(spec(3, after=2))
    run_job(store, 1)
    with pytest.raises(
        QueueError,
        match=r"^job 1 is running: cancel it first "
        r"\(gpuherd queue cancel 1\)$",
    ):
        store.remove(1)
    with pytest.raises(
        QueueError,
        match=r"^job 2 cannot be removed: job 3 waits for it "
        r"\(--after 2\); remove or cancel that first$",
    ):
        store.remove(2)
    assert store.remove(3).id == 3
    assert store.remove(2).state is JobState.WAITING
    assert ids(store.jobs()) == [1]
    assert store.add(spec(4)).id == 4, "ids are never reused: --after keeps its meaning"


def test_transitions_are_compare_and_set(store: QueueStore) -> None:
    store.add(spec(1))
    store.add(spec(2))
    assert not store.mark_running(1, 10, 1.0, 2.0), "waiting cannot become running"
    assert not store.mark_ended(1, JobState.DONE, 0, 3.0, None), "nor end"
    assert store.mark_launching(1, ["GPU-a", "GPU-b"], [0, 1], "/s/1")
    assert not store.mark_launching(1, ["GPU-c"], [2], "/s/x"), "never launched twice"
    job = store.get(1)
    assert (job.state, job.attempts, job.gpu_uuids, job.gpu_indices, job.session_dir) == (
        JobState.LAUNCHING,
        1,
        ("GPU-a", "GPU-b"),
        (0, 1),
        "/s/1",
    )
    assert store.mark_running(1, 10, 1.25, 2.0)
    assert not store.mark_running(1, 11, 1.5, 2.5)
    assert (store.get(1).pid, store.get(1).pid_start_time) == (10, 1.25)
    assert store.mark_ended(1, JobState.FAILED, 1, 3.0, 5 * GIB, reason="boom")
    assert not store.mark_ended(1, JobState.DONE, 0, 4.0, None)
    ended = store.get(1)
    assert (
        ended.state,
        ended.exit_code,
        ended.ended_at,
        ended.peak_vram_bytes,
        ended.wait_reason,
    ) == (JobState.FAILED, 1, 3.0, 5 * GIB, "boom")
    assert store.get(2).state is JobState.WAITING and store.get(2).attempts == 0
    with pytest.raises(ValueError, match="running is not an end state"):
        store.mark_ended(2, JobState.RUNNING, None, 1.0, None)


def test_requeue_keeps_id_place_and_attempts_with_a_new_need(store: QueueStore) -> None:
    store.add(spec(1, vram_bytes=4 * GIB, retry_oom=True))
    store.add(spec(2))
    run_job(store, 1)
    assert store.mark_ended(1, JobState.FAILED, 1, 3.0, 4 * GIB)
    again = store.requeue(1, 6 * GIB)
    assert (again.id, again.position, again.state, again.attempts, again.spec.vram_bytes) == (
        1,
        1,
        JobState.WAITING,
        1,
        6 * GIB,
    )
    assert (again.pid, again.session_dir, again.exit_code, again.gpu_uuids) == (
        None,
        None,
        None,
        (),
    )
    assert waiting_order(store) == [1, 2]
    with pytest.raises(
        QueueError,
        match=r"^job 1 is waiting: only a failed job can be "
        r"requeued$",
    ):
        store.requeue(1, 8 * GIB)


def test_wait_reason_says_why_a_job_waits_or_why_it_ended(store: QueueStore) -> None:
    store.add(spec(1))
    store.add(spec(2))
    store.set_wait_reason(1, "GPU 0: 3 GiB free")
    assert (store.get(1).wait_reason, store.get(2).wait_reason) == ("GPU 0: 3 GiB free", None)
    assert store.mark_launching(1, ["GPU-a"], [0], "/s/1")
    assert store.get(1).wait_reason is None, "launching clears why it waited"
    assert store.mark_ended(1, JobState.FAILED, None, 5.0, None)
    store.set_wait_reason(1, "could not start: no such command: x")
    assert store.get(1).wait_reason == "could not start: no such command: x"
    store.set_wait_reason(9, "gone")  # removed meanwhile: nothing to do, no error
    assert ids(store.jobs()) == [2, 1]


def test_pause_survives_reopening(tmp_path: Path) -> None:
    first = QueueStore.open(tmp_path)
    assert not first.paused()
    first.set_paused(True)
    first.close()
    again = QueueStore.open(tmp_path)
    assert again.paused()
    again.set_paused(False)
    assert not again.paused()
    again.close()


def test_last_peak_is_the_newest_ended_run_of_the_same_command_here(store: QueueStore) -> None:
    argv = ("python", "train.py")
    for n, (peak, ended_at) in enumerate([(3 * GIB, 10.0), (7 * GIB, 30.0), (5 * GIB, 20.0)]):
        store.add(JobSpec(argv=argv, cwd="/work"))
        run_job(store, n + 1)
        store.mark_ended(n + 1, JobState.DONE if n else JobState.FAILED, 0, ended_at, peak)
    store.add(JobSpec(argv=argv, cwd="/work"))  # waiting: no peak
    assert store.last_peak_for(list(argv), "/work") == 7 * GIB
    assert store.last_peak_for(argv, "/elsewhere") is None
    assert store.last_peak_for(("python", "train.py", "--x"), "/work") is None


def test_files_are_private(tmp_path: Path) -> None:
    state = tmp_path / "a" / "state"
    store = QueueStore.open(state)
    store.add(spec(1))
    assert stat.S_IMODE(os.stat(state).st_mode) == 0o700
    for name in ("queue.db", "queue.db-wal", "queue.db-shm"):
        assert stat.S_IMODE(os.stat(state / name).st_mode) == 0o600, name
    assert store._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store.close()


def test_a_state_dir_others_may_write_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o777)
    with pytest.raises(QueueError) as error:
        QueueStore.open(state)
    assert error.value.msg == (
        f"{state}: the state directory is writable by other users "
        f"(mode 0777); refusing it (chmod go-w {state})"
    )
    assert list(state.iterdir()) == []


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        (
            0o644,
            "other users may read it (mode 0644) and it holds your commands and environments; "
            "refusing it (chmod 600 {db})",
        ),
        (
            0o620,
            "the queue database is writable by other users (mode 0620); refusing it "
            "(chmod go-w {db})",
        ),
    ],
)
def test_a_database_open_to_others_is_refused(tmp_path: Path, mode: int, why: str) -> None:
    QueueStore.open(tmp_path).close()
    db = tmp_path / "queue.db"
    db.chmod(mode)
    with pytest.raises(QueueError) as error:
        QueueStore.open(tmp_path)
    assert error.value.msg == f"{db}: " + why.format(db=db)


def test_a_symlinked_database_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere.db").write_bytes(b"")
    (tmp_path / "queue.db").symlink_to(tmp_path / "elsewhere.db")
    with pytest.raises(QueueError, match="queue.db: is a symbolic link; refusing it"):
        QueueStore.open(tmp_path)


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another user needs root")
def test_a_database_of_another_user_is_refused(tmp_path: Path) -> None:
    QueueStore.open(tmp_path).close()
    os.chown(tmp_path / "queue.db", 4321, -1)
    with pytest.raises(QueueError) as error:
        QueueStore.open(tmp_path)
    assert error.value.msg == (
        f"{tmp_path / 'queue.db'}: the queue database is owned by uid "
        f"4321, not by you (uid 0); refusing it"
    )
    os.chown(tmp_path, 4321, -1)
    with pytest.raises(QueueError, match="the state directory is owned by uid 4321"):
        QueueStore.open(tmp_path)


def backups(directory: Path) -> list[Path]:
    return sorted(directory.glob("queue.db.corrupt-*"))


def test_garbage_in_the_database_is_kept_aside_and_named(tmp_path: Path) -> None:
    store = QueueStore.open(tmp_path)
    store.add(spec(1))
    store.close()
    garbage = bytes(range(256)) * 64
    (tmp_path / "queue.db").write_bytes(garbage)
    with pytest.raises(QueueError) as error:
        QueueStore.open(tmp_path)
    [backup] = backups(tmp_path)
    assert error.value.msg == (
        f"{tmp_path / 'queue.db'}: not a valid queue database (file is "
        f"not a database); it was moved to {backup} and nothing was "
        "reset: the next command starts an empty queue"
    )
    assert backup.read_bytes() == garbage
    assert not (tmp_path / "queue.db").exists()
    fresh = QueueStore.open(tmp_path)
    assert fresh.jobs() == []
    fresh.close()


def test_a_damaged_page_is_found_and_kept_aside(tmp_path: Path) -> None:
    store = QueueStore.open(tmp_path)
    for n in range(200):
        store.add(spec(n, name="x" * 200))
    store.close()
    db = tmp_path / "queue.db"
    data = bytearray(db.read_bytes())
    assert len(data) > 8 * 4096
    data[2 * 4096 : 3 * 4096] = b"\xff" * 4096  # one whole page of table data
    db.write_bytes(bytes(data))
    with pytest.raises(QueueError, match="not a valid queue database") as error:
        QueueStore.open(tmp_path)
    [backup] = backups(tmp_path)
    assert str(backup) in error.value.msg and backup.read_bytes() == bytes(data)


def test_a_foreign_sqlite_file_is_not_taken_for_a_queue(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "queue.db")
    db.execute("CREATE TABLE photos (id INTEGER)")
    db.commit()
    db.close()
    (tmp_path / "queue.db").chmod(0o600)
    with pytest.raises(
        QueueError,
        match=r"not a valid queue database \(it holds tables but no "
        r"queue schema version\)",
    ):
        QueueStore.open(tmp_path)
    assert len(backups(tmp_path)) == 1


def test_a_newer_schema_is_refused_and_left_alone(tmp_path: Path) -> None:
    QueueStore.open(tmp_path).close()
    db = sqlite3.connect(tmp_path / "queue.db")
    db.execute("PRAGMA user_version = 7")
    db.close()
    with pytest.raises(QueueError) as error:
        QueueStore.open(tmp_path)
    assert error.value.msg == (
        f"{tmp_path / 'queue.db'}: queue schema 7 is newer than this "
        "gpuherd reads (1); upgrade gpuherd"
    )
    assert backups(tmp_path) == [] and (tmp_path / "queue.db").exists()


def test_the_store_can_be_used_from_another_thread(store: QueueStore) -> None:
    store.add(spec(1))
    seen: list[bool] = []
    worker = threading.Thread(
        target=lambda: seen.append(store.mark_launching(1, ["GPU-a"], [0], "/s/1"))
    )
    worker.start()
    worker.join()
    assert seen == [True] and store.get(1).state is JobState.LAUNCHING


RACER = """
import sys
from pathlib import Path
from gpuherd.queue.store import QueueStore
store = QueueStore.open(Path(sys.argv[1]))
won = [i for i in range(1, int(sys.argv[2]) + 1)
       if store.mark_launching(i, ["GPU-" + sys.argv[3]], [0], "/s")]
print(" ".join(map(str, won)))
"""


def test_processes_racing_to_launch_each_job_launch_it_once(tmp_path: Path) -> None:
    store = QueueStore.open(tmp_path)
    jobs = 40
    for n in range(jobs):
        store.add(spec(n))
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(tmp_path), str(jobs), str(k)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for k in range(4)
    ]
    won = [[int(i) for i in racer.communicate(timeout=120)[0].split()] for racer in racers]
    assert all(racer.returncode == 0 for racer in racers)
    assert sorted(i for ids_won in won for i in ids_won) == list(range(1, jobs + 1))
    for k, ids_won in enumerate(won):
        for i in ids_won:
            job = store.get(i)
            assert (job.attempts, job.gpu_uuids) == (1, (f"GPU-{k}",))
    store.close()
