"""The dashboard's input thread sleeps until a key comes, and still reads every key.

A real pseudo-terminal feeds the driver's input thread, as a terminal would; only the hand-over
of the parsed events to the app is replaced, to collect them.
"""

from __future__ import annotations

import os
import pty
import selectors
import signal
import threading
import time
import tty
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from textual import events
from textual.drivers.linux_driver import LinuxDriver

from tui.quiet_input import POLL_S, QuietInputDriver, next_tick_s, quieter


class _Parser:
    def __init__(self, deadline: float | None) -> None:
        self._timeout_time = deadline


def test_the_wait_is_endless_unless_the_parser_waits_for_the_rest_of_a_sequence() -> None:
    assert next_tick_s(_Parser(None), now=100.0) is None
    assert next_tick_s(_Parser(100.25), now=100.0) == pytest.approx(0.25)
    assert next_tick_s(_Parser(99.0), now=100.0) == 0.0  # overdue: look at once
    assert next_tick_s(object(), now=100.0) == POLL_S  # a parser without a deadline: Textual's


def test_only_textuals_linux_driver_is_replaced() -> None:
    assert quieter(LinuxDriver) is QuietInputDriver
    assert quieter(QuietInputDriver) is QuietInputDriver
    assert quieter(object) is object  # headless, web or another platform's driver


class _Collecting(QuietInputDriver):
    def __init__(self) -> None:
        super().__init__(app=None)  # type: ignore[arg-type]  # no app: events are collected
        self.got: list[Any] = []

    def process_message(self, message: Any) -> None:
        self.got.append(message)


@pytest.fixture
def terminal() -> Iterator[tuple[int, int]]:
    """A pseudo-terminal (the side a person types into, the side the driver reads); the
    SIGTSTP and SIGCONT handlers a driver installs are put back afterwards."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTSTP, signal.SIGCONT)}
    master, slave = pty.openpty()
    tty.setraw(slave)  # as Textual sets it: each key as it is typed
    try:
        yield master, slave
    finally:
        os.close(master)
        os.close(slave)
        for sig, handler in saved.items():
            signal.signal(sig, handler)


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float | None]:
    """The timeout of every wait of the input threads, in order (`None`: until input)."""
    seen: list[float | None] = []
    select = QuietInputDriver.SELECTOR.select

    def counted(self: selectors.BaseSelector, timeout: float | None = None) -> Any:
        seen.append(timeout)
        return select(self, timeout)

    monkeypatch.setattr(QuietInputDriver.SELECTOR, "select", counted)
    return seen


def _until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.01)


@contextmanager
def _input_thread(driver: _Collecting) -> Iterator[threading.Thread]:
    """The driver's input thread, running; stopped as Textual stops it, and checked stopped."""
    thread = threading.Thread(target=driver.run_input_thread, daemon=True)
    thread.start()
    try:
        yield thread
    finally:
        driver.exit_event.set()
        thread.join(5)
    assert not thread.is_alive()


def _keys(driver: _Collecting) -> list[str]:
    return [m.key for m in list(driver.got) if isinstance(m, events.Key)]


async def test_the_input_thread_sleeps_reads_keys_and_a_lone_escape_and_stops_when_told(
    terminal: tuple[int, int], waits: list[float | None]
) -> None:
    master, slave = terminal
    driver = _Collecting()
    driver.fileno = slave
    with _input_thread(driver):
        time.sleep(0.6)  # nobody types: Textual's own thread would have woken six times
        assert waits == [None]

        os.write(master, b"q")
        _until(lambda: _keys(driver) == ["q"])
        # An Escape alone is told from the start of a sequence by a deadline: the thread
        # waits until then (not forever) and hands the key over.
        os.write(master, b"\x1b")
        _until(lambda: _keys(driver) == ["q", "escape"])
        assert any(w is not None and 0 < w <= 1.0 for w in waits)
        assert waits[-1] is None  # asleep again


async def test_a_character_split_between_two_reads_is_one_key(terminal: tuple[int, int]) -> None:
    master, slave = terminal
    driver = _Collecting()
    driver.fileno = slave
    with _input_thread(driver):
        os.write(master, "é".encode()[:1])
        time.sleep(0.2)  # read on its own: half a character
        os.write(master, "é".encode()[1:] + b"a")
        _until(lambda: _keys(driver) == ["é", "a"])


async def test_stopped_and_started_again_it_sleeps_and_reads_as_before(
    terminal: tuple[int, int], waits: list[float | None]
) -> None:
    # Textual stops the input thread and starts a new one on suspend and resume (SIGTSTP and
    # SIGCONT, a job suspended by Slurm), with the same driver: stop, clear, close, start.
    master, slave = terminal
    driver = _Collecting()
    driver.fileno = slave
    for round_ in range(2):
        waits.clear()
        with _input_thread(driver):
            time.sleep(0.3)
            assert waits == [None]  # asleep: the last stop left nothing that wakes it
            os.write(master, b"xy"[round_ : round_ + 1])
            _until(lambda n=round_ + 1: len(_keys(driver)) == n)
        driver.exit_event.clear()
        driver.close()
    assert _keys(driver) == ["x", "y"]


async def test_one_stop_wakes_every_input_thread(terminal: tuple[int, int]) -> None:
    # Textual resumes on any SIGCONT, so a stopped and continued dashboard can have two.
    _master, slave = terminal
    driver = _Collecting()
    driver.fileno = slave
    threads = [threading.Thread(target=driver.run_input_thread, daemon=True) for _ in range(3)]
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    driver.exit_event.set()
    for thread in threads:
        thread.join(5)
    assert [t.is_alive() for t in threads] == [False, False, False]


async def test_a_closed_input_is_not_read_in_a_loop(
    terminal: tuple[int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The input ends (a pipe at its end reads as b""): the thread stops looking at it and
    # sleeps, instead of spinning on an always-readable end of file.
    read_end, write_end = os.pipe()
    os.close(write_end)
    driver = _Collecting()
    driver.fileno = read_end
    reads: list[int] = []
    real_read = os.read

    def counted(fd: int, n: int) -> bytes:
        reads.append(fd)
        return real_read(fd, n)

    monkeypatch.setattr(os, "read", counted)
    try:
        with _input_thread(driver):
            time.sleep(0.3)
    finally:
        os.close(read_end)
    assert reads.count(read_end) == 1
