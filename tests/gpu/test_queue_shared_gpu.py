"""Root's queue on a real GPU while another user attacks the shared ledger.

The other user is a real uid (setpriv). Before root's runner starts she squats `ledger.lock` as
a 0600 file of hers and writes forged reservations (init's pid with her uid, 2**60 bytes, an
expiry of 1e300) for the real GPU. Root then queues, through the real CLI, a job with no
`--vram` (a zero need, which once killed the runner) and a job whose own `PYTHONPATH` holds a
`json.py` that would break gpuherd's recorder if it reached it. The real `gpuherd queue run`
must run both to `done` on the real card, the job's environment reaching the job, and name the
forgeries once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from collectors.machine.nvml import NvmlCollector
from gpuherd.queue.jobs import JobState
from gpuherd.queue.store import QueueStore
from tests.privileges import AS_ROOT, OTHER_UID, as_other_user, shared_directory
from tests.queue_helpers import python_for_everyone

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]

FORGE = textwrap.dedent("""
    import json, os, sys
    directory, gpu, uid, start = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    fd = os.open(os.path.join(directory, "ledger.lock"), os.O_CREAT | os.O_EXCL | os.O_WRONLY,
                 0o600)
    os.close(fd)
    base = {"gpu_uuid": gpu, "bytes": 1 << 30, "uid": uid, "pid": 1, "pid_start_time": start,
            "expires_at": 1e300, "job": "x:1:1:0"}
    for name, more in (("res-1-init.json", {}), ("res-2-huge.json", {"bytes": 2**60})):
        with open(os.path.join(directory, name), "x") as out:
            out.write(json.dumps({**base, **more}))
""")


@pytest.fixture
def shared() -> Iterator[Path]:
    """A parent the other uid can enter (pytest's tmp_path is 0700 under root)."""
    if not AS_ROOT:
        pytest.skip("a second real user needs root (CI runs as root)")
    with shared_directory() as parent:
        yield parent


def _gpu_uuid() -> str:
    collector = NvmlCollector()
    collector.open()
    try:
        devices = collector.sample().devices
    finally:
        collector.close()
    assert devices and devices[0].uuid
    return devices[0].uuid


def _queue(env: dict[str, str], cwd: Path, *argv: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpuherd", "queue", "add", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def test_a_zero_need_job_and_a_job_with_its_own_pythonpath_run_past_forged_claims(
    tmp_path: Path, shared: Path
) -> None:
    torch = pytest.importorskip("torch")
    assert torch.cuda.is_available()
    gpu = _gpu_uuid()
    ledger = shared / "ledger"
    ledger.mkdir()
    ledger.chmod(0o1777)
    python, her_env = python_for_everyone() or pytest.skip("no Python the other uid can start")
    done = subprocess.run(
        as_other_user(
            [
                python,
                "-c",
                FORGE,
                str(ledger),
                gpu,
                str(OTHER_UID),
                str(psutil.Process(1).create_time()),
            ]
        ),
        env={**os.environ, **her_env},
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    state, work, shadow = tmp_path / "state", tmp_path / "work", tmp_path / "shadow"
    work.mkdir()
    shadow.mkdir()
    (shadow / "json.py").write_text("raise SystemExit('the job environment reached gpuherd')\n")
    env = {
        **os.environ,
        "GPUHERD_STATE_DIR": str(state),
        "GPUHERD_LEDGER_DIR": str(ledger),
        "PYTHONUNBUFFERED": "1",
    }
    alloc = (
        "import torch; x = torch.ones(256 << 20, device='cuda'); "
        "torch.cuda.synchronize(); print('zero-need job held', x.numel(), 'floats')"
    )
    _queue(env, work, "--name", "zero", "--", sys.executable, "-c", alloc)
    _queue(
        env,
        work,
        "--name",
        "shadowed",
        "--vram",
        "2GiB",
        "--env",
        f"PYTHONPATH={shadow}",
        "--",
        sys.executable,
        "-c",
        "import os; print('job PYTHONPATH', os.environ['PYTHONPATH'])",
    )
    runner_log = tmp_path / "runner.log"
    with runner_log.open("w") as log:
        runner = subprocess.Popen(
            [sys.executable, "-m", "gpuherd", "queue", "run", "--settle", "1", "--interval", "0.5"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        store = QueueStore.open(state)
        try:
            deadline = time.monotonic() + 200
            while store.jobs([JobState.WAITING, JobState.LAUNCHING, JobState.RUNNING]):
                assert runner.poll() is None, runner_log.read_text()
                assert time.monotonic() < deadline, runner_log.read_text()
                time.sleep(0.5)
        finally:
            runner.send_signal(signal.SIGTERM)
            runner.wait(30)
    said = runner_log.read_text()
    jobs = {job.spec.name: job for job in store.jobs()}
    assert {name: job.state for name, job in jobs.items()} == {
        "zero": JobState.DONE,
        "shadowed": JobState.DONE,
    }, said
    zero_log = (Path(jobs["zero"].session_dir or "") / "command.log").read_text()
    assert f"zero-need job held {256 << 20} floats" in zero_log
    shadow_log = (Path(jobs["shadowed"].session_dir or "") / "command.log").read_text()
    assert f"job PYTHONPATH {shadow}" in shadow_log
    assert "Traceback" not in said
    # Both forgeries, found in one scan, are named together in one line, and never again.
    assert said.count(f"ledger: 2 files in {ledger} are not counted") == 1, said
    assert said.count("not counted") == 1, said
    assert said.count("ledger.lock") >= 1, said  # the squatted lock is named, not obeyed
    print(json.dumps({"gpu": gpu, "runner_log": said.splitlines()[-12:]}, indent=1))
