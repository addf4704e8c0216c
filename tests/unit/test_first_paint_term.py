"""The first frame on a real pty: when it is drawn, the quiet input, and the hand-over."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from collectors.base import CollectorUnavailable, Sampled, Unavailable
from collectors.samples import GpuProcess, GpuSample, GpuTick, HostSample, ProcessInfo
from tui.first_paint_term import ENTER, LEAVE, FirstPaint

GiB = 1 << 30
H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture
def pty() -> Iterator[tuple[int, int]]:
    """A real pseudo-terminal, 100x30: (master, slave)."""
    master, slave = os.openpty()
    os.set_blocking(master, False)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    yield master, slave
    os.close(master)
    os.close(slave)


def drain(master: int, wait_s: float = 0.2) -> str:
    """Everything written to the terminal so far (waits `wait_s` for the first bytes)."""
    chunks = []
    while select.select([master], [], [], wait_s)[0]:
        try:
            chunks.append(os.read(master, 65536))
        except BlockingIOError:
            break
        wait_s = 0.05
    return b"".join(chunks).decode("utf-8", "replace")


def gpu_tick(*pids: int) -> Sampled[GpuTick]:
    device = GpuSample(
        0,
        "GPU-0",
        H100,
        memory_used_bytes=5 * GiB,
        memory_total_bytes=80 * GiB,
        processes=tuple(GpuProcess(pid, 4 * GiB) for pid in pids),
    )
    return Sampled("nvml", GpuTick(time.time(), (device,), driver_version="580.1"))


def host(*pids: int) -> Sampled[HostSample]:
    infos = tuple(ProcessInfo(pid, user="alice", command="python train.py") for pid in pids)
    return Sampled("host", HostSample(time.time(), processes=infos))


def lflag(fd: int) -> int:
    return int(termios.tcgetattr(fd)[3])


def test_input_is_quiet_until_the_hand_over_and_typed_keys_wait_for_the_dashboard(
    pty: tuple[int, int],
) -> None:
    master, slave = pty
    before = termios.tcgetattr(slave)
    assert lflag(slave) & termios.ECHO and lflag(slave) & termios.ICANON
    first = FirstPaint("node7", slave, slave)
    assert not lflag(slave) & (termios.ECHO | termios.ICANON)
    assert lflag(slave) & termios.ISIG  # Ctrl-C still stops a stuck start-up
    os.write(master, b"q")
    assert "q" not in drain(master)  # not echoed onto the frame
    first.hand_over()
    assert termios.tcgetattr(slave) == before  # what Textual saves and restores at exit
    assert os.read(slave, 16) == b"q"  # the key is still there for the dashboard to read


def test_the_frame_waits_for_the_processes_details_then_draws_once(pty: tuple[int, int]) -> None:
    master, slave = pty
    first = FirstPaint("node7", slave, slave, host_wait_s=60.0)
    first.tap(host())  # the host's first sample, before it heard of the GPU's pids
    first.tap(gpu_tick(4242))
    assert not first.painted and drain(master, 0.05) == ""
    first.tap(host(4242))
    assert first.painted
    screen = drain(master)
    assert screen.startswith("\x1b[?2026h" + ENTER) and H100 in screen
    assert "4242  alice" in screen and "4.0 GiB" in screen and "python train.py" in screen
    first.tap(gpu_tick(4242, 5151))
    first.tap(host(4242, 5151))
    assert drain(master, 0.05) == ""  # one frame only: the dashboard draws the next
    first.hand_over()


def test_without_details_in_time_the_frame_is_drawn_with_what_came(pty: tuple[int, int]) -> None:
    master, slave = pty
    first = FirstPaint("node7", slave, slave, host_wait_s=0.01)
    first.tap(gpu_tick(4242))  # a pid the host cannot see (another PID namespace)
    deadline = time.monotonic() + 10
    while not first.painted and time.monotonic() < deadline:
        time.sleep(0.01)
    screen = drain(master)
    assert H100 in screen and "4242  N/A" in screen
    first.hand_over()


def test_a_gpu_without_processes_is_drawn_at_once(pty: tuple[int, int]) -> None:
    master, slave = pty
    first = FirstPaint("node7", slave, slave, host_wait_s=60.0)
    first.tap(gpu_tick())
    assert first.painted and H100 in drain(master)
    first.hand_over()


def test_no_driver_no_frame(pty: tuple[int, int]) -> None:
    master, slave = pty
    first = FirstPaint("node7", slave, slave, host_wait_s=0.01)
    first.tap(Unavailable("nvml", CollectorUnavailable("NVIDIA driver not found")))
    first.tap(host())
    first.paint()  # as the timer would
    assert not first.painted and drain(master, 0.05) == ""
    first.close()
    assert drain(master, 0.05) == ""  # nothing to take back either


def test_after_the_hand_over_nothing_is_drawn_and_close_leaves_the_screen_to_textual(
    pty: tuple[int, int],
) -> None:
    master, slave = pty
    first = FirstPaint("node7", slave, slave, host_wait_s=60.0)
    first.tap(gpu_tick())
    drain(master)
    first.hand_over()
    first.tap(gpu_tick())
    first.close()  # Textual left the alternate screen itself; leaving it again moves the cursor
    assert drain(master, 0.05) == ""


def test_when_the_dashboard_never_starts_close_restores_the_normal_screen_and_input(
    pty: tuple[int, int],
) -> None:
    master, slave = pty
    before = termios.tcgetattr(slave)
    first = FirstPaint("node7", slave, slave, host_wait_s=60.0)
    first.tap(gpu_tick())
    drain(master)
    first.close()
    assert drain(master) == LEAVE
    assert termios.tcgetattr(slave) == before


CHILD = """
import os, sys
tty = os.open(sys.argv[1], os.O_RDWR)  # a session leader's first terminal becomes its own
for fd in (0, 2) if sys.argv[2] == "piped" else (0, 1, 2):
    os.dup2(tty, fd)
sys.stdin, sys.stderr = open(0, closefd=False), open(2, "w", closefd=False)
if sys.argv[2] != "piped":
    sys.stdout = open(1, "w", closefd=False)
from tui.first_paint_term import FirstPaint
first = FirstPaint.start("node7")
if first is not None:
    first.close()
print(first is not None, file=open(sys.argv[3], "w"))
"""


@pytest.mark.parametrize(("stdout", "expected"), [("tty", "True"), ("piped", "False")])
def test_a_first_paint_only_when_stdout_is_the_terminal_too(
    pty: tuple[int, int], tmp_path: Path, stdout: str, expected: str
) -> None:
    _, slave = pty
    answer = tmp_path / "answer"
    subprocess.run(
        [sys.executable, "-c", CHILD, os.ttyname(slave), stdout, str(answer)],
        start_new_session=True,
        stdout=subprocess.PIPE,
        check=True,
        timeout=30,
    )
    assert answer.read_text().strip() == expected


def test_no_first_paint_without_a_terminal() -> None:
    # Under pytest stdin and stdout are not a terminal: the dashboard's own check answers.
    assert FirstPaint.start("node7") is None
