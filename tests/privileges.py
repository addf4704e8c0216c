"""What needs root in the tests, done so that CI (which runs as root) runs every behaviour.

- `as_other_user`: run a command as an unprivileged uid (`setpriv`), for checks that root
  would pass by privilege (a read-only directory, a mode-000 file).
- `tmpfs`: a small real filesystem (a full disk, a read-only one), unmounted however the test
  ends: a finalizer registered as soon as it is mounted, lazily when a file is still open.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

OTHER_UID = 12345
"""An unprivileged uid with no account: it owns nothing on the test machine."""
AS_ROOT = os.geteuid() == 0


def as_other_user(argv: list[str], uid: int = OTHER_UID) -> list[str]:
    """`argv` run as `uid` when the tests run as root, else as it is (already unprivileged).

    Skips only when root has no `setpriv` (util-linux), which CI installs.
    """
    if not AS_ROOT:
        return argv
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed; it runs the check as another user")
    return [setpriv, "--reuid", str(uid), "--regid", str(uid), "--clear-groups", *argv]


@contextmanager
def other_users_process() -> Iterator[psutil.Process]:
    """A live `sleep` of `OTHER_UID`, once `setpriv` has switched to it; killed at the end.

    What a reservation of hers names: one of root's processes would not count as hers.
    """
    if not AS_ROOT:
        pytest.skip("a process of a second uid needs root (CI runs as root)")
    proc = subprocess.Popen(as_other_user(["sleep", "120"]))
    try:
        process = psutil.Process(proc.pid)
        deadline = time.monotonic() + 30
        while process.uids().effective != OTHER_UID:  # setpriv has not switched yet
            assert time.monotonic() < deadline
            time.sleep(0.01)
        yield process
    finally:
        proc.kill()
        proc.wait()


@contextmanager
def shared_directory() -> Iterator[Path]:
    """A fresh directory every uid can enter (pytest's `tmp_path` is 0700 under root)."""
    where = Path(tempfile.mkdtemp(prefix="gpuherd-test-"))
    where.chmod(0o755)
    try:
        yield where
    finally:
        shutil.rmtree(where, ignore_errors=True)


def mounted(where: Path) -> bool:
    target = str(where.resolve())
    with open("/proc/self/mounts", encoding="utf-8") as mounts:
        return any(line.split()[1] == target for line in mounts)


def tmpfs(request: pytest.FixtureRequest, where: Path, options: str) -> Path:
    """Mount a tmpfs at `where` (created) for the rest of the test; unmounted at teardown.

    Not root: skipped (mounting needs root; CI runs as root). Root and the mount fails: the
    test fails, so a CI without the behaviour is noticed instead of skipped.
    """
    if not AS_ROOT:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    where.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)], capture_output=True, text=True
    )
    assert done.returncode == 0, f"mount -t tmpfs -o {options} failed as root: {done.stderr}"
    request.addfinalizer(lambda: _unmount(where))
    return where


def _unmount(where: Path) -> None:
    # A test that failed before closing its files keeps the mount busy: detach it lazily, so it
    # goes away once they are closed instead of staying mounted under /tmp.
    if subprocess.run(["umount", str(where)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "--lazy", str(where)], check=True, capture_output=True)
    assert not mounted(where), f"{where} is still mounted"
