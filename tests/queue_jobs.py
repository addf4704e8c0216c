"""Helpers for queue tests: start a job's real recorded session the way the runner does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psutil

from gpuherd.queue.jobs import JobSpec
from gpuherd.queue.store import QueueStore
from tests.recorded import wait_until

REPO = Path(__file__).resolve().parents[1]


def start_recording(session: Path, *command: str) -> subprocess.Popen[bytes]:
    """`python -m gpuherd record SESSION -- COMMAND` in a session of its own, as a job runs."""
    with open(session.parent / f"{session.name}.runner.out", "wb") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gpuherd",
                "record",
                str(session),
                "--interval",
                "0.2",
                "--",
                *command,
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=REPO,
        )


def command_pid(session: Path) -> int | None:
    """The recorded command's pid from the `start` event, once it is there."""
    try:
        lines = (session / "events.jsonl").read_text().splitlines()
    except FileNotFoundError:
        return None
    for line in lines:
        event = json.loads(line)
        if event["kind"] == "start":
            return int(event["pid"])
    return None


def run_job(
    store: QueueStore, session: Path, *command: str, spec: JobSpec | None = None
) -> tuple[int, subprocess.Popen[bytes]]:
    """Add a job, launch it as a real recording and mark it running; `(job id, recorder)`.

    Returns once the recorded command has started (its `start` event is written).
    """
    job = store.add(spec or JobSpec(argv=tuple(command), cwd=str(session.parent)))
    assert store.mark_launching(job.id, ["GPU-test"], [0], str(session))
    recorder = start_recording(session, *command)
    started = psutil.Process(recorder.pid).create_time()
    assert store.mark_running(job.id, recorder.pid, started, started)
    wait_until(lambda: command_pid(session) is not None or recorder.poll() is not None, 60)
    return job.id, recorder
