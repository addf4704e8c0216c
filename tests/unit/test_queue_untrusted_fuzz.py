"""Arbitrary ledger entries and arbitrary queue rows: never a traceback, never trusted blindly."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

import psutil
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gpuherd.queue.jobs import JobSpec
from gpuherd.queue.ledger import Ledger
from gpuherd.queue.store import QueueStore

GIB = 1 << 30
GPU = "GPU-aaaaaaaa-0000-0000-0000-000000000000"
ME = os.getpid()
MY_START = psutil.Process().create_time()

ANY = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=2),
)
ENTRY = st.fixed_dictionaries(
    {
        "gpu_uuid": st.one_of(st.just(GPU), ANY),
        "bytes": st.one_of(st.integers(-1, 100 * GIB), ANY),
        "uid": st.one_of(st.just(os.geteuid()), ANY),
        "pid": st.sampled_from([ME, 1, 2**22 + 7, 2**40]),
        "pid_start_time": st.one_of(st.just(MY_START), ANY),
        "expires_at": st.one_of(st.floats(time.time() - 10, time.time() + 9000), ANY),
        "job": st.one_of(st.just("q0-x:1:1:0"), ANY),
    }
)
RAW = st.one_of(
    st.integers(1, 4000).map(lambda depth: "[" * depth + "]" * (depth % 3)),
    st.integers(4000, 4090).map(lambda digits: '{"bytes": ' + "7" * digits + "}"),
    st.text(alphabet='[]{}"0123456789,:e.-', max_size=200),
)
"""Files that are not JSON objects, or are nested deeper than any parser's stack."""


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies=st.lists(st.one_of(ENTRY, RAW), min_size=1, max_size=4))
def test_an_entry_counts_only_when_every_claim_holds(bodies: list[dict[str, object] | str]) -> None:
    parent = Path(tempfile.mkdtemp())
    try:
        said: list[str] = []
        ledger = Ledger(parent / "ledger", on_warning=said.append)
        for n, body in enumerate(bodies):
            text = body if isinstance(body, str) else json.dumps(body)
            (ledger.directory / f"res-0-{n}.json").write_text(text)
        now = time.time()
        with ledger.locked() as view:
            counted = view.entries(now, {GPU: 80 * GIB})
        for entry in counted:
            assert entry.pid == ME and abs(entry.pid_start_time - MY_START) <= 0.01
            assert 0 < entry.bytes <= 80 * GIB and entry.uid == os.geteuid()
            assert now < entry.expires_at <= now + 3600 + 5
        assert sum(entry.bytes for entry in counted) <= 80 * GIB  # one uid, one GPU
        assert len(said) <= 1  # one line per scan, however many files it doubts
    finally:
        shutil.rmtree(parent)


COLUMN_VALUES = {
    "state": st.one_of(st.sampled_from(["waiting", "running", "done", "zombie", ""]), ANY),
    "argv": st.one_of(st.just('["true"]'), st.just("[]"), st.just("{"), ANY),
    "env": st.one_of(st.just("[]"), st.just('[["A", 1]]'), ANY),
    "vram_bytes": st.one_of(st.just(GIB), ANY),
    "gpus": st.one_of(st.just(1), ANY),
    "gpu_indices": st.one_of(st.just("[0]"), st.just('["x"]'), ANY),
    "max_util_pct": st.one_of(st.just(10.0), ANY),
    "pid": ANY,
    "started_at": ANY,
    "name": ANY,
    "session_dir": ANY,
}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(column=st.sampled_from(sorted(COLUMN_VALUES)), data=st.data())
def test_any_value_in_any_column_is_a_job_or_a_damaged_row(
    column: str, data: st.DataObject
) -> None:
    value = data.draw(COLUMN_VALUES[column])
    if isinstance(value, list):
        value = json.dumps(value)
    parent = Path(tempfile.mkdtemp())
    try:
        store = QueueStore.open(parent / "state")
        store.add(JobSpec(argv=("true",), cwd="/"))
        store.add(JobSpec(argv=("true",), cwd="/"))
        db = sqlite3.connect(parent / "state" / "queue.db")
        try:
            with db:
                db.execute(f"UPDATE jobs SET {column} = ? WHERE id = 1", (value,))
        except (sqlite3.IntegrityError, OverflowError):
            assume(False)  # SQLite itself refuses to store it: not a row anyone can leave
        finally:
            db.close()
        jobs = store.jobs()
        assert [j.id for j in jobs] + [d.job_id for d in store.damaged] in ([1, 2], [2, 1])
        assert 2 in [j.id for j in jobs]
        store.close()
    finally:
        shutil.rmtree(parent)
