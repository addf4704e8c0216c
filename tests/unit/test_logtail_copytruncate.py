"""copytruncate twice a second while a real writer process writes 200 lines a second.

A cutter thread does what logrotate's `copytruncate` does (shift `train.log.N` to
`train.log.N+1`, copy the log to `train.log.1`, then open the log, cut it to nothing and close
it) every 0.5 s, so lines written between the copy and the cut (20 ms, four lines or so) are in
neither file. The real `LogTailCollector` runs through the real collector loop, woken by file
events or polling once a second (as `gpuherd record` reads, so two cuts fall between two
looks). Whatever the timing, each line still in a copy or in the log must be read exactly once
and in order, and with a writer without `O_APPEND` (its hole of NULs tells how long the cut
file was) the lines lost must be counted exactly. The assertions are on counts only: the
timing decides which lines are lost, never whether the test passes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from collectors.logs.logtail import LogTailCollector
from collectors.logs.logtail_files import FileFollower
from collectors.logs.logtail_rotation import head_of, is_copy_name, rotation_suffix
from collectors.logs.logtail_waker import TailWaker
from collectors.samples import LogBatch
from gpuherd.record.logsink import LogSink
from gpuherd.record.recording import Recording, RecordingOptions
from gpuherd.session.session import SessionWriter
from tests.recorded import loss_steps
from tests.unit.test_logtail_harness import TailHarness

pytestmark = pytest.mark.waits  # on one worker, beside the others (tests/conftest.py)


COUNT = 800  # 4 s at 200 lines/s: 7 or 8 cuts
WRITER = r"""
import os, sys, time
path, count, append = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "append"
flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else 0)
fd = os.open(path, flags, 0o644)
due = time.monotonic()
for i in range(count):
    os.write(fd, f"step={i:06d} loss=0.5\n".encode())  # one write per line, all 21 bytes
    due += 1 / 200
    time.sleep(max(0.0, due - time.monotonic()))
# A line lost by a cut shows only by the next write's hole: a cut between the copy and the
# truncation right after the last line would lose it without a trace, for any reader. One more
# write, once the cuts have stopped (the test says when), shows it and is never cut itself
# (`end` is no step line).
print("steps written", flush=True)
sys.stdin.readline()
os.write(fd, b"end\n")
"""


def cut_every(log: Path, every_s: float, stop: threading.Event) -> int:
    """logrotate `copytruncate` with numbered copies, every `every_s` until `stop`."""
    cuts = 0
    while not stop.wait(every_s):
        for n in range(cuts, 0, -1):
            os.rename(f"{log}.{n}", f"{log}.{n + 1}")
        shutil.copyfile(log, f"{log}.1")
        # as a copy of a big log takes: the few lines written meanwhile are in neither file,
        # at every cut, so the counting of what was lost is checked in every run
        time.sleep(0.02)
        with open(log, "r+b") as cut:
            cut.truncate(0)
        cuts += 1
    return cuts


def steps_in(path: Path) -> list[int]:
    text = path.read_bytes().replace(b"\0", b"").decode()
    return [int(line[5:11]) for line in text.splitlines() if len(line) == 20]


def write_and_cut(log: Path, append: bool) -> int:
    """The writer's lines with a cut every 0.5 s, then its `end` once the cuts have stopped;
    how many cuts there were."""
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(log), str(COUNT), "append" if append else "overwrite"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    stop = threading.Event()
    cuts: list[int] = []
    cutter = threading.Thread(target=lambda: cuts.append(cut_every(log, 0.5, stop)))
    cutter.start()
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "steps written\n"
    finally:
        stop.set()
        cutter.join(10)
    writer.communicate("end\n", timeout=60)
    assert writer.returncode == 0
    return cuts[0]


def run_cut_log(tmp_path: Path, append: bool, tail: LogTailCollector):
    log = tmp_path / "train.log"
    log.touch()
    with TailHarness(tail) as h:
        cuts = write_and_cut(log, append)
        in_files = {s for p in tmp_path.iterdir() for s in steps_in(p)}
        # `end`, written after the last cut, is the last line: once it is read, so is every
        # line still in a file, and every cut's loss is known (it is counted when the tail
        # reads the write after the cut, past the hole of NULs it leaves).
        h.pump_until(
            lambda: h.lines_read() > len(h.steps()), timeout_s=30, what="the writer's last line"
        )
        h.pump_until(lambda: False if tail._more else True, timeout_s=5)
    assert cuts >= 4
    return h, in_files


def assert_each_once_in_order(h: TailHarness, in_files: set[int]) -> None:
    read = h.steps()
    assert read == sorted(set(read)), "a line read twice or out of order"
    assert in_files <= set(read)
    assert not h.failures


@pytest.fixture
def waker():
    shared = TailWaker()
    yield shared
    shared.close()


@pytest.mark.parametrize("poll", [False, True], ids=["events", "poll-1s"])
def test_lines_in_a_copy_are_read_once_and_lines_in_neither_file_are_counted(tmp_path, waker, poll):
    # A writer without O_APPEND: after each cut it writes on at its old offset, leaving a hole
    # of NULs as long as the file was when cut; what neither the copy nor a read holds is lost.
    tail = LogTailCollector(
        str(tmp_path / "train.log"),
        waker=None if poll else waker,
        poll=poll,
        poll_interval_s=1.0 if poll else 30.0,
    )
    h, in_files = run_cut_log(tmp_path, append=False, tail=tail)
    assert_each_once_in_order(h, in_files)
    missing = COUNT - len(h.steps())
    assert sum(b.lost_lines_estimate or 0 for b in h.batches) == missing
    assert sum(b.lost_bytes for b in h.batches) == missing * 21
    # The hole is no line of its own: every line read but `end` is a metric, none unparsed.
    assert h.lines_read() == len(h.steps()) + 1  # and `end`
    assert sum(b.unparsed_lines for b in h.batches) == 0


@pytest.mark.parametrize("poll", [False, True], ids=["events", "poll-1s"])
def test_an_appending_writer_cut_twice_between_looks_loses_no_line_of_a_copy(tmp_path, waker, poll):
    # With O_APPEND nothing shows what fell between the copy and the cut; every line of every
    # copy is read, including the copies of generations cut before the tail looked.
    tail = LogTailCollector(
        str(tmp_path / "train.log"),
        waker=None if poll else waker,
        poll=poll,
        poll_interval_s=1.0 if poll else 30.0,
    )
    h, in_files = run_cut_log(tmp_path, append=True, tail=tail)
    assert_each_once_in_order(h, in_files)
    assert sum(b.lost_lines_estimate or 0 for b in h.batches) <= COUNT - len(h.steps())


def test_a_cut_log_whose_copy_is_gone_counts_what_it_saw_but_did_not_read(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"".join(f"step={i:06d} loss=0.5\n".encode() for i in range(10)))
    follower = FileFollower(str(log), chunk_bytes=100)
    assert follower.check()
    assert follower.read_chunk() == log.read_bytes()[:100]  # 210 bytes seen, 100 read
    os.truncate(log, 0)  # `> log`, or a copy compressed and removed before the tail looked
    with open(log, "ab") as f:
        f.write(b"step=000100 loss=0.5\n")
    assert follower.check() and follower.ending == "truncated"
    assert follower.read_chunk() == b""  # no copy to read the rest from
    assert follower.end_generation() == "truncated"
    assert follower.check() and follower.read_chunk() == b"step=000100 loss=0.5\n"
    assert follower.take_lost() == 110
    assert follower.take_lost() == 0
    follower.close()


def test_the_recorder_writes_a_log_dropped_event_for_lost_lines(tmp_path):
    writer = SessionWriter(tmp_path / "s")
    LogSink()(writer, LogBatch("/x/train.log", 1.0, lost_bytes=60, lost_lines_estimate=3))
    writer.close()
    events = [
        json.loads(line) for line in (tmp_path / "s" / "events.jsonl").read_text().splitlines()
    ]
    [event] = [e for e in events if e["kind"] == "log_dropped"]
    assert event["lost_bytes"] == 60 and event["lost_lines_estimate"] == 3
    assert event["task"] == "/x/train.log" and "about 3 lines" in event["msg"]


@pytest.mark.parametrize(
    ("name", "copy", "rotated"),
    [
        ("train.log.1", True, True),
        ("train.log-20250101", True, True),  # logrotate dateext
        ("train.log-2025010112.3", True, True),
        ("train-20250101.log", True, True),  # dateext with `extension .log`
        ("train.1.log", True, True),
        ("train.log.bak", True, False),  # matched by content only, never read as a later stretch
        ("train.log.1.gz", False, False),  # compressed: its bytes are not the log's
        ("train.log", False, False),
        ("train2.log", False, False),
        ("other.log.1", False, False),
    ],
)
def test_which_names_are_copies_of_a_log(name, copy, rotated):
    assert is_copy_name(name, "train.log") is copy
    assert rotation_suffix(name, "train.log") is rotated


def test_a_backup_made_after_the_copy_is_not_read_as_a_stretch_of_the_log(tmp_path):
    log = tmp_path / "train.log"
    log.write_bytes(b"".join(f"step={i:06d} loss=0.5\n".encode() for i in range(5)))
    tail = LogTailCollector(str(log), poll=True, poll_interval_s=0.0)
    tail.open()
    first = tail.sample()
    with open(log, "ab") as f:
        f.write(b"step=000005 loss=0.5\n")
    shutil.copyfile(log, f"{log}.1")
    os.truncate(log, 0)
    (tmp_path / "train.log.bak").write_bytes(b"step=000099 loss=0.5\n")  # newer, not rotation's
    with open(log, "ab") as f:
        f.write(b"step=000006 loss=0.5\n")
    got = [first] + [tail.sample() for _ in range(5)]
    tail.close()
    assert [m.step for b in got for _, m in b.metrics] == list(range(7))


def test_the_task_row_says_how_many_lines_a_cut_lost():
    from gpuherd.tasks import TaskTracker
    from tui.tasks import health_text

    tracker = TaskTracker()
    tracker.add_batch(LogBatch("/x/train.log", 1.0, "generic", lines_read=3, generation=1))
    assert "lost" not in health_text(tracker.view("/x/train.log")).plain
    tracker.add_batch(
        LogBatch(
            "/x/train.log",
            2.0,
            "generic",
            lines_read=1,
            generation=2,
            truncated=True,
            lost_bytes=63,
            lost_lines_estimate=3,
        )
    )
    tracker.add_batch(
        LogBatch("/x/train.log", 3.0, "generic", lost_bytes=21, lost_lines_estimate=1, generation=2)
    )
    view = tracker.view("/x/train.log")
    assert (view.lost_bytes, view.lost_lines) == (84, 4)
    assert health_text(view).plain.endswith("4 lost")


def test_the_recorder_writes_what_a_cut_lost_as_a_log_dropped_event(tmp_path):
    # `gpuherd record` reads once a second: two cuts fall between two reads.
    logs, root = tmp_path / "logs", tmp_path / "s"
    logs.mkdir()
    log = logs / "train.log"
    log.touch()
    recording = Recording(root, RecordingOptions(logs=[str(log)], peak_interval_s=0))
    recording.start()
    write_and_cut(log, append=False)
    in_files = {s for p in logs.iterdir() for s in steps_in(p)}
    time.sleep(1.5)  # the recorder's next read; stop() then reads every log to its end
    assert recording.stop() is None
    got = loss_steps(root)
    assert got == sorted(set(got)) and in_files <= set(got)
    events = [json.loads(line) for line in (root / "events.jsonl").read_text().splitlines()]
    lost = [e for e in events if e["kind"] == "log_dropped" and e.get("reason") == "cut"]
    assert sum(e["lost_lines_estimate"] for e in lost) == COUNT - len(got)
    assert all(e["task"] == str(log) and e["lost_bytes"] % 21 == 0 for e in lost)


def test_the_first_real_bytes_are_found_past_a_hole_sparse_or_written(tmp_path):
    sparse, written, empty = tmp_path / "sparse", tmp_path / "written", tmp_path / "empty"
    with open(sparse, "wb") as f:
        f.seek(1 << 30)  # a writer without O_APPEND after a 1 GiB log was cut
        f.write(b"step=000001 loss=0.5\n")
    written.write_bytes(b"\0" * 100_000 + b"x")
    empty.write_bytes(b"\0" * 1000)
    for path, expected in (
        (sparse, (1 << 30, b"step=000001")),
        (written, (100_000, b"x")),
        (empty, (0, b"")),
    ):
        fd = os.open(path, os.O_RDONLY)
        try:
            at, first = head_of(fd, 11)
        finally:
            os.close(fd)
        assert (at, first) == expected


def test_a_pipe_swapped_in_for_a_copy_after_the_listing_is_left_alone(tmp_path, monkeypatch):
    # logrotate's copies are listed as regular files, then opened: a pipe that takes a copy's
    # name in between would make the open wait for a writer, holding the tail for ever.
    import collectors.logs.logtail_rotation as rotation
    from tests.unit.test_logtail_rotation import bounded, release

    log, pipe = tmp_path / "train.log", tmp_path / "planted"
    log.write_text("step=000003 loss=0.5\n")
    for name, text in (
        ("train.log.2", "step=000001 loss=0.5\n"),
        ("train.log.1", "step=000002 loss=0.5\n"),
    ):
        (tmp_path / name).write_text(text)
        time.sleep(0.01)  # distinct mtimes: the copies' order
    os.mkfifo(pipe)
    real_listing = rotation.copy_candidates

    def listed_then_swapped(path: str) -> list[tuple[int, int, str]]:
        listed = real_listing(path)
        os.replace(pipe, tmp_path / "train.log.1")
        return listed

    monkeypatch.setattr(rotation, "copy_candidates", listed_then_swapped)
    try:
        thread, out = bounded(lambda: rotation.open_copies(str(log)))
        assert not thread.is_alive(), "opening the planted pipe waited for a writer"
        copies = out[0]
        assert isinstance(copies, list) and len(copies) == 1, out
        assert os.fstat(copies[0][1]).st_ino == os.stat(tmp_path / "train.log.2").st_ino
        os.close(copies[0][1])
    finally:
        release(tmp_path / "train.log.1")


def lines(first: int, last: int) -> bytes:
    return b"".join(f"step={i:06d} loss=0.5\n".encode() for i in range(first, last + 1))


def read_all(follower: FileFollower) -> bytes:
    """What one look and the reads after it give, across the generations that end on the way."""
    out = b""
    for _ in range(10):
        if not follower.check():
            break
        while chunk := follower.read_chunk():
            out += chunk
        if follower.ending is None:
            break
        follower.end_generation()
    return out


def test_a_copy_that_turns_up_after_its_cut_was_seen_is_not_read_again(tmp_path):
    # A copy renamed on by the next rotation while the tail listed the copies is missed at the
    # cut and seen at a later look: it starts like the generation read, so it is no new one.
    log = tmp_path / "train.log"
    log.write_bytes(lines(0, 19))  # 420 bytes: a whole head (HEAD_BYTES) to know its copy by
    follower = FileFollower(str(log))
    assert read_all(follower) == lines(0, 19)
    os.truncate(log, 0)
    assert read_all(follower) == b""  # the cut is seen; no copy is there yet
    (tmp_path / "train.log.1").write_bytes(lines(0, 19))
    with open(log, "ab") as f:
        f.write(lines(10, 11))
    assert read_all(follower) == lines(10, 11)
    follower.close()


def test_a_second_copy_made_before_the_first_cut_was_seen_is_read_after_the_first(tmp_path):
    # Two cuts between two looks, the second seen half done: its copy is made, the log not cut
    # yet. That copy is skipped then (its lines are still in the log), and once the log is cut
    # before the tail read them, it is read as the generation it is.
    log, first, second = (tmp_path / n for n in ("train.log", "train.log.2", "train.log.1"))
    log.write_bytes(lines(0, 19))  # each stretch a whole head long (HEAD_BYTES)
    follower = FileFollower(str(log))
    assert read_all(follower) == lines(0, 19)
    shutil.copyfile(log, second)
    os.truncate(log, 0)
    with open(log, "ab") as f:
        f.write(lines(20, 39))
    os.rename(second, first)
    shutil.copyfile(log, second)  # the second cut's copy; the cut itself comes later
    assert follower.check() and follower.ending == "truncated"
    assert follower.read_chunk() == b""  # the first copy holds nothing past what was read
    follower.end_generation()
    os.truncate(log, 0)
    with open(log, "ab") as f:
        f.write(lines(40, 41))
    assert read_all(follower) == lines(20, 41)
    follower.close()


def test_a_short_copy_of_a_later_generation_is_read_once_not_at_every_look(tmp_path):
    # Two cuts between two looks, by a writer without O_APPEND: the second copy holds a hole
    # and two lines, too few bytes to be remembered by (HEAD_BYTES), and the log, cut again,
    # holds nothing yet. The copy is read at the look that finds it and never again: it was
    # read again at every later look (34,788 extra rows in one recording). A third copy made
    # in the same clock tick as the one read is still read: copies are told apart by inode
    # and size too, not by time alone.
    log, older, newer = (tmp_path / n for n in ("train.log", "train.log.2", "train.log.1"))
    log.write_bytes(lines(0, 19))
    follower = FileFollower(str(log))
    assert read_all(follower) == lines(0, 19)
    with open(log, "ab") as f:
        f.write(lines(20, 21))
    shutil.copyfile(log, newer)
    os.truncate(log, 0)
    with open(log, "r+b") as f:  # the writer writes on at its own offset: a hole, then lines
        f.seek(len(lines(0, 21)))
        f.write(lines(22, 23))
    time.sleep(0.02)  # distinct mtimes: the copies' order
    os.rename(newer, older)
    shutil.copyfile(log, newer)
    os.truncate(log, 0)
    assert read_all(follower).replace(b"\0", b"") == lines(20, 23)
    for _ in range(3):
        assert read_all(follower) == b""
    tick = newer.stat().st_mtime_ns
    with open(log, "r+b") as f:
        f.seek(len(lines(0, 23)))
        f.write(lines(24, 24))
    os.rename(older, tmp_path / "train.log.3")
    os.rename(newer, older)
    shutil.copyfile(log, newer)
    os.utime(newer, ns=(tick, tick))
    os.truncate(log, 0)
    assert read_all(follower).replace(b"\0", b"") == lines(24, 24)
    assert read_all(follower) == b""
    follower.close()


def test_a_copy_found_while_only_nuls_were_read_is_read_once(tmp_path):
    # The cut is seen, the log starts again from nothing; a second cut comes before any byte
    # of the new stretch was read, so only the file's time and a new copy tell of it
    # (`copies_since`). That copy is read at the look that finds it, then never again.
    log, copy = tmp_path / "train.log", tmp_path / "train.log.1"
    log.write_bytes(lines(0, 19))
    follower = FileFollower(str(log))
    assert read_all(follower) == lines(0, 19)
    shutil.copyfile(log, copy)
    os.truncate(log, 0)
    assert read_all(follower) == b""
    with open(log, "r+b") as f:
        f.seek(len(lines(0, 19)))
        f.write(lines(20, 21))
    time.sleep(0.02)  # distinct mtimes: the copies' order
    os.rename(copy, tmp_path / "train.log.2")
    shutil.copyfile(log, copy)
    os.truncate(log, 0)
    assert read_all(follower).replace(b"\0", b"") == lines(20, 21)
    for _ in range(3):
        assert read_all(follower) == b""
    follower.close()
