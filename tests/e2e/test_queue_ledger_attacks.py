"""The shared ledger as a hostile second user attacked it: root's queue goes on, says it once.

The other user is a real uid (setpriv): she writes forged reservations as files of her own,
holds `ledger.lock` with a real `flock -s`, squats its name as a 0600 file or a directory, and
pre-creates the ledger directory. Root's real runner (real store, real recorder, GPU ticks by
hand) must still launch its job, and say what it ignores in one line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gpuherd.queue.jobs import JobState
from gpuherd.queue.ledger import Ledger, LedgerError
from gpuherd.queue.runner import QueueRunner
from gpuherd.queue.store import QueueStore
from tests.privileges import (
    AS_ROOT,
    OTHER_UID,
    as_other_user,
    other_users_process,
    shared_directory,
)
from tests.queue_helpers import ROOT, GiB, Gpu, mark_spec, python_for_everyone, ran, tick

GPU = "GPU-aaaaaaaa-0000-0000-0000-000000000000"
GOING_ON = (
    "going on without it: reservations are still read and written, but two runners "
    "deciding at the same moment could share headroom"
)
NOT_USED = "it is not used (the ledger directory's own lock still orders runners)"


@pytest.fixture
def shared() -> Iterator[Path]:
    """A parent the other uid can enter (pytest's tmp_path is 0700 under root)."""
    if not AS_ROOT:
        pytest.skip("a second real user needs root (CI runs as root)")
    with shared_directory() as parent:
        yield parent


@pytest.fixture
def her_sleeper() -> Iterator[psutil.Process]:
    with other_users_process() as process:
        yield process


def as_her(*argv: str) -> None:
    done = subprocess.run(as_other_user(list(argv)), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def root_ledger(shared: Path) -> Path:
    d = shared / "ledger"
    d.mkdir()
    d.chmod(0o1777)
    return d


class RootQueue:
    """Root's queue: real store and recorder, a runner ticked by hand over one 80 GiB GPU."""

    def __init__(self, tmp_path: Path, ledger_dir: Path) -> None:
        self.said: list[str] = []
        self.cwd = tmp_path / "work"
        self.cwd.mkdir()
        self.store = QueueStore.open(tmp_path / "state")
        ledger = Ledger(ledger_dir, on_warning=self.said.append, lock_timeout_s=0.3)
        self.runner = QueueRunner(
            self.store, ledger, settle_s=0.0, state_dir=tmp_path / "state", say=self.said.append
        )

    def run_one(self, need_gib: float) -> JobState:
        job = self.store.add(mark_spec("root", self.cwd, need_gib))
        deadline = time.monotonic() + 60
        while self.store.get(job.id).state not in (JobState.DONE, JobState.FAILED):
            assert time.monotonic() < deadline, self.store.get(job.id)
            self.runner.on_gpu_tick(tick([Gpu(GPU, total=80 * GiB, used=0)]))
            self.runner.step()
            time.sleep(0.05)
        return self.store.get(job.id).state


FORGE = textwrap.dedent("""
    import json, sys
    path, body = sys.argv[1], json.loads(sys.argv[2])
    with open(path, "x") as out:
        out.write(json.dumps(body))
""")


def forged(uid: int, pid: int, start: float, **more: object) -> dict[str, object]:
    return {
        "gpu_uuid": GPU,
        "bytes": 10 * GiB,
        "uid": uid,
        "pid": pid,
        "pid_start_time": start,
        "expires_at": time.time() + 60,
        "job": "x:1:1:0",
    } | more


def test_forged_reservations_do_not_count_and_each_is_named_once(
    tmp_path: Path, shared: Path, her_sleeper: psutil.Process
) -> None:
    d = root_ledger(shared)
    python, env = python_for_everyone() or pytest.skip("no Python the other uid can start")
    init_start = psutil.Process(1).create_time()
    mine = (her_sleeper.pid, her_sleeper.create_time())
    cases = [  # as the attack ran them, each claim alone, so each reason is seen
        (
            "res-1-init.json",
            forged(OTHER_UID, 1, init_start),
            f"its process 1 belongs to root (uid 0), not to uid {OTHER_UID}",
        ),
        (
            "res-2-huge.json",
            forged(OTHER_UID, *mine, bytes=2**60),
            f"it reserves {2**60} bytes on {GPU}, more than that GPU's total ({80 * GiB} bytes)",
        ),
        (
            "res-3-forever.json",
            forged(OTHER_UID, *mine, expires_at=1e300),
            "it counts until 1e+300, more than the longest grace period (3600 s) after it was "
            "written",
        ),
    ]
    queue = RootQueue(tmp_path, d)
    for name, body, why in cases:
        done = subprocess.run(
            as_other_user([python, "-c", FORGE, str(d / name), json.dumps(body)]),
            env={**os.environ, **env},
            capture_output=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert queue.run_one(70) is JobState.DONE  # 70 + 1 GiB fits only if nothing counts
        ledger_lines = [line for line in queue.said if line.startswith("ledger:")]
        assert ledger_lines[-1].startswith(f"ledger: {d / name}: {why}"), ledger_lines
        assert ledger_lines[-1].endswith("; not counted")
    assert len([line for line in queue.said if line.startswith("ledger:")]) == 3
    # Her honest reservation, with her own live process, does count: 70 GiB no longer fits.
    honest = forged(OTHER_UID, *mine, bytes=20 * GiB)
    subprocess.run(
        as_other_user([python, "-c", FORGE, str(d / "res-4-honest.json"), json.dumps(honest)]),
        env={**os.environ, **env},
        check=True,
        timeout=60,
    )
    job = queue.store.add(mark_spec("late", queue.cwd, 70))
    for _ in range(3):
        queue.runner.on_gpu_tick(tick([Gpu(GPU, total=80 * GiB, used=0)]))
        queue.runner.step()
    assert queue.store.get(job.id).state is JobState.WAITING
    assert "after 20 GiB reserved" in (queue.store.get(job.id).wait_reason or "")
    assert ran(queue.cwd) == ["root"] * 3


@pytest.mark.parametrize("target", ["ledger.lock", "directory"])
def test_her_shared_flock_does_not_stop_roots_runner(
    tmp_path: Path, shared: Path, target: str
) -> None:
    d = root_ledger(shared)
    Ledger(d, on_warning=lambda text: None)  # root creates ledger.lock, 0644
    held = d / "ledger.lock" if target == "ledger.lock" else d
    holder = subprocess.Popen(
        as_other_user(["flock", "-s", str(held), "sh", "-c", "echo held; exec sleep 120"]),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        queue = RootQueue(tmp_path, d)
        assert queue.run_one(1) is JobState.DONE
        assert queue.run_one(1) is JobState.DONE
    finally:
        holder.kill()
        holder.wait()
    lines = [line for line in queue.said if line.startswith("ledger:")]
    assert len(lines) == 1, lines
    what = f"{held}" if target == "ledger.lock" else f"{d} (the ledger directory)"
    assert lines[0].startswith(f"ledger: {what} has been held for over 0.3 s by pid ")
    assert f"(user uid {OTHER_UID})" in lines[0]
    assert lines[0].endswith(NOT_USED if target == "ledger.lock" else GOING_ON)


@pytest.mark.parametrize("squat", ["file-0600", "directory"])
def test_her_squatted_lock_does_not_stop_roots_runner(
    tmp_path: Path, shared: Path, squat: str
) -> None:
    d = root_ledger(shared)
    lock = d / "ledger.lock"
    if squat == "directory":
        as_her("mkdir", str(lock))
        what = "is not a regular file (a directory)"
    else:
        as_her("install", "-m", "0600", "/dev/null", str(lock))
        what = (
            f"belongs to uid {OTHER_UID}, not to the ledger directory's owner (root "
            "(uid 0)), so it is not trusted"
        )
    queue = RootQueue(tmp_path, d)
    assert queue.run_one(1) is JobState.DONE
    assert queue.run_one(1) is JobState.DONE
    assert [line for line in queue.said if line.startswith("ledger:")] == [
        f"ledger: {lock} {what}; {NOT_USED}"
    ]


def test_a_ledger_directory_she_created_is_refused_by_root(shared: Path) -> None:
    shared.chmod(0o1777)  # like /tmp, where the default ledger lives
    d = shared / "ledger"
    as_her("mkdir", "-m", "1777", str(d))
    with pytest.raises(LedgerError) as refused:
        Ledger(d)
    assert refused.value.msg == (
        f"the ledger directory {d} belongs to uid {OTHER_UID}, not to root or this user, so its "
        f"owner could delete anyone's reservations; move it away and have root create it: "
        f"install -d -m 1777 {d} (or set GPUHERD_LEDGER_DIR)"
    )
    assert sorted(os.listdir(d)) == []  # nothing of root's was written into it


def test_roots_runner_refuses_her_ledger_directory_with_one_line(
    shared: Path, tmp_path: Path
) -> None:
    shared.chmod(0o1777)
    d = shared / "ledger"
    as_her("mkdir", "-m", "1777", str(d))
    env = {**os.environ, "GPUHERD_STATE_DIR": str(tmp_path / "state"), "GPUHERD_LEDGER_DIR": str(d)}
    out = subprocess.run(
        [sys.executable, "-m", "gpuherd", "queue", "run"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == (
        f"gpuherd: queue: the ledger directory {d} belongs to uid {OTHER_UID}, not to root or "
        f"this user, so its owner could delete anyone's reservations; move it away and have "
        f"root create it: install -d -m 1777 {d} (or set GPUHERD_LEDGER_DIR)\n"
    )


def test_her_entries_count_together_at_most_one_whole_gpu(
    tmp_path: Path, shared: Path, her_sleeper: psutil.Process
) -> None:
    """Five 20 GiB entries, each tied to her live `sleep` and each passing every check alone:
    together they count as the GPU's 80 GiB, not 100 GiB, and the one past it is named once."""
    d = root_ledger(shared)
    python, env = python_for_everyone() or pytest.skip("no Python the other uid can start")
    mine = (her_sleeper.pid, her_sleeper.create_time())
    for n in range(5):
        done = subprocess.run(
            as_other_user(
                [
                    python,
                    "-c",
                    FORGE,
                    str(d / f"res-{n}-her.json"),
                    json.dumps(forged(OTHER_UID, *mine, bytes=20 * GiB)),
                ]
            ),
            env={**os.environ, **env},
            capture_output=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
    queue = RootQueue(tmp_path, d)
    job = queue.store.add(mark_spec("root", queue.cwd, 1))
    for _ in range(3):
        queue.runner.on_gpu_tick(tick([Gpu(GPU, total=80 * GiB, used=0)]))
        queue.runner.step()
    assert queue.store.get(job.id).state is JobState.WAITING
    assert "after 80 GiB reserved" in (queue.store.get(job.id).wait_reason or "")
    assert [line for line in queue.said if line.startswith("ledger:")] == [
        f"ledger: {d / 'res-4-her.json'}: with it, uid {OTHER_UID}'s entries on {GPU} would "
        f"reserve more than that GPU's total ({80 * GiB} bytes); not counted"
    ]
