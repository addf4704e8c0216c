"""The tail waker under load: many tails in many directories, watches placed and dropped while
watchdog delivers events, with real files, a real observer and real threads."""

from __future__ import annotations

import logging
import random
import threading
import time
from pathlib import Path

import pytest

from collectors.base import Sampled
from collectors.logs.logtail import LogTailCollector
from collectors.logs.logtail_waker import TailWaker
from collectors.loop import run_collector
from tests.depth import depth
from tests.stacks import thread_stacks

DIRS = 8
LOGS_PER_DIR = 4
LINES_PER_S = 100
LINES_PER_ROUND = 200
"""Lines written to every file in a round: a count, not a time, so that a loaded machine that
starves the writer slows the round rather than shortening it."""
ROUNDS = depth(4, 10)
CHURNERS = 4
STUCK_S = 60.0
"""Far longer than any round takes on a loaded 2-core machine; a thread still running after
this is stuck (a deadlock), and the test fails with every thread's stack."""


def fail_with_stacks(what: str) -> None:
    pytest.fail(f"{what}; every thread's stack:\n{thread_stacks()}")


def join_all(threads: list[threading.Thread], what: str) -> None:
    deadline = time.monotonic() + STUCK_S
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    stuck = [t.name for t in threads if t.is_alive()]
    if stuck:
        fail_with_stacks(f"{what}: {len(stuck)} threads stuck, e.g. {stuck[:4]}")


def close_waker(waker: TailWaker) -> None:
    # On a thread: a deadlocked observer must fail the test, not hang its teardown.
    closer = threading.Thread(target=waker.close, name="close-waker", daemon=True)
    closer.start()
    join_all([closer], "closing the waker")


class Tail:
    """A real `LogTailCollector` on the shared waker, run by `run_collector` on its own thread."""

    def __init__(self, path: Path, waker: TailWaker) -> None:
        # A long poll: only watchdog wake-ups make the tail read in time.
        self.collector = LogTailCollector(str(path), waker=waker, poll_interval_s=30.0)
        self.stop = threading.Event()
        self.lines = 0
        self.thread = threading.Thread(
            target=run_collector,
            name=f"tail {path.name}",
            args=(self.collector, self.emit, self.stop),
            daemon=True,
        )

    def emit(self, event: object) -> None:
        if isinstance(event, Sampled):
            self.lines += event.sample.lines_read


def write_lines(paths: list[Path], lines: int, written: dict[Path, int]) -> None:
    """Append `lines` metric lines to every file, at most `LINES_PER_S` a second, flushing each."""
    files = {path: path.open("a") for path in paths}
    try:
        start = time.monotonic()
        for n in range(1, lines + 1):
            for path, f in files.items():
                f.write(f"step={n} loss={1 / n:.5f}\n")
                f.flush()
                written[path] += 1
            time.sleep(max(0.0, start + n / LINES_PER_S - time.monotonic()))
    finally:
        for f in files.values():
            f.close()


def churn(waker: TailWaker, paths: list[Path], stop: threading.Event, seed: int) -> None:
    """Subscribe, watch and drop again, as tails starting and stopping do, until `stop`."""
    rng = random.Random(seed)
    while not stop.is_set():
        subs = [waker.subscribe(str(rng.choice(paths))) for _ in range(rng.randint(1, 4))]
        for sub in subs:
            waker.watch(sub)
        time.sleep(rng.random() * 0.01)
        for sub in subs:
            waker.unsubscribe(sub)


def one_round(root: Path, waker: TailWaker, seed: int) -> None:
    """Tails start as their logs are written; churn places and drops watches in other
    directories that are written too; at the end every tail has read every line."""
    tailed = [root / f"run{d}" / f"train{i}.log" for d in range(DIRS) for i in range(LOGS_PER_DIR)]
    churned = [root / f"churn{d}" / "train.log" for d in range(DIRS)]
    for path in tailed + churned:
        path.parent.mkdir(parents=True, exist_ok=True)
    written = dict.fromkeys(tailed + churned, 0)
    writer = threading.Thread(
        target=write_lines,
        args=(tailed + churned, LINES_PER_ROUND, written),
        name="writer",
        daemon=True,
    )
    tails = [Tail(path, waker) for path in tailed]
    stop_churn = threading.Event()
    churners = [
        threading.Thread(
            target=churn,
            args=(waker, churned + tailed, stop_churn, seed * 100 + i),
            name=f"churn{i}",
            daemon=True,
        )
        for i in range(CHURNERS)
    ]
    writer.start()
    for thread in [*churners, *(t.thread for t in tails)]:
        thread.start()
    join_all([writer], "writing")
    stop_churn.set()
    join_all(churners, "subscribing and dropping watches")
    deadline = time.monotonic() + STUCK_S
    while any(t.lines < written[path] for t, path in zip(tails, tailed, strict=True)):
        if time.monotonic() > deadline:
            short = [
                (p.name, t.lines, written[p])
                for t, p in zip(tails, tailed, strict=True)
                if t.lines < written[p]
            ]
            fail_with_stacks(f"{len(short)} tails never read every line, e.g. {short[:3]}")
        time.sleep(0.05)
    assert [t.lines for t in tails] == [LINES_PER_ROUND] * len(tailed)
    for tail in tails:
        tail.stop.set()
        tail.collector.wake()
    join_all([t.thread for t in tails], "stopping the tails")
    # Every tail and churner has let go: no watch is left behind.
    assert waker.watched_directories == 0


@pytest.mark.slow
def test_many_tails_in_many_directories_never_deadlock_and_read_every_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    waker = TailWaker()
    try:
        for r in range(ROUNDS):
            one_round(tmp_path / f"round{r}", waker, seed=r)
    finally:
        close_waker(waker)
    # Dropping watches mid-event is routine here; it must not print errors on a user's terminal.
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_only_the_dropped_watch_race_is_kept_off_the_terminal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    inotify_log = logging.getLogger("watchdog.observers.inotify")
    inotify_log.error("InotifyEmitter.queue_events() called when the thread is inactive")
    inotify_log.error("inotify watch limit reached")
    assert [r.getMessage() for r in caplog.records] == ["inotify watch limit reached"]


def test_tails_racing_for_one_directory_share_one_watch_that_stays_live(tmp_path: Path) -> None:
    """Threads place and drop the same directory's watch at once; the one that stays is woken."""
    log = tmp_path / "d" / "train.log"
    log.parent.mkdir()
    waker = TailWaker()
    try:
        for attempt in range(20):
            start = threading.Barrier(9)
            keeper = waker.subscribe(str(log))

            def race(k: int, keeper=keeper, start=start) -> None:
                start.wait()
                if k == 0:
                    waker.watch(keeper)
                    return
                sub = waker.subscribe(str(tmp_path / "d" / f"other{k}.log"))
                waker.watch(sub)
                waker.unsubscribe(sub)

            threads = [threading.Thread(target=race, args=(k,), daemon=True) for k in range(9)]
            for thread in threads:
                thread.start()
            join_all(threads, "racing for one directory")
            assert waker.watched_directories == 1
            keeper.event.clear()
            with log.open("a") as f:
                f.write(f"attempt {attempt}\n")
            assert keeper.event.wait(10), f"attempt {attempt}: the watch was dropped"
            waker.unsubscribe(keeper)
            assert waker.watched_directories == 0
    finally:
        close_waker(waker)


def test_a_closed_waker_places_no_watch(tmp_path: Path) -> None:
    waker = TailWaker()
    sub = waker.subscribe(str(tmp_path / "train.log"))
    assert waker.watch(sub) is True and waker.watched_directories == 1
    waker.close()
    late = waker.subscribe(str(tmp_path / "late.log"))
    assert waker.watch(late) is False  # a tail still running after exit falls back to polling
    assert waker.watched_directories == 0
