"""The one liveness check: start times against pid reuse, zombies, and the kill(0) form."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from collectors.process_alive import (
    SAME_START_TOLERANCE_S,
    pid_exists,
    proc_stat,
    process_alive,
    process_start_time,
    running_process,
)


def test_a_process_is_itself_only_with_its_own_start_time() -> None:
    started = process_start_time(os.getpid())
    assert started is not None
    assert process_alive(os.getpid(), started)
    assert process_alive(os.getpid(), started + SAME_START_TOLERANCE_S / 2)
    # A different start time under the same pid is a later process given a reused pid.
    assert not process_alive(os.getpid(), started + SAME_START_TOLERANCE_S * 2)
    assert not process_alive(os.getpid(), started - 1.0)
    seen = running_process(os.getpid(), started)
    assert seen is not None and seen.owner_uid == os.geteuid()


def test_a_zombie_is_gone_with_a_start_time_and_alive_to_kill_zero() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    started = process_start_time(child.pid)
    assert started is not None
    try:
        deadline = time.monotonic() + 30
        while (found := proc_stat(child.pid)) is not None and not found[2]:
            assert time.monotonic() < deadline, "the child never exited"
            time.sleep(0.01)
        assert found is not None and found[2], "exited, not reaped: a zombie"
        assert not process_alive(child.pid, started)
        assert pid_exists(child.pid)  # kill(pid, 0) cannot tell a zombie from a process
    finally:
        child.wait()
    assert not pid_exists(child.pid)
    assert not process_alive(child.pid, started)
    assert process_start_time(child.pid) is None


def test_proc_stat_reads_the_parent_and_refuses_group_pids() -> None:
    found = proc_stat(os.getpid())
    assert found is not None and found[0] == os.getppid() and not found[2]
    assert not pid_exists(0) and not pid_exists(-1)  # process groups, not processes
