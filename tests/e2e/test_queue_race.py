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
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuherd.queue.jobs import JobSpec
from gpuherd.queue.store import QueueStore
from tests.queue_helpers import (
    ROOT,
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
    spec = JobSpec(
        argv=("sh", "-c", JOB),
        cwd=str(home / "work"),
        vram_bytes=48 * GiB,
        env=(("QUEUE_JOB_MARK", name), ("RELEASE", str(release))),
    )
    store = QueueStore.open(home / "state")
    store.add(spec)
    store.close()
    for path in (home, *home.rglob("*")):
        os.lchown(path, *user)
    return home / "state", home / "work"


def _launched(state_dir: Path) -> bool:
    """Whether the runner launched its job (it makes the job's session directory then)."""
    jobs = state_dir / "jobs"
    return jobs.is_dir() and any(jobs.iterdir())


def _state_as(user: tuple[int, int], state_dir: Path) -> str:
    # The store refuses a state directory of another uid, root included: ask as its owner.
    found = python_for_everyone()
    assert found is not None
    python, env = found
    code = (
        "import sys; from pathlib import Path; from gpuherd.queue.store import QueueStore; "
        "print(QueueStore.open(Path(sys.argv[1])).get(1).state.value)"
    )
    out = subprocess.run(
        [
            "setpriv",
            f"--reuid={user[0]}",
            f"--regid={user[1]}",
            "--clear-groups",
            python,
            "-c",
            code,
            str(state_dir),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env={
            **os.environ,
            **env,
            "PYTHONPATH": os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]),
        },
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _wait(predicate, what: str, timeout_s: float = 60.0) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def _owners(ledger: Path) -> list[int]:
    """The owners of the reservations in the ledger now.

    Read without the ledger's lock, as another user's tool would: the runner hands a
    reservation from itself to the job it started (release, then reserve, under the lock),
    so an entry listed may be gone by the time it is looked at, and for a moment none is there.
    """
    owners = []
    for entry in ledger.glob("*.json"):
        try:
            owners.append(entry.stat().st_uid)
        except FileNotFoundError:
            pass  # released between the listing and the look
    return owners


def _race(base: Path) -> None:
    base.mkdir(mode=0o755)
    ledger = ledger_dir(base)
    script = base / "gpus.json"
    write_script(script, [Gpu("GPU-shared", total=80 * GiB)])
    releases = {name: base / f"release-{name}" for name in ("a", "b")}
    queues = {
        name: _queue(base, user, name, releases[name])
        for name, user in zip(("a", "b"), USERS, strict=True)
    }
    runners = [
        fake_runner(script, queues[name][0], ledger, *FLAGS, user=user)
        for name, user in zip(("a", "b"), USERS, strict=True)
    ]
    try:
        _wait(lambda: any(_launched(q[0]) for q in queues.values()), "no job started")
        started = [n for n, q in queues.items() if _launched(q[0])]
        assert len(started) == 1, started
        (first,) = started
        second = "b" if first == "a" else "a"
        winner_uid = USERS[0 if first == "a" else 1][0]
        # Both had the room at the same moment; the second must keep waiting.
        hold_until = time.monotonic() + HOLD_S
        winner_seen = False
        while time.monotonic() < hold_until:
            assert not _launched(queues[second][0])
            owners = _owners(ledger)
            assert len(owners) <= 1 and set(owners) <= {winner_uid}, owners
            winner_seen = winner_seen or winner_uid in owners
            time.sleep(0.05)
        assert winner_seen, "the winner's reservation was never in the ledger"
        releases[first].touch()
        _wait(lambda: _launched(queues[second][0]), "the second job never started")
        releases[second].touch()
        _wait(
            lambda: all((q[1] / "ran.txt").exists() for q in queues.values()),
            "the jobs never ended",
        )
        _wait(lambda: not list(ledger.glob("*.json")), "a reservation was left behind")
        _wait(
            lambda: (
                [_state_as(u, q[0]) for u, q in zip(USERS, queues.values(), strict=True)]
                == ["done", "done"]
            ),
            "the runners never settled the ended jobs",
        )
    finally:
        for runner in runners:
            runner.send_signal(signal.SIGTERM)
        outs = [runner.communicate(timeout=30)[0] for runner in runners]
        for release in releases.values():
            release.touch()  # a failed round leaves no job waiting for its file forever
    assert [r.returncode for r in runners] == [0, 0], outs
    for name, (_, work) in queues.items():
        assert (work / "ran.txt").read_text() == f"{name}\n"


@pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")
def test_two_users_never_get_the_same_headroom(shared_dir: Path) -> None:
    for round_ in range(ROUNDS):
        _race(shared_dir / f"round{round_}")
