"""Starting a queued job as a recorded session that outlives the runner, and only once.

The job runs as `gpuherd record <session_dir> -- CMD ARGS` in a session of its own. That
recorder process is the job's supervisor: its pid and start time identify the job. It is
started behind a gate: it waits until the runner closes a pipe (or dies, which closes it too),
then reads the queue database and records the command only if the job is `running` with its
own pid there. So a runner killed between starting the process and committing it as running
never leaves a command running that the queue does not know about: the process gives up, and
the restarted runner finds the job still `launching` without a pid and marks it failed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuherd.common.safe_files import Directory
from gpuherd.present.format import visible
from gpuherd.queue.jobs import Job, JobState
from gpuherd.queue.liveness import process_start_time
from gpuherd.queue.store import QueueError, QueueStore

RUNNER_OUT = "runner.out"
"""The recorder's own stdout and stderr in the session directory (the command's are in
`command.log`)."""
JOB_ENV = "GPUHERD_QUEUE_JOB"
"""Set in every job's environment to its job id."""
NOT_COMMITTED = 3
"""Exit status of a gated launch that gave up because its runner never committed it."""

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
_ISOLATED = "-E"
"""The recorder ignores PYTHON* variables (the job's PYTHONPATH, PYTHONHOME, PYTHONSTARTUP):
they stay in its environment and reach the job, never the recorder."""


def _pinned(code: str, path: Sequence[str]) -> str:
    """`code` run with exactly `path` as its import path (this gpuherd first)."""
    # The job's cwd must not decide which gpuherd (or which `json.py`) the recorder imports:
    # the path is the runner's own, never the job's PYTHONPATH or the script directory.
    entries = [_PACKAGE_ROOT, *(p for p in path if p and p != _PACKAGE_ROOT)]
    return f"import sys\nsys.path[:] = {entries!r}\n{code}"


_BOOT = "from gpuherd.queue.launch import gate_main\nsys.exit(gate_main(sys.argv[1:]))\n"
_RECORD = "from gpuherd.cli import main\nsys.exit(main(sys.argv[1:]))\n"
"""The recorder the gate turns into (`os.execv` keeps the pid and its start time)."""


@dataclass
class Started:
    """A launched job's process, still held at its gate until `open_gate`."""

    pid: int
    start_time: float
    process: subprocess.Popen[bytes]
    gate_fd: int | None

    def open_gate(self) -> None:
        """Let the process read the database (call after committing it as running)."""
        if self.gate_fd is not None:
            os.close(self.gate_fd)
            self.gate_fd = None


def slug(job: Job) -> str:
    """A short file-name-safe label of the job: its name or its program's name."""
    text = job.spec.name or (Path(job.spec.argv[0]).name if job.spec.argv else "job")
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:40] or "job"


def session_dir_for(state_dir: Path, job: Job, attempt: int) -> Path:
    """`<state>/jobs/<id>-<slug>/`; a retry gets `<id>-<slug>.<attempt>/`."""
    name = f"{job.id}-{slug(job)}" + (f".{attempt}" if attempt > 1 else "")
    return state_dir / "jobs" / name


def job_environment(
    job: Job, gpu_uuids: Sequence[str], base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The runner's environment, the job's `--env`, and the GPUs by UUID in bus order."""
    env = dict(os.environ if base is None else base)
    env.update(dict(job.spec.env))
    env["CUDA_VISIBLE_DEVICES"] = ",".join(gpu_uuids)
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    env[JOB_ENV] = str(job.id)
    return env


def check_startable(job: Job, env: Mapping[str, str]) -> None:
    """Raise QueueError when the command cannot start: a vanished cwd, a missing program."""
    cwd = job.spec.cwd
    if not os.path.isdir(cwd):
        raise QueueError(f"cwd vanished: {cwd} is not a directory any more")
    if not job.spec.argv:
        raise QueueError("empty command")
    program = job.spec.argv[0]
    if "/" in program:
        path = os.path.join(cwd, program)
        if not os.path.isfile(path):
            raise QueueError(f"command not found: {program} (in {cwd})")
        if not os.access(path, os.X_OK):
            raise QueueError(f"command not executable: {program}")
    elif shutil.which(program, path=env.get("PATH", os.defpath)) is None:
        raise QueueError(f"command not found: {program}")


def _left_by_a_cut_off_launch(session_dir: Path) -> bool:
    """Whether `session_dir` holds nothing but the runner's output of a cut-off launch.

    A runner stopped before the launch gate: the job went back in line, and this launch reuses
    the folder.
    """
    try:
        return {p.name for p in session_dir.iterdir()} <= {RUNNER_OUT}
    except OSError:
        return False


def start(job: Job, session_dir: Path, gpu_uuids: Sequence[str], state_dir: Path | None) -> Started:
    """Start the job's recorder detached; gated on the queue in `state_dir` when given.

    Raises:
        QueueError: the command cannot start (command not found, cwd vanished), or the
            session directory cannot be made.
    """
    env = job_environment(job, gpu_uuids)
    check_startable(job, env)
    try:
        session_dir.mkdir(parents=True, mode=0o700, exist_ok=_left_by_a_cut_off_launch(session_dir))
        with Directory(session_dir) as directory:  # never through a link planted there
            out = directory.append(RUNNER_OUT, 0o600)
    except OSError as error:
        raise QueueError(
            f"cannot make the session directory {session_dir}: {error.strerror}"
        ) from None
    gate_read, gate_write = os.pipe() if state_dir is not None else (None, None)
    gate = (
        []
        if gate_read is None
        else ["--gate", str(gate_read), "--state", str(state_dir), "--job", str(job.id)]
    )
    argv = [
        sys.executable,
        _ISOLATED,
        "-c",
        _pinned(_BOOT, sys.path),
        *gate,
        "--",
        "record",
        str(session_dir),
        "--",
        *job.spec.argv,
    ]
    try:
        process = subprocess.Popen(
            argv,
            cwd=job.spec.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
            pass_fds=() if gate_read is None else (gate_read,),
        )
    except OSError as error:
        for fd in (gate_read, gate_write):
            if fd is not None:
                os.close(fd)
        raise QueueError(f"cannot start the job: {error.strerror}") from None
    finally:
        os.close(out)
    if gate_read is not None:
        os.close(gate_read)
    started = process_start_time(process.pid)
    return Started(process.pid, started if started is not None else 0.0, process, gate_write)


def _committed(state_dir: Path, job_id: int) -> str | None:
    """Why this process must not record the job, or None when it is committed to it."""
    try:
        store = QueueStore.open(state_dir)
    except QueueError as error:
        return error.msg
    try:
        job = store.get(job_id)
    except QueueError as error:
        return error.msg
    finally:
        store.close()
    if job.state is not JobState.RUNNING or job.pid != os.getpid():
        return f"job {job_id} is {job.state.value} with pid {job.pid}, not this process"
    if job.cancel_requested:
        return f"job {job_id} was cancelled while it was being launched"
    return None


def gate_main(argv: Sequence[str]) -> int:
    """Entry of a launched job's process: wait at the gate, then run `gpuherd record ...`."""
    cut = list(argv).index("--")
    own, rest = list(argv[:cut]), list(argv[cut + 1 :])
    options = dict(zip(own[::2], own[1::2], strict=True))
    if "--gate" in options:
        fd = int(options["--gate"])
        while os.read(fd, 4096):
            pass  # nothing is ever written: end of file is the signal
        os.close(fd)
        why = _committed(Path(options["--state"]), int(options["--job"]))
        if why is not None:
            print(
                f"gpuherd: the command was not started: {visible(why)}", file=sys.stderr, flush=True
            )
            return NOT_COMMITTED
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, _ISOLATED, "-c", _pinned(_RECORD, sys.path), *rest])
