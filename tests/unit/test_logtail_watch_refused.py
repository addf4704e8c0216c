"""When inotify refuses to watch a log's directory, the tail polls and says why, once.

A real refusal: the tail's user has used up its inotify instances (`max_user_instances`,
128 by default) before the tail starts. The tail runs as another, unprivileged uid, so the
limit it exhausts is that uid's alone, never that of anything else on the machine: a uid of
its own (`EXHAUSTED_UID`), not the one the other tests run their other user's tails as, which
lost their watches while it held them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from collectors.logs.logtail_waker import TailWaker
from collectors.samples import LogBatch
from gpuherd.record.logsink import LogSink
from gpuherd.session.session import SessionWriter
from tests.privileges import OTHER_UID, as_other_user, shared_directory

ROOT = Path(__file__).resolve().parents[2]
EXHAUSTED_UID = OTHER_UID + 2
"""The uid whose inotify instances the refusal test uses up: no other test runs as it (the
queue ledger's tests run a third user as `OTHER_UID + 1`)."""
TAIL = """
import ctypes, json, sys
libc = ctypes.CDLL("libc.so.6", use_errno=True)
held = []
while sys.argv[3] == "exhaust" and len(held) < 100000:
    fd = libc.inotify_init()  # kept open until exit: this uid has no inotify left
    if fd < 0:
        break
    held.append(fd)
from collectors.logs.logtail import LogTailCollector
from collectors.logs.logtail_waker import TailWaker
waker = TailWaker()
tail = LogTailCollector(sys.argv[1], waker=waker, poll_interval_s=0.05, settle_s=0.0)
tail.open()
first = tail.sample()
with open(sys.argv[2]) as go:
    pass
second = tail.sample()
third = tail.sample()
print(json.dumps({"notices": [first.notice, second.notice, third.notice],
                  "steps": [m.step for b in (first, second, third) for _, m in b.metrics],
                  "failures": waker.failures, "watch_error": tail.watch_error}))
waker.close()
"""


def follow_as_other_user(directory: Path, exhaust: bool) -> dict[str, object]:
    """Tail `directory/train.log` as another user, with its inotify used up or not."""
    log = directory / "train.log"
    log.write_text("step: 1 loss: 2.5\n")
    log.chmod(0o644)
    go = directory.parent / "go"
    go.write_text("")
    go.chmod(0o644)
    with open(log, "a") as out:  # written before the second read: polling must find it
        out.write("step: 2 loss: 1.5\n")
    argv = as_other_user(
        [sys.executable, "-c", TAIL, str(log), str(go), "exhaust" if exhaust else "keep"],
        uid=EXHAUSTED_UID if exhaust else OTHER_UID,
    )
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_a_log_inotify_cannot_watch_is_polled_and_the_reason_said_once() -> None:
    with shared_directory() as parent:
        runs = parent / "runs"
        runs.mkdir()
        got = follow_as_other_user(runs, exhaust=True)
    notices = got["notices"]
    assert isinstance(notices, list)
    first, *later = notices
    assert first == (
        f"cannot watch {runs}: inotify instance limit reached; reading the log "
        "every 0.05 s instead of on each write"
    )
    assert later == [None, None]  # said once, not on every batch
    assert got["steps"] == [1, 2]  # polling read both lines
    assert isinstance(got["failures"], int) and got["failures"] >= 1  # counted by the waker
    assert got["watch_error"] == f"cannot watch {runs}: inotify instance limit reached"


def test_a_log_inotify_watches_says_nothing() -> None:
    with shared_directory() as parent:
        runs = parent / "runs"
        runs.mkdir()
        got = follow_as_other_user(runs, exhaust=False)
    assert got["notices"] == [None, None, None]
    assert got["failures"] == 0 and got["watch_error"] is None


def test_a_closed_waker_is_no_refusal(tmp_path: Path) -> None:
    """Closing at exit places no watch: that is not an inotify failure to report."""
    waker = TailWaker()
    waker.close()
    sub = waker.subscribe(str(tmp_path / "train.log"))
    assert waker.watch(sub) is False
    assert sub.error is None and waker.failures == 0


def test_a_recording_writes_the_reason_to_its_events(tmp_path: Path) -> None:
    writer = SessionWriter(tmp_path / "s", {})
    sink = LogSink({})
    sink(writer, LogBatch("/r/train.log", 1.0, notice="cannot watch /r: Permission denied"))
    sink(writer, LogBatch("/r/train.log", 2.0))
    writer.close()
    events = [
        json.loads(line) for line in (tmp_path / "s" / "events.jsonl").read_text().splitlines()
    ]
    polling = [e for e in events if e["kind"] == "log_polling"]
    assert polling == [
        {
            "t": 1.0,
            "kind": "log_polling",
            "task": "/r/train.log",
            "msg": "cannot watch /r: Permission denied",
        }
    ]


@pytest.fixture(autouse=True)
def _repo_readable() -> None:
    """The other user imports the product from the checkout: it must be able to."""
    if not (ROOT / "collectors").stat().st_mode & 0o005:
        pytest.skip("the checkout is not readable by other users")
