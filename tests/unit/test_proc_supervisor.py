"""The supervisor's loop with a real command: command.log is fsynced, idle or busy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from itertools import pairwise
from pathlib import Path

import pytest

from gpuherd.proc import supervisor
from gpuherd.proc.status import StatusPipe
from gpuherd.proc.supervisor import supervise

pytestmark = pytest.mark.waits  # on one worker, beside the others (tests/conftest.py)


PY = sys.executable


class LogSyncs:
    """Calls of the real os.fsync on one file, with their monotonic time."""

    def __init__(self, path: Path, on_sync: Path | None = None) -> None:
        self.path, self.on_sync = path.resolve(), on_sync
        self.times: list[float] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real = os.fsync

        def observed(fd: int) -> None:
            real(fd)
            if Path(os.readlink(f"/proc/self/fd/{fd}")) == self.path:
                self.times.append(time.monotonic())
                if self.on_sync is not None:
                    self.on_sync.touch()

        monkeypatch.setattr(os, "fsync", observed)


def test_an_idle_command_gets_its_output_synced_without_writing_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before, command.log was never fsynced; a sync due only at the next write would wait
    # here until the command gives up (30 s) and print "no sync".
    log, synced = tmp_path / "command.log", tmp_path / "synced"
    syncs = LogSyncs(log, on_sync=synced)
    syncs.install(monkeypatch)
    script = (
        "import os, sys, time\n"
        "print('step=1 loss=2.0', flush=True)\n"
        "deadline = time.monotonic() + 30\n"
        f"while not os.path.exists({str(synced)!r}) and time.monotonic() < deadline:\n"
        "    time.sleep(0.02)\n"
        f"print('saw sync' if os.path.exists({str(synced)!r}) else 'no sync')\n"
    )
    code = supervise(
        [PY, "-c", script], log, tmp_path / "command.exit.json", StatusPipe(None), echo=False
    )
    assert code == 0
    assert log.read_text() == "step=1 loss=2.0\nsaw sync\n"
    assert len(syncs.times) == 2  # the idle one, and the one at the exit


def test_a_busy_command_gets_its_output_synced_every_two_seconds_at_most(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "command.log"
    syncs = LogSyncs(log)
    syncs.install(monkeypatch)
    script = (
        "import time\n"
        "end = time.monotonic() + 4.5\n"
        "i = 0\n"
        "while time.monotonic() < end:\n"
        "    print(f'step={i}', flush=True)\n"
        "    i += 1\n"
        "    time.sleep(0.01)\n"
    )
    assert supervise([PY, "-c", script], log, None, StatusPipe(None), echo=False) == 0
    lines = log.read_text().splitlines()
    assert lines == [f"step={i}" for i in range(len(lines))]
    periodic = syncs.times[:-1]  # the last one is the sync at the exit
    assert len(periodic) >= 1
    assert all(b - a >= 2.0 for a, b in pairwise(periodic))


def test_the_supervisor_imports_the_standard_library_only() -> None:
    # It starts before every recorded command: nothing heavy (pandas, psutil, NVML) at start.
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import gpuherd.proc.supervisor\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "print(sorted(new - set(sys.stdlib_module_names)))\n"
        "print(sorted(m for m in sys.modules if m.startswith('gpuherd')))\n"
    )
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.splitlines() == [
        "['gpuherd']",
        "['gpuherd', 'gpuherd.common', 'gpuherd.common.safe_files', 'gpuherd.proc', "
        "'gpuherd.proc.linelog', 'gpuherd.proc.status', 'gpuherd.proc.supervisor']",
    ]  # safe_files: stdlib only


def test_without_a_pidfd_the_exit_is_still_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Linux before 5.3 has no pidfd_open: the loop then looks for the exit every 50 ms.
    monkeypatch.setattr(supervisor, "_pidfd", lambda pid: None)
    log, record = tmp_path / "command.log", tmp_path / "command.exit.json"
    script = "import sys, time; print('a', flush=True); time.sleep(0.3); print('b'); sys.exit(7)"
    assert supervise([PY, "-c", script], log, record, StatusPipe(None), echo=False) == 7
    assert log.read_text() == "a\nb\n"
    assert json.loads(record.read_text())["exit_code"] == 7
