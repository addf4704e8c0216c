"""GPU-usage health of a task on a real GPU: a training loop starved by its input pipeline is
flagged, a GPU-bound one is not. The loop's log is followed by the real tail, utilization comes
from the real NVML collector, both folded into a TaskTracker as the dashboard does."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading

import pytest

from collectors.base import Sampled
from collectors.logs.logtail import LogTailCollector
from collectors.loop import run_collector
from collectors.machine.nvml import NvmlCollector
from collectors.samples import GpuTick, LogBatch
from gpuherd.tasks import TaskTracker

TRAIN = r"""
import sys, time, torch
log, mode, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
x = torch.randn(4096, 4096, device="cuda")
end = time.time() + seconds
step = 0
with open(log, "a", buffering=1) as out:
    while time.time() < end:
        if mode == "input_bound":
            time.sleep(2.0)  # the data loader cannot keep up: the GPU waits
            busy = 2.0
        else:
            busy = 1.0
        until = time.time() + busy
        while time.time() < until:
            for _ in range(4):
                x = torch.tanh(x @ x)
            torch.cuda.synchronize()
        step += 1
        out.write(f"step={step} loss={1.0 / step:.4f}\n")
"""


def follow_training(tmp_path, mode: str, seconds: float = 36.0):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device for torch")
    log = tmp_path / "train.log"
    log.touch()
    events: queue.Queue = queue.Queue()
    stop = threading.Event()
    tail = LogTailCollector(str(log))
    nvml = NvmlCollector(interval_s=0.5)
    threads = [
        threading.Thread(target=run_collector, args=(c, events.put, stop), daemon=True)
        for c in (tail, nvml)
    ]
    for thread in threads:
        thread.start()
    child = subprocess.Popen([sys.executable, "-c", TRAIN, str(log), mode, str(seconds)])
    tracker = TaskTracker()
    utils: list[float | None] = []
    try:
        while child.poll() is None or not events.empty():
            try:
                event = events.get(timeout=1.0)
            except queue.Empty:
                continue
            if not isinstance(event, Sampled):
                continue
            if isinstance(event.sample, LogBatch):
                tracker.add_batch(event.sample)
            elif isinstance(event.sample, GpuTick):
                device = event.sample.devices[0]
                tracker.associate(str(log), gpu_uuids=[device.uuid])
                tracker.add_gpu_tick(event.sample)
                utils.append(device.gpu_util_pct)
    finally:
        child.kill()
        child.wait()
        stop.set()
        tail.wake()
        for thread in threads:
            thread.join(timeout=10)
    assert child.returncode in (0, -9), "the training child failed"
    return tracker.view(str(log)), utils


@pytest.mark.gpu
@pytest.mark.slow
def test_input_bound_training_is_flagged(tmp_path) -> None:
    view, utils = follow_training(tmp_path, "input_bound")
    assert view is not None and view.lines_read >= 5
    kinds = {f.kind for f in view.findings}
    assert kinds & {"gpu_swing", "gpu_low"}, f"utilization readings: {utils}"


@pytest.mark.gpu
@pytest.mark.slow
def test_gpu_bound_training_is_not_flagged(tmp_path) -> None:
    view, utils = follow_training(tmp_path, "gpu_bound")
    assert view is not None and view.lines_read >= 10
    kinds = {f.kind for f in view.findings}
    assert not kinds & {"gpu_swing", "gpu_low"}, f"utilization readings: {utils}"
