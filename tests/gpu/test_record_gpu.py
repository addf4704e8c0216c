"""`gpuherd --record` on a real GPU: short allocation spikes of a real torch job are caught."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from collectors.machine.host import in_host_pid_namespace
from gpuherd.record.peaks import BASELINE, PER_PROCESS

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
GiB = 1 << 30
SPIKE_GIB = 4
SPIKES = 4

WORKLOAD = f"""
import json, sys, time
import torch
base = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
base.fill_(1)
torch.cuda.synchronize()
time.sleep(2.5)
windows = []
for k in range({SPIKES}):
    t0 = time.time()
    x = torch.empty({SPIKE_GIB} << 30, dtype=torch.uint8, device="cuda")
    x.fill_(1)
    torch.cuda.synchronize()
    time.sleep(0.06)
    del x
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    windows.append((t0, time.time()))
    print(f"epoch 0 step {{(k + 1) * 10}} loss={{2.0 / (k + 1):.3f}}", flush=True)
    time.sleep(0.8)
json.dump(windows, open(sys.argv[1], "w"))
"""


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[list[float]]]:
    pytest.importorskip("torch")
    work = tmp_path_factory.mktemp("record-gpu")
    session, windows = work / "session", work / "windows.json"
    env = {
        **os.environ,
        "GPUHERD_PEAK_TRACE": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": "0",
    }
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuherd",
            "--record",
            str(session),
            "--",
            sys.executable,
            "-c",
            WORKLOAD,
            str(windows),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    return session, json.loads(windows.read_text())


def trace(session: Path) -> list[tuple[float, int]]:
    with open(session / "peak_trace.csv", newline="") as f:
        return [(float(r["t"]), int(r["used_bytes"])) for r in csv.DictReader(f) if r["gpu"] == "0"]


def test_every_spike_is_seen_by_the_fast_sampler(recorded) -> None:
    session, windows = recorded
    readings = trace(session)
    before = [u for t, u in readings if windows[0][0] - 1.5 <= t < windows[0][0]]
    assert before, "no reading before the first spike"
    plateau = min(before) + SPIKE_GIB * GiB
    for start, end in windows:
        inside = [u for t, u in readings if start <= t <= end]
        assert inside, f"no reading in the spike window {end - start:.3f} s"
        assert max(inside) >= 0.99 * plateau


def test_gpu_rows_carry_the_spike_as_mem_peak(recorded) -> None:
    session, _ = recorded
    with open(session / "gpu.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["gpu"] == "0"]
    peaks = [int(r["mem_peak_bytes"]) for r in rows if r["mem_peak_bytes"]]
    used = [int(r["mem_used_bytes"]) for r in rows if r["mem_used_bytes"]]
    assert max(peaks) >= min(used) + 0.99 * SPIKE_GIB * GiB


def test_the_commands_own_peak_is_attributed(recorded) -> None:
    session, _ = recorded
    meta = json.loads((session / "meta.json").read_text())
    [peak] = [p for p in meta["run_peaks"] if p["gpu"] == 0]
    expected = PER_PROCESS if in_host_pid_namespace(Path("/proc")) else BASELINE
    assert peak["method"] in (PER_PROCESS, BASELINE)
    if expected == PER_PROCESS:
        assert peak["method"] == PER_PROCESS
    # base 1 GiB + spike 4 GiB, plus the CUDA context in the per-process figure
    assert (SPIKE_GIB + 1) * GiB * 0.99 <= peak["peak_bytes"] <= (SPIKE_GIB + 3) * GiB


def test_summary_and_note_from_the_real_session(recorded, tmp_path: Path) -> None:
    session, _ = recorded
    summary = json.loads((session / "summary.json").read_text())
    assert summary["gpus"][0]["peak_mem_bytes"] >= SPIKE_GIB * GiB
    assert summary["tasks"][0]["metrics"]["train/loss"]["last"] == 0.5
    example = tmp_path / "example.yaml"
    shutil.copy(ROOT / "tests" / "data" / "examples" / "llama_lora.yaml", example)
    out = subprocess.run(
        [sys.executable, "-m", "gpuherd", "note", str(session), "--example", str(example)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    text = example.read_text()
    assert 'last_verification_note: "Verified training run on NVIDIA' in text
    assert "GB VRAM (" in text
