"""Two users' runners race for one GPU's headroom through the shared ledger: never both.

Each runner runs as its own uid (setpriv), with its own state directory, and one shared ledger
directory (mode 1777). Each queue holds one job needing 60 % of the one fake GPU. Both runners
start together, so both see the room at the same tick: exactly one may launch, and the other
must wait until the first one's reservation ends (here: its job ends).
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuherd.queue.jobs import JobSpec, JobState
from gpuherd.queue.store import QueueStore
from tests.queue_helpers import (
    GiB,
    Gpu,
    fake_runner,
    ledger_dir,
    python_for_everyone,
    write_script,
)

pytestmark = pytest.mark.slow

USERS = ((47101, 47101), (47102, 47102))
ROUNDS = 3
HOLD_S = 3.0
JOB = 'while [ ! -e "$RELEASE" ]; do sleep 0.05; done; echo "$QUEUE_JOB_MARK" >> ran.txt'
FLAGS = ("--settle", "0.5", "--interval", "0.1", "--grace", "600")


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "needs root to run the two runners as two uids (setpriv --reuid)"
    if shutil.which("setpriv") is None:
        return "needs setpriv (util-linux) to run the two runners as two uids"
    if python_for_everyone() is None:
        return "needs a Python that other uids can start (this one lives under a private dir)"
    return None


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    # Not pytest's tmp_path: that lives under a 0700 directory the two uids cannot enter.
    path = Path(tempfile.mkdtemp(prefix="gpuherd-race-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _queue(base: Path, user: tuple[int, int], name: str, release: Path) -> tuple[Path, Path]:
    home = base / name
    (home / "work").mkdir(parents=True)
    spec = JobSpec(argv=("sh", "-c", JOB), cwd=str(home / "work"), vram_bytes=48 * GiB,
                   env=(("QUEUE_JOB_MARK", name), ("RELEASE", str(release))))
    store = QueueStore.open(home / "state")
    store.add(spec)
    store.close()
    for path in (home, *home.rglob("*")):
        os.lchown(path, *user)
    return home / "state", home / "work"


def _state(state_dir: Path) -> JobState:
    store = QueueStore.open(state_dir)
    try:
        return store.get(1).state
    finally:
        store.close()


@pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")
def test_two_users_never_get_the_same_headroom(shared_dir: Path) -> None:
    for round_ in range(ROUNDS):
        base = shared_dir / f"round{round_}"
        base.mkdir(mode=0o755)
        ledger = ledger_dir(base)
        script = base / "gpus.json"
        write_script(script, [Gpu("GPU-shared", total=80 * GiB)])
        releases = {name: base / f"release-{name}" for name in ("a", "b")}
        queues = {name: _queue(base, user, name, releases[name])
                  for name, user in zip(("a", "b"), USERS, strict=True)}
        runners = [fake_runner(script, queues[name][0], ledger, *FLAGS, user=user)
                   for name, user in zip(("a", "b"), USERS, strict=True)]
        try:
            deadline = time.monotonic() + 60
            while True:
                states = {name: _state(q[0]) for name, q in queues.items()}
                started = [n for n, s in states.items() if s is not JobState.WAITING]
                if started or time.monotonic() > deadline:
                    break
                time.sleep(0.02)
            assert len(started) == 1, states
            (first,) = started
            assert states[first] in (JobState.LAUNCHING, JobState.RUNNING), states
            second = "b" if first == "a" else "a"
            # Both had the room at the same moment; the second must keep waiting.
            hold_until = time.monotonic() + HOLD_S
            while time.monotonic() < hold_until:
                assert _state(queues[second][0]) is JobState.WAITING
                entries = list(ledger.glob("*.json"))
                assert len(entries) == 1 and entries[0].stat().st_uid == USERS[
                    0 if first == "a" else 1][0]
                time.sleep(0.05)
            releases[first].touch()
            deadline = time.monotonic() + 60
            while _state(queues[second][0]) is JobState.WAITING:
                assert time.monotonic() < deadline, "the second job never started"
                time.sleep(0.05)
            releases[second].touch()
            while {_state(q[0]) for q in queues.values()} != {JobState.DONE}:
                assert time.monotonic() < deadline, "the jobs never ended"
                time.sleep(0.05)
        finally:
            for runner in runners:
                runner.send_signal(signal.SIGTERM)
            outs = [runner.communicate(timeout=30)[0] for runner in runners]
        for name in ("a", "b"):
            assert (queues[name][1] / "ran.txt").read_text() == f"{name}\n"
        assert [r.returncode for r in runners] == [0, 0], outs
