"""Three real PyTorch jobs that each take 60 % of the card, through `gpuherd queue run`.

They must run one at a time; each must start within settle + 2 s of the previous one's memory
being freed (and not before the settle period has passed); each one's recorded peak
(`meta.json` `run_peaks`) must match the `torch.cuda.max_memory_reserved()` it prints plus its
CUDA context (measured by the job itself through NVML) within `PEAK_TOLERANCE_BYTES`. A 20 Hz
NVML memory reading of the card by the test gives the times memory was freed; the whole
timeline is written as JSON to `$GPUHERD_QUEUE_TIMELINE` when set. Needs a host with one GPU
(`nvidia-h100-x1`): with more, the queue would rightly run the jobs side by side.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from collectors.machine.nvml import NvmlCollector, NvmlMemoryProbe
from gpuherd.queue.jobs import JobSpec, JobState
from gpuherd.queue.store import QueueStore

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
MiB, GiB = 1 << 20, 1 << 30
FRACTION = 0.6
JOBS = 3
SETTLE_S = 3.0
INTERVAL_S = 0.5
HOLD_S = 5.0
PEAK_TOLERANCE_BYTES = 512 * MiB
"""About 1 % of a 48 GiB job: NVML rounds, lazily loaded kernels add a few MiB to a context."""
POLL_S = 0.05

JOB = """
import json, os, sys, time
import pynvml
pynvml.nvmlInit()
handle = pynvml.nvmlDeviceGetHandleByUUID(os.environ["CUDA_VISIBLE_DEVICES"].encode())
before = pynvml.nvmlDeviceGetMemoryInfo(handle).used
import torch
torch.ones(1, device="cuda").fill_(1)  # the context, the caching allocator, a fill kernel
torch.cuda.synchronize()
context = pynvml.nvmlDeviceGetMemoryInfo(handle).used - before
size = int(torch.cuda.get_device_properties(0).total_memory * FRACTION)
block = torch.empty(size, dtype=torch.uint8, device="cuda")
block.fill_(1)
torch.cuda.synchronize()
allocated_at = time.time()
time.sleep(HOLD_S)
print(json.dumps({"max_reserved": torch.cuda.max_memory_reserved(), "context": context,
                  "allocated_at": allocated_at, "size": size}), flush=True)
"""


class MemoryTrace:
    """The card's used memory every `POLL_S`, read through gpuherd's NVML probe."""

    def __init__(self) -> None:
        self.probe = NvmlMemoryProbe()
        self.probe.open()
        self.points: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            used = self.probe.sample()[0]
            if used is not None:
                self.points.append((time.time(), used))

    def __enter__(self) -> MemoryTrace:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.probe.close()

    def freed_after(self, t: float, below: int) -> float | None:
        """The first reading after `t` below `below` bytes used."""
        return next((at for at, used in self.points if at > t and used < below), None)


def _printed(job_session: Path) -> dict[str, float]:
    lines = [
        ln for ln in (job_session / "command.log").read_text().splitlines() if ln.startswith("{")
    ]
    assert len(lines) == 1, lines  # the job ran exactly once
    return json.loads(lines[0])


def _run_peak(job_session: Path) -> dict[str, object]:
    (peak,) = json.loads((job_session / "meta.json").read_text())["run_peaks"]
    return peak


def test_three_jobs_of_60_percent_run_one_at_a_time(tmp_path: Path) -> None:
    # Only imported: a CUDA call here would give this process a context on the card.
    pytest.importorskip("torch")
    collector = NvmlCollector()
    collector.open()
    try:
        devices = collector.sample().devices
    finally:
        collector.close()
    if len(devices) != 1:
        pytest.skip(
            f"{len(devices)} GPUs: the queue would run the jobs side by side; use a one-GPU host"
        )
    total = devices[0].memory_total_bytes
    assert total is not None and devices[0].error is None
    need = int(total * FRACTION)
    script = tmp_path / "job.py"
    script.write_text(JOB.replace("FRACTION", repr(FRACTION)).replace("HOLD_S", repr(HOLD_S)))
    state, ledger, work = tmp_path / "state", tmp_path / "ledger", tmp_path / "work"
    ledger.mkdir()
    ledger.chmod(0o1777)
    work.mkdir()
    store = QueueStore.open(state)
    ids = [
        store.add(
            JobSpec(
                argv=(sys.executable, str(script)),
                cwd=str(work),
                name=f"torch60-{i}",
                vram_bytes=need,
            )
        ).id
        for i in range(JOBS)
    ]
    env = {
        **os.environ,
        "GPUHERD_STATE_DIR": str(state),
        "GPUHERD_LEDGER_DIR": str(ledger),
        "PYTHONUNBUFFERED": "1",
    }
    runner_log = tmp_path / "runner.log"
    with MemoryTrace() as trace, runner_log.open("w") as log:
        time.sleep(1.0)
        baseline = max(used for _, used in trace.points)
        runner = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gpuherd",
                "queue",
                "run",
                "--settle",
                str(SETTLE_S),
                "--interval",
                str(INTERVAL_S),
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 240  # under pytest-timeout's 300 s
            while store.jobs([JobState.WAITING, JobState.LAUNCHING, JobState.RUNNING]):
                assert runner.poll() is None, runner_log.read_text()
                assert time.monotonic() < deadline, runner_log.read_text()
                time.sleep(0.5)
        finally:
            runner.send_signal(signal.SIGTERM)
            runner.wait(30)
        time.sleep(1.0)
    jobs = [store.get(i) for i in ids]
    rows = []
    for job in jobs:
        session = Path(job.session_dir or "")
        printed, peak = _printed(session), _run_peak(session)
        command_end = json.loads((session / "command.exit.json").read_text())["ended_at"]
        rows.append(
            {
                "id": job.id,
                "state": job.state.value,
                "started_at": job.started_at,
                "command_ended_at": command_end,
                "gpu": job.gpu_uuids,
                **printed,
                "run_peak_bytes": peak["peak_bytes"],
                "peak_method": peak["method"],
                "expected_peak_bytes": printed["max_reserved"] + printed["context"],
            }
        )
    for prev, row in zip(rows, rows[1:], strict=False):
        freed = trace.freed_after(prev["allocated_at"], baseline + need // 2)
        row["previous_freed_at"] = freed
        row["start_after_free_s"] = None if freed is None else row["started_at"] - freed
    timeline = {
        "gpu_total_bytes": total,
        "baseline_used_bytes": baseline,
        "need_bytes": need,
        "settle_s": SETTLE_S,
        "interval_s": INTERVAL_S,
        "hold_s": HOLD_S,
        "peak_tolerance_bytes": PEAK_TOLERANCE_BYTES,
        "jobs": rows,
        "memory": [[round(t, 3), used] for t, used in trace.points],
        "runner_log": runner_log.read_text(),
    }
    out = os.environ.get("GPUHERD_QUEUE_TIMELINE")
    if out:
        Path(out).write_text(json.dumps(timeline, indent=1))
    for row in rows:
        print({k: v for k, v in row.items() if k != "gpu"})

    assert [r["state"] for r in rows] == ["done"] * JOBS, runner_log.read_text()
    # One at a time: never two jobs' memory on the card, and each starts after the last ended.
    assert max(used for _, used in trace.points) < baseline + 1.5 * need
    for prev, row in zip(rows, rows[1:], strict=False):
        assert row["started_at"] > prev["command_ended_at"]
        assert row["start_after_free_s"] is not None
        assert SETTLE_S - 0.25 <= row["start_after_free_s"] <= SETTLE_S + 2.0, row
    for row in rows:
        assert abs(row["run_peak_bytes"] - row["expected_peak_bytes"]) <= PEAK_TOLERANCE_BYTES, row
    assert list(ledger.glob("*.json")) == []
