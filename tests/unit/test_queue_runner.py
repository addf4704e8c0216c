"""The queue runner in-process: real store, ledger, recorder and jobs; GPU ticks by hand."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuherd.queue import runner as runner_module
from gpuherd.queue.adopt import STOPPED_WHILE_LAUNCHING
from gpuherd.queue.jobs import JobSpec, JobState
from gpuherd.queue.launch import RUNNER_OUT
from gpuherd.queue.runner import PAUSED, QueueRunner, oom_retry_need
from tests.queue_helpers import ROOT, GiB, Gpu, Queue, mark_spec, ran
from tests.recorded import wait_until

ENDED = (JobState.DONE, JobState.FAILED, JobState.CANCELLED)
OOM_LINE = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


@pytest.fixture(autouse=True)
def _release_held_jobs(tmp_path: Path) -> Iterator[None]:
    yield
    # A failed test must not leave a job waiting for its `hold` file to go, forever.
    (tmp_path / "work" / "hold").unlink(missing_ok=True)


def held_job(q: Queue, vram_bytes: int) -> JobSpec:
    """A job that runs until its working directory's `hold` file is gone."""
    return JobSpec(
        argv=("sh", "-c", "while [ -e hold ]; do sleep 0.05; done"),
        cwd=str(q.cwd),
        vram_bytes=vram_bytes,
    )


def test_job_starts_only_after_the_settle_period_on_the_best_fitting_gpu(tmp_path: Path) -> None:
    q = Queue(
        tmp_path,
        [Gpu("GPU-a", used=60 * GiB), Gpu("GPU-b", used=10 * GiB), Gpu("GPU-c", used=50 * GiB)],
        settle_s=4.0,
    )
    spec = JobSpec(
        argv=(
            "sh",
            "-c",
            'echo "$CUDA_VISIBLE_DEVICES $CUDA_DEVICE_ORDER $GPUHERD_QUEUE_JOB" > env.txt',
        ),
        cwd=str(q.cwd),
        vram_bytes=20 * GiB,
    )
    job = q.add(spec)
    t0 = time.time()
    q.step(t0 - 3.0)
    q.step(t0)  # free 20, 70 and 30 GiB, held for 3 s of 4 s
    assert q.state_of(job.id) is JobState.WAITING
    reason = q.job(job.id).wait_reason  # decide's words, stored for `queue ls`
    assert reason is not None and reason.startswith("GPU 1:") and "3 s of 4 s" in reason
    q.step(t0 + 1.0)
    launched = q.job(job.id)
    # GPU-a lacks room (20 < 21 GiB); of b (70 free) and c (30 free), c leaves the least over.
    assert launched.state is JobState.RUNNING
    assert launched.gpu_uuids == ("GPU-c",) and launched.gpu_indices == (2,)
    q.step_until(lambda: q.state_of(job.id) is JobState.DONE)
    assert (q.cwd / "env.txt").read_text().split() == ["GPU-c", "PCI_BUS_ID", str(job.id)]
    session = Path(launched.session_dir or "")
    assert session == q.state / "jobs" / f"{job.id}-sh"
    assert (session / "command.exit.json").exists() and (session / RUNNER_OUT).exists()


def test_reservation_moves_to_the_job_and_is_released_when_its_usage_reaches_it(
    tmp_path: Path,
) -> None:
    gpu = Gpu("GPU-a", total=80 * GiB, used=10 * GiB)
    q = Queue(tmp_path, [gpu], grace_s=600.0)
    hold = q.cwd / "hold"
    hold.touch()
    first = q.add(held_job(q, 40 * GiB))
    second = q.add(mark_spec("second", q.cwd, 40))
    q.step()
    running = q.job(first.id)
    assert running.state is JobState.RUNNING and q.state_of(second.id) is JobState.WAITING
    (entry,) = q.entries()
    assert entry["gpu_uuid"] == "GPU-a" and entry["bytes"] == 40 * GiB
    assert entry["pid"] == running.pid and entry["uid"] == os.getuid()
    assert entry["expires_at"] == pytest.approx((running.started_at or 0) + 600.0, abs=5.0)
    # 70 GiB free minus the 40 GiB held: no room for 40 + 1 GiB, though the card looks empty.
    q.step()
    assert q.state_of(second.id) is JobState.WAITING
    assert re.search(r"^GPU 0: 30(\.0)? GiB free", q.job(second.id).wait_reason or "")
    # The job allocates 39 GiB: not yet all it asked for, the reservation stays.
    gpu.used, gpu.processes = 49 * GiB, [(running.pid or 0, 39 * GiB)]
    q.step()
    assert len(q.entries()) == 1
    # It reaches 40 GiB: released; the memory itself now keeps the second job out.
    gpu.used, gpu.processes = 50 * GiB, [(running.pid or 0, 40 * GiB)]
    q.step()
    assert q.entries() == [] and q.state_of(second.id) is JobState.WAITING
    hold.unlink()
    gpu.used, gpu.processes = 10 * GiB, []
    q.step_until(lambda: q.state_of(second.id) in ENDED and q.state_of(first.id) in ENDED)
    assert q.state_of(first.id) is JobState.DONE and q.state_of(second.id) is JobState.DONE
    assert ran(q.cwd) == ["second"]
    assert q.entries() == []


def test_reservation_ends_when_the_command_ends_before_its_recorder(tmp_path: Path) -> None:
    q = Queue(tmp_path, [Gpu("GPU-a", total=80 * GiB)], grace_s=600.0)
    job = q.add(JobSpec(argv=("sleep", "30"), cwd=str(q.cwd), vram_bytes=50 * GiB))
    q.step()
    q.step()
    running = q.job(job.id)
    assert running.state is JobState.RUNNING and len(q.entries()) == 1
    # The command's supervisor wrote how it ended; the recorder is still closing the session.
    (Path(running.session_dir or "") / "command.exit.json").write_text('{"exit_code": 0}')
    q.step()
    assert q.entries() == [] and q.state_of(job.id) is JobState.RUNNING
    os.killpg(running.pid or 0, 15)
    q.step_until(lambda: q.state_of(job.id) in ENDED)


def test_reservation_ends_with_the_grace_period(tmp_path: Path) -> None:
    q = Queue(tmp_path, [Gpu("GPU-a", total=80 * GiB)], grace_s=3.0)
    first = q.add(JobSpec(argv=("sleep", "30"), cwd=str(q.cwd), vram_bytes=50 * GiB))
    second = q.add(mark_spec("second", q.cwd, 50))
    decided = time.time()
    q.step()
    assert q.state_of(first.id) is JobState.RUNNING and q.state_of(second.id) is JobState.WAITING
    (entry,) = q.entries()
    assert decided <= float(entry["expires_at"]) - 3.0 <= time.time()  # type: ignore[arg-type]
    q.step()
    assert q.state_of(second.id) is JobState.WAITING or time.time() > entry["expires_at"]
    # The first never allocates anything: after the grace its memory is the card's again.
    q.step_until(lambda: q.state_of(second.id) is not JobState.WAITING)
    assert (q.job(second.id).started_at or 0) >= entry["expires_at"]
    os.killpg(q.job(first.id).pid or 0, 15)
    q.step_until(lambda: q.state_of(second.id) is JobState.DONE and q.state_of(first.id) in ENDED)
    assert ran(q.cwd) == ["second"]


def test_a_job_that_cannot_start_fails_with_the_reason_and_the_queue_goes_on(
    tmp_path: Path,
) -> None:
    q = Queue(tmp_path, [Gpu("GPU-a")])
    gone = tmp_path / "gone"
    gone.mkdir()
    missing = q.add(JobSpec(argv=("no-such-command-xyz",), cwd=str(q.cwd), vram_bytes=GiB))
    vanished = q.add(JobSpec(argv=("true",), cwd=str(gone), vram_bytes=GiB))
    fine = q.add(mark_spec("fine", q.cwd, 1))
    gone.rmdir()
    q.step_until(lambda: q.state_of(fine.id) in ENDED)
    assert q.state_of(missing.id) is JobState.FAILED
    assert (
        q.job(missing.id).wait_reason == "could not start: command not found: no-such-command-xyz"
    )
    assert q.state_of(vanished.id) is JobState.FAILED
    assert (
        q.job(vanished.id).wait_reason == f"could not start: cwd vanished: {gone} is not "
        "a directory any more"
    )
    assert q.state_of(fine.id) is JobState.DONE and ran(q.cwd) == ["fine"]
    assert q.entries() == []


def test_paused_queue_launches_nothing_and_says_why(tmp_path: Path) -> None:
    q = Queue(tmp_path, [Gpu("GPU-a")])
    job = q.add(mark_spec("a", q.cwd, 1))
    q.store.set_paused(True)
    for _ in range(3):
        q.step()
    assert q.state_of(job.id) is JobState.WAITING and q.job(job.id).wait_reason == PAUSED
    q.store.set_paused(False)
    q.step_until(lambda: q.state_of(job.id) is JobState.DONE)
    assert ran(q.cwd) == ["a"]


@pytest.mark.parametrize(("need_gib", "retry_need_gib"), [(10, 15), (2, 4)])
def test_oom_retry_once_with_a_larger_need(
    tmp_path: Path, need_gib: int, retry_need_gib: int
) -> None:
    assert oom_retry_need(need_gib * GiB) == retry_need_gib * GiB
    q = Queue(tmp_path, [Gpu("GPU-a")])
    script = f'echo x >> tries.txt; echo "{OOM_LINE}"; exit 1'
    job = q.add(
        JobSpec(
            argv=("sh", "-c", script), cwd=str(q.cwd), vram_bytes=need_gib * GiB, retry_oom=True
        )
    )
    q.step_until(lambda: q.job(job.id).attempts == 2 and q.state_of(job.id) in ENDED)
    final = q.job(job.id)
    assert final.state is JobState.FAILED and final.exit_code == 1
    assert final.spec.vram_bytes == retry_need_gib * GiB
    assert (q.cwd / "tries.txt").read_text() == "x\nx\n"  # the second OOM is not retried
    assert final.session_dir is not None and final.session_dir.endswith(".2")


@pytest.mark.parametrize(("retry", "line"), [(False, OOM_LINE), (True, "Segmentation fault")])
def test_no_retry_without_the_flag_or_without_an_oom(
    tmp_path: Path, retry: bool, line: str
) -> None:
    q = Queue(tmp_path, [Gpu("GPU-a")])
    job = q.add(
        JobSpec(
            argv=("sh", "-c", f'echo "{line}"; exit 1'),
            cwd=str(q.cwd),
            vram_bytes=4 * GiB,
            retry_oom=retry,
        )
    )
    q.step_until(lambda: q.state_of(job.id) in ENDED)
    for _ in range(3):
        q.step()
    final = q.job(job.id)
    assert final.state is JobState.FAILED and final.attempts == 1
    assert final.spec.vram_bytes == 4 * GiB


def test_restart_puts_a_job_left_launching_without_a_process_back_in_line(tmp_path: Path) -> None:
    q = Queue(tmp_path, [Gpu("GPU-a")])
    job = q.add(mark_spec("a", q.cwd, 1))
    second = q.add(mark_spec("b", q.cwd, 1))
    session = q.state / "jobs" / f"{job.id}-sh"
    assert q.store.mark_launching(job.id, ["GPU-a"], [0], str(session))  # then: kill -9
    q.runner.step()  # the restarted runner's first step: adoption only, nothing runs yet
    back = q.job(job.id)
    assert (back.state, back.attempts, back.session_dir) == (JobState.WAITING, 0, None)
    assert f"job {job.id} is {STOPPED_WHILE_LAUNCHING}" in q.said
    assert [j.id for j in q.store.jobs([JobState.WAITING])][:2] == [job.id, second.id]
    q.step_until(lambda: q.state_of(job.id) in ENDED)
    final = q.job(job.id)
    assert final.state is JobState.DONE and final.attempts == 1
    assert ran(q.cwd).count("a") == 1


def test_restart_adopts_a_launching_job_whose_recording_runs(tmp_path: Path) -> None:
    q = Queue(tmp_path, [Gpu("GPU-a")])
    job = q.add(mark_spec("a", q.cwd, 1))
    session = q.state / "jobs" / f"{job.id}-sh"
    assert q.store.mark_launching(job.id, ["GPU-a"], [0], str(session))
    hold = q.cwd / "hold"
    hold.touch()
    recorder = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpuherd",
            "record",
            str(session),
            "--",
            "sh",
            "-c",
            "while [ -e hold ]; do sleep 0.05; done; echo a >> ran.txt",
        ],
        cwd=q.cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    wait_until(lambda: (session / ".lock").exists() and (session / "command.log").exists())
    q.step()
    adopted = q.job(job.id)
    assert adopted.state is JobState.RUNNING and adopted.pid == recorder.pid
    hold.unlink()
    recorder.wait(30)
    q.step_until(lambda: q.state_of(job.id) in ENDED)
    assert q.state_of(job.id) is JobState.DONE and ran(q.cwd) == ["a"]


def test_restart_gives_a_running_job_its_reservation_back(tmp_path: Path) -> None:
    q = Queue(tmp_path, [Gpu("GPU-a")], grace_s=600.0)
    job = q.add(JobSpec(argv=("sleep", "30"), cwd=str(q.cwd), vram_bytes=30 * GiB))
    q.step()
    running = q.job(job.id)
    assert running.state is JobState.RUNNING
    # The runner died between committing the job and moving the reservation to its pid.
    for path in q.ledger.directory.glob("*.json"):
        path.unlink()
    again = QueueRunner(
        q.store, q.ledger, settle_s=0.0, grace_s=600.0, state_dir=q.state, say=q.said.append
    )
    again.step()
    (entry,) = q.entries()
    assert entry["pid"] == running.pid and entry["bytes"] == 30 * GiB
    assert entry["expires_at"] == pytest.approx((running.started_at or 0) + 600.0)
    assert q.state_of(job.id) is JobState.RUNNING
    os.killpg(running.pid or 0, 15)
    q.step_until(lambda: q.state_of(job.id) in ENDED)
    assert q.entries() == []


def test_launches_per_step_are_capped_without_leaving_a_job_launching(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner_module, "MAX_LAUNCHES_PER_STEP", 2)
    q = Queue(tmp_path, [Gpu("GPU-a")])
    ids = [q.add(mark_spec(m, q.cwd, 1)).id for m in "abc"]
    q.step()
    assert [q.state_of(i) for i in ids] == [JobState.RUNNING, JobState.RUNNING, JobState.WAITING]
    assert len(q.entries()) == 2
    q.step_until(lambda: all(q.state_of(i) is JobState.DONE for i in ids))
    assert sorted(ran(q.cwd)) == ["a", "b", "c"]


def test_the_jobs_pythonpath_reaches_the_job_but_not_its_recorder(tmp_path: Path) -> None:
    """As the attack ran it: a `json.py` on the job's PYTHONPATH killed gpuherd's recorder."""
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    for module in ("json", "os", "signal"):
        (shadow / f"{module}.py").write_text("raise SystemExit('the recorder imported this')\n")
    q = Queue(tmp_path, [Gpu("GPU-a")])
    job = q.add(
        JobSpec(
            argv=("sh", "-c", 'echo "$PYTHONPATH" > seen.txt'),
            cwd=str(q.cwd),
            env=(*os.environ.items(), ("PYTHONPATH", str(shadow))),
            vram_bytes=GiB,
        )
    )
    q.step_until(lambda: q.state_of(job.id) in ENDED)
    ended = q.job(job.id)
    assert (ended.state, ended.exit_code, ended.wait_reason) == (JobState.DONE, 0, None)
    assert (q.cwd / "seen.txt").read_text() == f"{shadow}\n"  # the job still gets its own


def test_unreaped_lists_a_running_launch_until_a_step_after_its_end(tmp_path: Path) -> None:
    # What `tests.queue_helpers.reap_open_queues` waits for after each test: a launch is
    # listed while its process runs and after it ends, until the runner's next step reaps it.
    q = Queue(tmp_path, [Gpu("GPU-a", used=0)])
    hold = q.cwd / "hold"
    hold.touch()
    job = q.add(held_job(q, GiB))
    assert q.runner.unreaped == ()
    q.step()
    [started] = q.runner.unreaped
    assert started.pid == q.job(job.id).pid and started.process.poll() is None
    hold.unlink()
    started.process.wait(30)
    assert q.runner.unreaped == (started,)  # ended, not reaped yet
    q.step()
    assert q.runner.unreaped == ()
