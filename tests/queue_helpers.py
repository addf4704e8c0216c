"""Helpers for queue runner tests: GPU ticks, a queue with its ledger, the fake runner process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from collectors.samples import GpuProcess, GpuSample, GpuTick
from gpuherd.queue.jobs import Job, JobSpec, JobState
from gpuherd.queue.ledger import Ledger
from gpuherd.queue.runner import QueueRunner
from gpuherd.queue.store import QueueStore

GiB = 1 << 30
ROOT = Path(__file__).resolve().parents[1]
FAKE_RUNNER = ROOT / "tests" / "queue_runner_fake.py"
MARK_JOB = 'echo "$QUEUE_JOB_MARK" >> ran.txt; sleep 0.2'
"""A job that says once, in `ran.txt` of its cwd, that it ran."""


@dataclass
class Gpu:
    """One scripted GPU: memory in bytes, processes as (pid, bytes)."""

    uuid: str
    total: int = 80 * GiB
    used: int = 0
    util: float = 0.0
    processes: list[tuple[int, int]] = field(default_factory=list)

    def sample(self, index: int) -> GpuSample:
        return GpuSample(
            index=index,
            uuid=self.uuid,
            name="NVIDIA H100",
            memory_used_bytes=self.used,
            memory_total_bytes=self.total,
            gpu_util_pct=self.util,
            processes=tuple(GpuProcess(p, b) for p, b in self.processes),
        )

    def script(self) -> dict[str, object]:
        return {
            "uuid": self.uuid,
            "total": self.total,
            "used": self.used,
            "util": self.util,
            "processes": [list(p) for p in self.processes],
        }


def tick(gpus: Sequence[Gpu], taken_at: float | None = None) -> GpuTick:
    return GpuTick(
        time.time() if taken_at is None else taken_at,
        tuple(g.sample(i) for i, g in enumerate(gpus)),
    )


def write_script(path: Path, gpus: Iterable[Gpu]) -> None:
    """Rewrite the fake runner's GPU script atomically."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"gpus": [g.script() for g in gpus]}))
    os.replace(tmp, path)


def mark_spec(mark: str, cwd: Path, vram_gib: float, **more: object) -> JobSpec:
    return JobSpec(
        argv=("sh", "-c", MARK_JOB),
        cwd=str(cwd),
        env=(("QUEUE_JOB_MARK", mark),),
        vram_bytes=int(vram_gib * GiB),
        **more,
    )  # type: ignore[arg-type]


def ran(cwd: Path) -> list[str]:
    """The marks the jobs wrote to `ran.txt`, one per run."""
    try:
        return (cwd / "ran.txt").read_text().split()
    except FileNotFoundError:
        return []


def ledger_dir(tmp_path: Path) -> Path:
    path = tmp_path / "ledger"
    path.mkdir()
    path.chmod(0o1777)
    return path


OPEN: list[Queue] = []
"""The queues the running test made: `reap_open_queues` ends their jobs' processes after it."""


def reap_open_queues(grace_s: float = 5.0) -> None:
    """End the processes the test's runners started and forget the queues.

    A job the store calls done may still be closing its session, and a test may leave a job
    running. Left to the garbage collector, the `Popen` of a process still running warns in
    whatever test runs then (and the process outlives its test). Each gets `grace_s` to end,
    then its process group (the job's session) is killed.
    """
    while OPEN:
        queue = OPEN.pop()
        for started in queue.runner.unreaped:
            try:
                started.process.wait(grace_s)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(started.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                started.process.wait()


class Queue:
    """A real store, a real ledger and an in-process runner over them, ticked by hand."""

    def __init__(self, tmp_path: Path, gpus: Sequence[Gpu], **runner_options: object) -> None:
        self.state = tmp_path / "state"
        self.cwd = tmp_path / "work"
        self.cwd.mkdir(exist_ok=True)
        self.ledger = Ledger(ledger_dir(tmp_path))
        self.store = QueueStore.open(self.state)
        self.gpus = list(gpus)
        self.said: list[str] = []
        self.now: float | None = None
        """The runner's clock while a test steps with its own tick times, else real time."""
        options = {
            "settle_s": 0.0,
            "clock": lambda: time.time() if self.now is None else self.now,
            **runner_options,
        }
        self.runner = QueueRunner(
            self.store, self.ledger, state_dir=self.state, say=self.said.append, **options
        )  # type: ignore[arg-type]
        OPEN.append(self)

    def add(self, spec: JobSpec) -> Job:
        return self.store.add(spec)

    def step(self, taken_at: float | None = None) -> None:
        self.now = taken_at
        self.runner.on_gpu_tick(tick(self.gpus, taken_at))
        self.runner.step()

    def job(self, job_id: int) -> Job:
        return self.store.get(job_id)

    def state_of(self, job_id: int) -> JobState:
        return self.store.get(job_id).state

    def entries(self) -> list[dict[str, object]]:
        """Every ledger file's content."""
        return [json.loads(p.read_text()) for p in sorted(self.ledger.directory.glob("*.json"))]

    def step_until(self, predicate, timeout_s: float = 30.0, pause_s: float = 0.05) -> None:  # noqa: ANN001
        deadline = time.monotonic() + timeout_s
        while True:
            self.step()
            if predicate():
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; jobs: {self.store.jobs()}")
            time.sleep(pause_s)


def _everyone_can_run(path: str) -> bool:
    real = Path(os.path.realpath(path))
    dirs_ok = all(os.stat(d).st_mode & 0o001 for d in real.parents)
    return dirs_ok and bool(os.stat(real).st_mode & 0o001)


def python_for_everyone() -> tuple[str, dict[str, str]] | None:
    """A Python another uid can start, with the environment that gives it our packages.

    A virtual environment made from a Python under /root (mode 0700) starts for root only.
    Then the system's Python of the same version is used with our site-packages on PYTHONPATH
    (the runner starts its jobs with its own `sys.executable`, so they use it too).
    """
    if _everyone_can_run(sys.executable):
        return sys.executable, {}
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(folder, version)
        if os.path.isfile(candidate) and _everyone_can_run(candidate):
            paths = [p for p in sys.path if p.endswith("site-packages")]
            return candidate, {"PYTHONPATH": os.pathsep.join([str(ROOT), *paths])}
    return None


def fake_runner(
    script: Path, state: Path, ledger: Path, *flags: str, user: tuple[int, int] | None = None
) -> subprocess.Popen[str]:
    """`gpuherd queue run` with FakeNvml scripted from `script`, in a process of its own."""
    env = {
        **os.environ,
        "GPUHERD_STATE_DIR": str(state),
        "GPUHERD_LEDGER_DIR": str(ledger),
        "PYTHONUNBUFFERED": "1",
    }
    python = sys.executable
    if user is not None:
        found = python_for_everyone()
        assert found is not None, "no Python that another uid can start"
        python, more = found
        env.update(more)
    argv = [python, str(FAKE_RUNNER), str(script), *flags]
    if user is not None:
        argv = ["setpriv", f"--reuid={user[0]}", f"--regid={user[1]}", "--clear-groups", *argv]
        env["HOME"] = str(state.parent)
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT
    )
