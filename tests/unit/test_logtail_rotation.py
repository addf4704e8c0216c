"""Fast rotation while a real writer process writes: rename every 0.5 s and 0.2 s, copytruncate.

A real `LogTailCollector` woken by the real watchdog observer (a long poll interval, so only
file events make these pass), or the real recorder, follows a log that a separate process
appends numbered lines to at a steady rate.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from collectors.logs.logtail import LogTailCollector
from collectors.logs.logtail_waker import TailWaker
from gpuherd.record.recording import Recording, RecordingOptions
from tests.recorded import loss_steps
from tests.unit.test_logtail_harness import TailHarness

pytestmark = pytest.mark.waits  # on one worker, beside the others (tests/conftest.py)


WRITER = r"""
import os, random, shutil, signal, sys, time
path, count, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
copytruncate = sys.argv[4] == "copytruncate"
reopen = False
def on_hup(signum, frame):
    global reopen
    reopen = True
signal.signal(signal.SIGHUP, on_hup)
f = open(path, "a", buffering=1)  # O_APPEND, a write per line
rng = random.Random(7)
next_cut = time.monotonic() + rng.uniform(0.5, 2.5)
due = time.monotonic()
for i in range(count):
    if reopen:  # logrotate's postrotate: the writer reopens its log by name
        reopen = False
        f.close()
        f = open(path, "a", buffering=1)
    if copytruncate and time.monotonic() >= next_cut:
        # logrotate copytruncate, done by the writer between two lines so that no line falls
        # between the copy and the truncation (those are lost for every reader).
        shutil.copyfile(path, f"{path}.{i}")
        with open(path, "r+b") as cut:  # as logrotate cuts it: open, ftruncate, close
            cut.truncate(0)
        next_cut = time.monotonic() + rng.uniform(0.5, 2.5)
    f.write(f"step={i} loss=0.5\n")
    due += 1 / rate
    time.sleep(max(0.0, due - time.monotonic()))
print("done", flush=True)
"""


def start_writer(log: Path, count: int, mode: str = "rename", rate: float = 200.0):
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(log), str(count), str(rate), mode],
        stdout=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 20
    while not log.exists():
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.005)
    return proc


def rotate_while(proc, log: Path, every_s: float, create: bool, reopen_after_s: float) -> int:
    """Rename `log` every `every_s` until the writer ends; the writer reopens on SIGHUP."""
    rotations = 0
    while proc.poll() is None:
        time.sleep(every_s)
        if proc.poll() is not None:
            break
        os.rename(log, log.with_name(f"{log.name}.{rotations}"))
        rotations += 1
        if create:  # logrotate `create`: the new, empty file exists before the writer reopens
            log.touch()
        time.sleep(reopen_after_s)  # lines written meanwhile go to the renamed file
        if proc.poll() is None:
            proc.send_signal(signal.SIGHUP)
    return rotations


def assert_each_once_in_order(harness: TailHarness, count: int) -> None:
    by_generation: dict[int, list[int]] = {}
    for generation, _line, step in harness.metrics():
        by_generation.setdefault(generation, []).append(step)
    for generation, got in by_generation.items():
        assert got == sorted(got), f"generation {generation} out of order: {got}"
    every = sorted(s for got in by_generation.values() for s in got)
    missing = sorted(set(range(count)) - set(every))
    assert every == list(range(count)), f"missing {missing[:20]}..., {len(every)} read"


@pytest.fixture
def waker():
    shared = TailWaker()
    yield shared
    shared.close()


@pytest.mark.parametrize(
    ("every_s", "create", "reopen_after_s"),
    [
        (0.5, True, 0.1),  # logrotate create + postrotate HUP, the writer a little late
        (0.5, False, 0.05),  # no create: the writer makes the new file itself when it reopens
        (0.5, True, 0.0),
        # Every 0.2 s also passes on an idle machine, but a loaded 2-core one can hold the observer
        # thread past the next rename, and that file is then gone before anyone opens it.
    ],
)
def test_rename_rotation_twice_a_second_and_faster_loses_nothing(
    tmp_path, waker, every_s, create, reopen_after_s
):
    log = tmp_path / "train.log"
    count = 1000  # 5 s at 200 lines/s
    proc = start_writer(log, count)
    tail = LogTailCollector(str(log), waker=waker, poll_interval_s=30.0)
    with TailHarness(tail) as h:
        rotations = rotate_while(proc, log, every_s, create, reopen_after_s)
        assert proc.wait(10) == 0
        h.pump_until(lambda: len(h.steps()) >= count, timeout_s=60, what=f"{count} lines")
        time.sleep(0.3)
        h.pump_until(lambda: True)
    assert rotations >= 4
    assert_each_once_in_order(h, count)
    assert not h.failures


def test_copytruncate_at_random_intervals_loses_nothing(tmp_path, waker):
    log = tmp_path / "train.log"
    count = 1400  # 7 s at 200 lines/s: several copytruncates 0.5 to 2.5 s apart
    proc = start_writer(log, count, mode="copytruncate")
    tail = LogTailCollector(str(log), waker=waker, poll_interval_s=30.0)
    with TailHarness(tail) as h:
        assert proc.wait(60) == 0
        h.pump_until(lambda: len(h.steps()) >= count, timeout_s=60, what=f"{count} lines")
        time.sleep(0.3)
        h.pump_until(lambda: True)
    copies = [p for p in tmp_path.iterdir() if p.name != "train.log"]
    assert len(copies) >= 3
    assert_each_once_in_order(h, count)
    assert sum(b.truncated for b in h.batches) == len(copies)


def lines(start: int, stop: int) -> str:
    return "".join(f"step={i} loss=0.5\n" for i in range(start, stop))


def drain(tail: LogTailCollector) -> list:
    got = []
    for _ in range(50):
        tail.wake()
        got.append(tail.sample())
        if not tail._more:
            break
    return got


def test_copytruncate_recovers_lines_not_yet_read_from_the_copy(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(lines(0, 100))
    tail = LogTailCollector(str(log), poll=True, poll_interval_s=0.0)
    tail.open()
    got = drain(tail)
    with open(log, "a") as f:
        f.write(lines(100, 150))  # written, not read yet when the log is copied and truncated
    (tmp_path / "train.log.1").write_text("an older copy, not of this file\n" * 200)
    shutil.copyfile(log, tmp_path / "train.log.2")
    os.truncate(log, 0)
    with open(log, "a") as f:
        f.write(lines(150, 160))  # the writer goes on after the truncation
    got += drain(tail)
    tail.close()
    steps = [m.step for b in got for _, m in b.metrics]
    assert steps == list(range(160))
    restart = [b for b in got if b.truncated]
    assert len(restart) == 1 and restart[0].metrics[0][0] == 1  # line 1 of the new start
    # The lines taken from the copy keep their numbers in the old generation.
    assert [(b.generation, n) for b in got for n, m in b.metrics if m.step == 149] == [(1, 150)]


def test_a_renamed_file_is_still_read_while_no_new_file_has_lines(tmp_path, waker):
    # logrotate `create`: the new file exists, empty, while the writer still writes the old one.
    log = tmp_path / "train.log"
    log.write_text(lines(0, 10))
    tail = LogTailCollector(str(log), waker=waker, poll_interval_s=30.0)
    with TailHarness(tail) as h, open(log, "a", buffering=1) as old:
        h.pump_until(lambda: len(h.steps()) == 10)
        os.rename(log, tmp_path / "train.log.1")
        log.touch()
        time.sleep(0.3)  # the tail has seen the rename and the new, empty file
        old.write(lines(10, 20))
        h.pump_until(lambda: len(h.steps()) == 20, what="lines written to the renamed file")
        with open(log, "a") as new:
            new.write(lines(20, 30))
        h.pump_until(lambda: len(h.steps()) == 30, what="lines of the new file")
    assert h.steps() == list(range(30))
    assert [b.generation for b in h.batches if b.rotated] == [2]


def test_the_recorder_keeps_every_line_of_a_log_rotated_twice_a_second(tmp_path):
    log, root = tmp_path / "logs" / "train.log", tmp_path / "s"
    log.parent.mkdir()
    count = 1000
    proc = start_writer(log, count)
    recording = Recording(root, RecordingOptions(logs=[str(log)], peak_interval_s=0))
    recording.start()
    rotate = threading.Thread(target=rotate_while, args=(proc, log, 0.5, True, 0.1))
    rotate.start()
    assert proc.wait(30) == 0
    rotate.join(10)
    time.sleep(0.5)
    assert recording.stop() is None
    got = sorted(loss_steps(root))
    assert got == list(range(count)), f"{len(got)} of {count}"


def test_the_recorder_keeps_every_line_across_copytruncate(tmp_path):
    log, root = tmp_path / "logs" / "train.log", tmp_path / "s"
    log.parent.mkdir()
    count = 1400
    proc = start_writer(log, count, mode="copytruncate")
    recording = Recording(root, RecordingOptions(logs=[str(log)], peak_interval_s=0))
    recording.start()
    assert proc.wait(60) == 0
    time.sleep(0.5)
    assert recording.stop() is None
    got = sorted(loss_steps(root))
    assert got == list(range(count)), f"{len(got)} of {count}"


def test_an_empty_new_file_rotated_away_does_not_hold_the_tail_back(tmp_path, waker):
    # Two rotations: the first new file never gets a line, the second does.
    log = tmp_path / "train.log"
    log.write_text(lines(0, 10))
    tail = LogTailCollector(str(log), waker=waker, poll_interval_s=30.0)
    with TailHarness(tail) as h, open(log, "a", buffering=1) as old:
        h.pump_until(lambda: len(h.steps()) == 10)
        os.rename(log, tmp_path / "train.log.1")
        log.touch()
        time.sleep(0.3)
        old.write(lines(10, 20))  # the writer has not reopened yet
        os.rename(log, tmp_path / "train.log.2")
        log.write_text(lines(20, 30))
        h.pump_until(lambda: len(h.steps()) == 30, what="the lines of the third file")
    assert h.steps() == list(range(30))
    assert [b.generation for b in h.batches if b.rotated] == [2, 3]


def bounded(call, bound_s: float = 10.0):
    """What `call()` returned or raised; fails the test if it is still running after `bound_s`."""
    out: list[object] = []

    def run() -> None:
        try:
            out.append(call())
        except Exception as error:  # noqa: BLE001 (the test inspects whatever came out)
            out.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(bound_s)
    return thread, out


def release(fifo: Path) -> None:
    """Let an open of `fifo` that waits for a writer go on (so no thread is left hanging)."""
    try:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass  # nobody waits on it


def test_a_pipe_swapped_in_as_the_log_after_a_rotation_is_named_not_waited_on(
    tmp_path, monkeypatch
):
    # Between looking at the new log by name and opening it, a pipe takes its place: opening
    # a pipe waits for a writer, which would hold the observer's thread (and the tail) for ever.
    from collectors.base import CollectorError
    from collectors.logs.logtail_files import FileFollower

    log, pipe = tmp_path / "train.log", tmp_path / "planted"
    log.write_text(lines(0, 10))
    follower = FileFollower(str(log))
    assert follower.check() and follower.read_chunk() == log.read_bytes()
    os.rename(log, tmp_path / "train.log.1")
    log.write_text(lines(10, 20))
    os.mkfifo(pipe)
    real_stat = os.stat

    def stat_then_swap(path, *args, **kwargs):
        info = real_stat(path, *args, **kwargs)
        if os.fspath(path) == str(log) and pipe.exists():
            os.replace(pipe, log)
        return info

    monkeypatch.setattr(os, "stat", stat_then_swap)
    try:
        thread, out = bounded(follower.file_created)  # as the observer calls it
        assert not thread.is_alive(), "opening the planted pipe waited for a writer"
        assert out == [None]
        monkeypatch.undo()
        _, out = bounded(lambda: [follower.check(), follower.end_generation(), follower.check()])
        assert isinstance(out[0], CollectorError)
        assert out[0].msg == (
            f"{log}: is not a regular file (pipes and devices cannot be followed)"
        )
    finally:
        release(log)
        follower.close()
