"""LogTailCollector on real files, woken by the real watchdog observer, run by `run_collector`."""

from __future__ import annotations

import json
import logging
import logging.handlers
import os
import shutil
import tempfile

import pytest

from collectors.base import CollectorError
from collectors.logs.logtail import LogTailCollector
from collectors.logs.logtail_waker import TailWaker
from tests.unit.test_logtail_harness import TailHarness


@pytest.fixture
def waker():
    shared = TailWaker()
    yield shared
    shared.close()


def tail(path, waker=None, **kw):
    kw.setdefault("poll_interval_s", 30.0)  # long: only a watchdog wake-up makes a test pass
    return LogTailCollector(str(path), waker=waker, **kw)


def write(path, start, stop, mode="a"):
    with open(path, mode) as f:
        for i in range(start, stop):
            f.write(f"step={i} loss={1 / (i + 1):.5f}\n")
            f.flush()


def test_appended_lines_wake_the_tail(tmp_path, waker):
    log = tmp_path / "train.log"
    write(log, 0, 10)
    with TailHarness(tail(log, waker)) as h:
        h.pump_until(lambda: len(h.steps()) == 10, what="existing lines")
        write(log, 10, 300)
        h.pump_until(lambda: len(h.steps()) == 300, what="appended lines")
    assert h.steps() == list(range(300))
    assert [n for _, n, _ in h.metrics()] == list(range(1, 301))
    assert h.lines_read() == 300
    assert waker.watched_directories == 0  # the collector dropped its watch on close


def test_stdlib_rotating_handler_loses_and_repeats_nothing(tmp_path, waker):
    log = tmp_path / "train.log"
    handler = logging.handlers.RotatingFileHandler(log, backupCount=100)
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger = logging.Logger("rotation-test")
    logger.addHandler(handler)
    total = 0
    with TailHarness(tail(log, waker)) as h:
        h.pump_until(lambda: h.batches, what="the tail to open the first file")
        for _ in range(6):
            # Lines written just before the rotation are usually not read yet when the tail
            # notices the new file; they must come from the renamed one.
            for _ in range(150):
                logger.warning("step=%d loss=0.5", total)
                total += 1
            handler.doRollover()
            for _ in range(150):
                logger.warning("step=%d loss=0.5", total)
                total += 1
            h.pump_until(lambda n=total: len(h.steps()) >= n, what=f"{total} lines")
        handler.close()
    assert sorted(h.steps()) == list(range(total))
    assert len(h.steps()) == total
    assert h.lines_read() == total
    assert sum(b.rotated for b in h.batches) == 6
    assert not h.failures


def test_copytruncate_while_followed(tmp_path, waker):
    log = tmp_path / "train.log"
    write(log, 0, 100)
    with TailHarness(tail(log, waker)) as h:
        h.pump_until(lambda: len(h.steps()) == 100)
        shutil.copy(log, tmp_path / "train.log.1")
        os.truncate(log, 0)
        write(log, 100, 150)
        h.pump_until(lambda: len(h.steps()) == 150, what="lines after truncation")
    assert h.steps() == list(range(150))
    restart = [b for b in h.batches if b.truncated]
    assert len(restart) == 1 and restart[0].generation == 2


def test_deleted_and_recreated_log(tmp_path, waker):
    log = tmp_path / "train.log"
    write(log, 0, 20)
    with TailHarness(tail(log, waker)) as h:
        h.pump_until(lambda: len(h.steps()) == 20)
        log.unlink()
        h.pump_until(lambda: h.batches[-1].waiting, what="waiting after deletion")
        write(log, 20, 40)
        h.pump_until(lambda: len(h.steps()) == 40, what="lines of the new file")
    assert h.steps() == list(range(40))
    assert [b.generation for b in h.batches if b.recreated] == [2]


def test_file_created_later_is_picked_up(tmp_path, waker):
    log = tmp_path / "train.log"
    with TailHarness(tail(log, waker)) as h:
        h.pump_until(lambda: h.batches and h.batches[-1].waiting)
        write(log, 0, 5)
        h.pump_until(lambda: len(h.steps()) == 5, what="the new file")


def test_parent_directory_created_later_is_found_by_the_periodic_look(tmp_path, waker):
    log = tmp_path / "version_0" / "train.log"
    with TailHarness(tail(log, waker, poll_interval_s=0.2)) as h:
        h.pump_until(lambda: h.batches and h.batches[-1].waiting)
        log.parent.mkdir()
        write(log, 0, 5)
        h.pump_until(lambda: len(h.steps()) == 5, what="the file in the new directory")
        write(log, 5, 10)
        h.pump_until(lambda: len(h.steps()) == 10)


def test_polling_mode_follows_without_watchdog(tmp_path):
    log = tmp_path / "train.log"
    c = tail(log, poll=True, poll_interval_s=0.1)
    with TailHarness(c) as h:
        write(log, 0, 50)
        h.pump_until(lambda: len(h.steps()) == 50, what="polled lines")
        os.rename(log, tmp_path / "old.log")
        write(log, 50, 60)
        h.pump_until(lambda: len(h.steps()) == 60, what="polled lines after rotation")
    assert c.polling and h.steps() == list(range(60))


def test_one_watch_per_directory_for_many_tails(tmp_path, waker):
    logs = [tmp_path / f"job{i}.log" for i in range(3)]
    harnesses = [TailHarness(tail(log, waker)) for log in logs]
    for h in harnesses:
        h.__enter__()
    try:
        for i, log in enumerate(logs):
            write(log, i * 10, i * 10 + 3)
        for i, h in enumerate(harnesses):
            h.pump_until(lambda h=h: len(h.steps()) == 3)
            assert h.steps() == [i * 10, i * 10 + 1, i * 10 + 2]
        assert waker.watched_directories == 1
    finally:
        for h in harnesses:
            h.__exit__(None, None, None)
    assert waker.watched_directories == 0


def test_directory_as_log_fails_then_recovers(tmp_path, waker):
    log = tmp_path / "train.log"
    log.mkdir()
    with TailHarness(tail(log, waker, poll_interval_s=0.2)) as h:
        h.pump_until(lambda: h.failures, what="a failure")
        assert "is a directory" in str(h.failures[0])
        log.rmdir()
        write(log, 0, 3)
        h.pump_until(lambda: len(h.steps()) == 3, what="recovery")
    assert h.recoveries == 1


def _sample_as(uid, path, commands, results):
    """In a forked child that dropped root, sample `path` once per command byte."""
    os.setgid(uid)
    os.setuid(uid)
    c = LogTailCollector(path, poll=True, poll_interval_s=0.01, settle_s=0)
    c.open()
    while os.read(commands, 1):
        c.wake()
        try:
            steps = [m.step for _, m in c.sample().metrics]
            os.write(results, f"OK {steps}\n".encode())
        except CollectorError as error:
            os.write(results, f"ERR {error}\n".encode())


def test_permission_denied_is_reported_and_recovers():
    # Root reads any file, so as root the tail runs in a forked child that became `nobody`.
    root = os.geteuid() == 0
    directory = tempfile.mkdtemp(prefix="gpuherd-perm-")
    os.chmod(directory, 0o755)
    path = os.path.join(directory, "train.log")
    write(path, 0, 2)
    os.chmod(path, 0o000)
    try:
        if not root:
            c = LogTailCollector(path, poll=True, poll_interval_s=0.01, settle_s=0)
            c.open()
            with pytest.raises(CollectorError, match="permission denied"):
                c.sample()
            os.chmod(path, 0o644)
            assert [m.step for _, m in c.sample().metrics] == [0, 1]
            return
        commands_r, commands_w = os.pipe()
        results_r, results_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(commands_w)
                os.close(results_r)
                _sample_as(65534, path, commands_r, results_w)
            except BaseException as error:  # report, never run the parent's code in the child
                os.write(results_w, f"CRASH {error!r}\n".encode())
            finally:
                os._exit(0)
        os.close(commands_r)
        os.close(results_w)
        with os.fdopen(results_r) as results:
            os.write(commands_w, b"s")
            first = results.readline()
            os.chmod(path, 0o644)
            os.write(commands_w, b"s")
            second = results.readline()
            os.close(commands_w)
        os.waitpid(pid, 0)
        assert first.startswith("ERR") and "permission denied" in first
        assert second.strip() == "OK [0, 1]"
    finally:
        shutil.rmtree(directory)


def test_trainer_state_rewrite_wakes_the_tail(tmp_path, waker):
    doc = tmp_path / "checkpoint-10" / "trainer_state.json"
    doc.parent.mkdir()
    history = [{"loss": 1.0, "step": 10}]
    doc.write_text(json.dumps({"log_history": history}))
    pattern = tmp_path / "checkpoint-*" / "trainer_state.json"
    with TailHarness(tail(pattern, waker)) as h:
        h.pump_until(lambda: h.steps() == [10], what="the first checkpoint")
        history.append({"loss": 0.5, "step": 20})
        doc.write_text(json.dumps({"log_history": history}))
        h.pump_until(lambda: h.steps() == [10, 20], what="the rewritten document")
    assert h.batches[-1].format == "hf_trainer_state"
