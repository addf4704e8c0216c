"""The command log: whole lines of two streams, bounded partial lines, fsync every 2 s."""

from __future__ import annotations

import errno
import os
from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuherd.proc.linelog import MAX_PENDING_BYTES, PARTIAL_LINE_S, LineJoiner, LogFile


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The fds passed to the real os.fsync, in order."""
    calls: list[int] = []
    real = os.fsync

    def observed(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", observed)
    return calls


def test_written_bytes_are_synced_two_seconds_after_the_first_unsynced_one(
    tmp_path: Path, fsyncs: list[int]
) -> None:
    clock = Clock()
    log = LogFile(tmp_path / "command.log", clock=clock)
    assert log.sync_due_in() is None  # nothing written, nothing due
    log.write(b"a\n")
    assert log.sync_due_in() == 2.0 and fsyncs == []
    clock.now = 1.99
    log.write(b"b\n")
    assert fsyncs == [] and log.sync_due_in() == pytest.approx(0.01)
    clock.now = 2.0
    log.write(b"c\n")  # the write that finds the sync due does it
    assert len(fsyncs) == 1 and log.sync_due_in() is None
    clock.now = 2.5
    log.write(b"d\n")
    clock.now = 4.49
    log.sync_if_due()
    assert len(fsyncs) == 1
    clock.now = 4.5
    log.sync_if_due()  # no write since: the supervisor's loop wakes for it
    assert len(fsyncs) == 2
    clock.now = 10.0
    log.sync_if_due()
    assert len(fsyncs) == 2  # nothing new to sync
    log.write(b"e\n")
    log.close()
    assert len(fsyncs) == 3
    assert (tmp_path / "command.log").read_bytes() == b"a\nb\nc\nd\ne\n"


def test_a_failed_write_is_reported_once_and_counted(tmp_path: Path) -> None:
    errors: list[OSError] = []
    log = LogFile("/dev/full", on_error=errors.append)
    log.write(b"x" * 1000)
    log.write(b"y" * 24)
    log.close()
    log.write(b"z")
    assert [e.errno for e in errors] == [errno.ENOSPC]
    assert log.dropped_bytes == 1025 and log.error is errors[0]


def test_a_log_that_cannot_be_opened_drops_everything_and_says_why(tmp_path: Path) -> None:
    errors: list[OSError] = []
    log = LogFile(tmp_path / "missing-dir" / "command.log", on_error=errors.append)
    log.write(b"line\n")
    assert [e.errno for e in errors] == [errno.ENOENT] and log.dropped_bytes == 5


def test_a_partial_line_is_written_after_a_quiet_spell(tmp_path: Path) -> None:
    log = LogFile(tmp_path / "command.log")
    joiner = LineJoiner(log)
    joiner.feed(b"done\r12/100 loss=0.5", now=10.0)
    assert (tmp_path / "command.log").read_bytes() == b"done\r"
    assert joiner.due_in(10.0) == pytest.approx(PARTIAL_LINE_S)
    joiner.flush_if_quiet(10.0 + PARTIAL_LINE_S - 0.01)
    assert joiner.pending_bytes == len(b"12/100 loss=0.5")
    joiner.flush_if_quiet(10.0 + PARTIAL_LINE_S)
    assert joiner.pending_bytes == 0 and joiner.due_in(11.0) is None
    assert (tmp_path / "command.log").read_bytes() == b"done\r12/100 loss=0.5"


def test_a_line_without_end_is_written_in_pieces_of_bounded_size(tmp_path: Path) -> None:
    path = tmp_path / "command.log"
    joiner = LineJoiner(LogFile(path))
    chunk = b"x" * 65000
    for i in range(1, 50):  # 3.1 MB, no line end
        joiner.feed(chunk, now=float(i))
        assert joiner.pending_bytes < MAX_PENDING_BYTES
        assert path.stat().st_size + joiner.pending_bytes == i * len(chunk)
    assert path.stat().st_size == 2 * 17 * 65000  # two pieces of 17 chunks (just over 1 MiB)
    joiner.flush()
    assert path.read_bytes() == b"x" * (49 * 65000)


# Each stream's bytes are told apart by their alphabet; line ends are shared.
OUT_BYTES = st.binary().map(lambda b: bytes(b"ab\n"[c % 3] for c in b))
ERR_BYTES = st.binary().map(lambda b: bytes(b"cd\r\n"[c % 4] for c in b))


def _chunks(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in pairwise(points) if b > a]


@settings(max_examples=300, deadline=None)
@given(
    out=OUT_BYTES,
    err=ERR_BYTES,
    out_cuts=st.lists(st.integers(0, 10_000), max_size=12),
    err_cuts=st.lists(st.integers(0, 10_000), max_size=12),
    order=st.lists(st.booleans(), max_size=40),
    max_pending=st.integers(1, 64),
)
def test_two_streams_share_the_log_a_whole_line_at_a_time(
    tmp_path_factory: pytest.TempPathFactory,
    out: bytes,
    err: bytes,
    out_cuts: list[int],
    err_cuts: list[int],
    order: list[bool],
    max_pending: int,
) -> None:
    path = tmp_path_factory.mktemp("log") / "command.log"
    log = LogFile(path)
    joiners = {"out": LineJoiner(log, max_pending), "err": LineJoiner(log, max_pending)}
    queues = {"out": _chunks(out, out_cuts), "err": _chunks(err, err_cuts)}
    picks = iter(order)
    while queues["out"] or queues["err"]:
        name = "out" if not queues["err"] or (queues["out"] and next(picks, True)) else "err"
        joiners[name].feed(queues[name].pop(0), now=0.0)
    joiners["out"].flush()
    joiners["err"].flush()
    logged = path.read_bytes()
    # Byte for byte: each stream's bytes, in order, and nothing else.
    assert bytes(b for b in logged if b in b"ab") == bytes(b for b in out if b in b"ab")
    assert bytes(b for b in logged if b in b"cd\r") == bytes(b for b in err if b in b"cd\r")
    assert len(logged) == len(out) + len(err)
    # No line of one stream is cut by the other, unless it outgrew `max_pending`. (The last
    # piece holds both streams' unended last lines, written when they ended.)
    for piece in logged.replace(b"\r", b"\n").split(b"\n")[:-1]:
        mixed = set(piece) & set(b"ab") and set(piece) & set(b"cd")
        assert not mixed or len(piece) > max_pending, piece
