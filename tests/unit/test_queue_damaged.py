"""A queue.db that passes quick_check but holds rows gpuherd never wrote: each is named, per row.

As the attack ran it: rows edited with the sqlite3 shell (an unknown state, argv not JSON, a
text vram_bytes) and a dropped table, in a real database file. Every reader (`ls`, `ls
--json`, `show`, `rm`, the runner, the dashboard's look) lists the rest of the queue and names
each damaged row; a dropped table is one line.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from collectors.samples import QueueSnapshot
from gpuherd.queue.jobs import JobSpec, JobState
from gpuherd.queue.store import QueueStore
from gpuherd.queue.watch import QueueWatch
from tests.queue_helpers import GiB, Gpu, Queue
from tests.unit.test_queue_cli import ok, queue

DAMAGE = {
    2: ("UPDATE jobs SET state = 'zombie' WHERE id = 2", "unknown state 'zombie'"),
    3: ("UPDATE jobs SET argv = 'not json' WHERE id = 3", "argv is not a JSON list"),
    4: (
        "UPDATE jobs SET vram_bytes = 'lots' WHERE id = 4",
        "vram_bytes is 'lots', not a whole number",
    ),
}


def damaged_queue(state: Path, cwd: Path) -> None:
    store = QueueStore.open(state)
    for n in range(1, 6):
        store.add(
            JobSpec(
                argv=("sh", "-c", f"echo {n} >> ran.txt"),
                cwd=str(cwd),
                name=f"job{n}",
                vram_bytes=GiB,
            )
        )
    store.close()
    db = sqlite3.connect(state / "queue.db")
    with db:
        for statement, _ in DAMAGE.values():
            db.execute(statement)
    assert db.execute("PRAGMA quick_check").fetchone() == ("ok",)
    db.close()


@pytest.fixture
def state(tmp_path: Path) -> Path:
    damaged_queue(tmp_path / "state", tmp_path)
    return tmp_path / "state"


def test_ls_lists_the_rest_and_names_each_damaged_row(state: Path) -> None:
    lines = ok(queue(state, "ls")).splitlines()
    assert [line.split()[:4] for line in lines[1:]] == [
        ["1", "1", "job1", "waiting"],
        ["5", "2", "job5", "waiting"],
        ["2", "-", "?", "damaged"],
        ["3", "-", "?", "damaged"],
        ["4", "-", "?", "damaged"],
    ]
    for job_id, (_, why) in DAMAGE.items():
        assert lines[1 + job_id].endswith(why), lines


def test_ls_json_lists_the_damaged_rows_with_why(state: Path) -> None:
    listed = json.loads(ok(queue(state, "ls", "--json")))
    assert [(j["id"], j["state"]) for j in listed] == [
        (1, "waiting"),
        (5, "waiting"),
        (2, "damaged"),
        (3, "damaged"),
        (4, "damaged"),
    ]
    assert {j["id"]: j["reason"] for j in listed[2:]} == {k: v[1] for k, v in DAMAGE.items()}
    assert all(set(j) == set(listed[0]) for j in listed)


def test_show_and_rm_of_a_damaged_row_are_one_line(state: Path) -> None:
    out = queue(state, "show", "3")
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == (
        "gpuherd queue show: job 3 is damaged in the queue database (argv is "
        "not a JSON list); `gpuherd queue rm 3` removes it\n"
    )
    assert "job1" in ok(queue(state, "show", "1"))
    assert ok(queue(state, "rm", "3")) == "removed job 3 (damaged in the queue database, 'waiting')"
    assert [j["id"] for j in json.loads(ok(queue(state, "ls", "--json")))] == [1, 5, 2, 4]


def test_the_runner_runs_the_good_jobs_and_names_each_damaged_row_once(tmp_path: Path) -> None:
    q = Queue(tmp_path, [Gpu("GPU-a")])
    q.store.close()
    damaged_queue(q.state, q.cwd)
    q.store = q.runner.store = QueueStore.open(q.state)
    q.step_until(lambda: all(j.state is JobState.DONE for j in q.store.jobs()))
    assert sorted((q.cwd / "ran.txt").read_text().split()) == ["1", "5"]
    named = [line for line in q.said if "damaged" in line]
    assert named == [
        f"job {k} is damaged in the queue database ({why}); it is skipped "
        f"(gpuherd queue rm {k} removes it)"
        for k, (_, why) in DAMAGE.items()
    ]


def test_the_dashboards_look_shows_the_rest_and_each_damaged_row(state: Path) -> None:
    look = QueueWatch(state).sample()
    assert isinstance(look, QueueSnapshot) and look.exists
    assert [(j.id, j.state, j.reason) for j in look.jobs] == [
        (1, "waiting", None),
        (5, "waiting", None),
        *((k, "damaged", why) for k, (_, why) in DAMAGE.items()),
    ]


@pytest.mark.parametrize(
    ("statement", "why"),
    [
        ("DROP TABLE jobs", "its jobs table is missing"),
        ("DROP TABLE settings", "its settings table is missing"),
        (
            "ALTER TABLE jobs DROP COLUMN wait_reason",
            "its jobs table lacks the column(s) wait_reason",
        ),
    ],
)
def test_a_dropped_table_is_one_line_and_moved_aside(state: Path, statement: str, why: str) -> None:
    db = sqlite3.connect(state / "queue.db")
    db.execute(statement)
    db.close()
    out = queue(state, "ls")
    assert (out.returncode, out.stdout) == (2, "")
    (line,) = out.stderr.splitlines()
    assert line.startswith(
        f"gpuherd queue ls: {state / 'queue.db'}: not a valid queue "
        f"database ({why}); it was moved to {state / 'queue.db.corrupt-'}"
    )
    assert ok(queue(state, "ls")) == "the queue is empty"


UNREADABLE_JSON = "JSON nested too deeply or with a number too long to read"


@pytest.mark.parametrize(
    ("column", "text"),
    [
        ("argv", "[" * 5000 + "]" * 5000),  # deeper than the parser's stack
        ("argv", "[" + "9" * 5000 + "]"),  # past Python's 4300-digit integer limit
        ("gpu_indices", "[" + "1" * 5000 + "]"),
        ("gpu_indices", "[" * 5000),
    ],
)
def test_json_nested_too_deeply_or_too_long_a_number_is_a_damaged_row(
    state: Path, column: str, text: str
) -> None:
    db = sqlite3.connect(state / "queue.db")
    with db:
        db.execute(f"UPDATE jobs SET {column} = ? WHERE id = 5", (text,))
    db.close()
    listed = json.loads(ok(queue(state, "ls", "--json")))
    assert [(j["id"], j["state"]) for j in listed] == [
        (1, "waiting"),
        (2, "damaged"),
        (3, "damaged"),
        (4, "damaged"),
        (5, "damaged"),
    ]
    assert listed[-1]["reason"] == f"{column} is {UNREADABLE_JSON}"
    store = QueueStore.open(state)
    try:
        assert [j.id for j in store.jobs()] == [1]
        assert [(row.job_id, row.problem) for row in store.damaged][-1] == (
            5,
            f"{column} is {UNREADABLE_JSON}",
        )
    finally:
        store.close()
