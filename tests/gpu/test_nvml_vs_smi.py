"""`PynvmlBackend` (the real NVML adapter) against `nvidia-smi` at the same moment.

Each comparison brackets one `nvidia-smi --query-gpu` call between two NVML readings and allows
for what can change in between. Tolerances:

- memory used: within 2 MiB of the NVML range around the call (nvidia-smi prints whole MiB); a
  job allocating meanwhile makes the NVML readings differ, and such a round is retried;
- memory total: within 1 MiB; index and UUID: equal;
- temperature: within 2 C of the NVML range; power: within 25 W or 15 % of the NVML range;
- utilization: both figures are averages over the driver's last sample period and move with any
  job on the GPU, so a known load is made: a child process spins `torch.cuda._sleep` kernels on
  GPU 0, which keeps a kernel running all the time (GPU utilization near 100 %) while touching
  no memory (memory utilization only what other jobs add). NVML must read GPU utilization >= 90
  there, and each utilization figure must agree with nvidia-smi's within 10 points in at least
  one of several rounds. Reading the two figures the wrong way round fails both checks unless
  another job keeps the memory busy 90 % of the time.

Process memory: for every pid both list, the same within 2 MiB, and `[N/A]` in nvidia-smi is
`None` from NVML, never 0. Needs torch with CUDA for the load (see README, "Install and test").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from collectors.machine.host import in_host_pid_namespace
from collectors.machine.nvml import NvmlCollector, PynvmlBackend
from collectors.samples import GpuTick

pytestmark = pytest.mark.gpu

MIB = 1 << 20
FIELDS = (
    "index,uuid,memory.used,memory.total,utilization.gpu,utilization.memory,"
    "temperature.gpu,power.draw"
)
ROUNDS = 8

SPIN = """
import sys, torch
torch.cuda.init()
torch.cuda._sleep(1_000_000)  # compile and load the kernel before saying ready
torch.cuda.synchronize()
print("ready", flush=True)
while True:  # a few ~50 ms kernels always queued; no memory traffic
    for _ in range(4):
        torch.cuda._sleep(100_000_000)
    torch.cuda.synchronize()
"""


@dataclass(frozen=True)
class SmiGpu:
    index: int
    uuid: str
    used_mib: float | None
    total_mib: float | None
    util_gpu: float | None
    util_mem: float | None
    temp_c: float | None
    power_w: float | None


def number(text: str) -> float | None:
    text = text.strip()
    return None if text.startswith("[") or text in ("", "N/A") else float(text)


def parse_query_gpu(text: str) -> list[SmiGpu]:
    out = []
    for line in text.strip().splitlines():
        cells = [c.strip() for c in line.split(",")]
        assert len(cells) == 8, line
        out.append(SmiGpu(int(cells[0]), cells[1], *(number(c) for c in cells[2:])))
    return out


def smi_gpus() -> list[SmiGpu]:
    out = subprocess.run(
        ["nvidia-smi", f"--query-gpu={FIELDS}", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return parse_query_gpu(out.stdout)


def smi_processes() -> dict[int, float | None]:
    out = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    found: dict[int, float | None] = {}
    for line in out.stdout.strip().splitlines():
        if "," in line:
            pid, used = line.split(",", 1)
            found[int(pid)] = number(used)
    return found


@pytest.fixture(scope="module")
def collector(gpu_skip_reason: str | None):
    if gpu_skip_reason is not None:
        pytest.skip(gpu_skip_reason)
    if shutil.which("nvidia-smi") is None:
        pytest.skip("nvidia-smi is not installed")
    c = NvmlCollector(PynvmlBackend())
    c.open()
    yield c
    c.close()


def bracketed(collector: NvmlCollector) -> tuple[GpuTick, list[SmiGpu], GpuTick]:
    before = collector.sample()
    smi = smi_gpus()
    after = collector.sample()
    return before, smi, after


def within(value: float, ends: tuple[float | None, float | None], tolerance: float) -> bool:
    known = [e for e in ends if e is not None]
    return bool(known) and min(known) - tolerance <= value <= max(known) + tolerance


def test_identity_and_memory_match_nvidia_smi(collector: NvmlCollector) -> None:
    matched = False
    for _ in range(ROUNDS):
        before, smi, after = bracketed(collector)
        assert [(g.index, g.uuid) for g in smi] == [(d.index, d.uuid) for d in after.devices]
        for s, a in zip(smi, after.devices, strict=True):
            assert s.total_mib is not None and a.memory_total_bytes is not None
            assert abs(s.total_mib - a.memory_total_bytes / MIB) <= 1, (s, a)
        if any(
            b.memory_used_bytes != a.memory_used_bytes
            for b, a in zip(before.devices, after.devices, strict=True)
        ):
            time.sleep(0.2)  # memory moved during the call: try again
            continue
        for s, a in zip(smi, after.devices, strict=True):
            assert s.used_mib is not None and a.memory_used_bytes is not None
            assert abs(s.used_mib - a.memory_used_bytes / MIB) <= 2, (s, a)
        matched = True
        break
    assert matched, f"GPU memory changed during every one of {ROUNDS} nvidia-smi calls"


def test_temperature_and_power_match_nvidia_smi(collector: NvmlCollector) -> None:
    before, smi, after = bracketed(collector)
    for s, b, a in zip(smi, before.devices, after.devices, strict=True):
        if s.temp_c is not None:
            assert within(s.temp_c, (b.temperature_c, a.temperature_c), 2), (s, b, a)
        if s.power_w is not None:
            top = max(p for p in (b.power_w, a.power_w, s.power_w) if p is not None)
            assert within(s.power_w, (b.power_w, a.power_w), max(25.0, 0.15 * top)), (s, b, a)


def test_utilization_under_a_known_load_matches_nvidia_smi(collector: NvmlCollector) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.fail("NVML sees a GPU but torch has no CUDA: install a CUDA build of torch")
    uuid = collector.sample().devices[0].uuid
    child = subprocess.Popen(
        [sys.executable, "-c", SPIN],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": uuid},
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        time.sleep(2.0)  # a full driver sample period of the load
        rounds = []
        for _ in range(ROUNDS):
            before, smi, after = bracketed(collector)
            rounds.append((before.devices[0], smi[0], after.devices[0]))
            time.sleep(0.25)
    finally:
        child.kill()
        child.wait()
    direct = [(b.gpu_util_pct, a.gpu_util_pct) for b, _, a in rounds]
    assert all(u is not None and u >= 90 for pair in direct for u in pair), (
        f"GPU utilization under a spinning kernel: {direct}"
    )
    assert all(s.util_gpu is not None and s.util_gpu >= 90 for _, s, _ in rounds), rounds
    agree = [
        (b, s, a)
        for b, s, a in rounds
        if s.util_gpu is not None
        and s.util_mem is not None
        and within(s.util_gpu, (b.gpu_util_pct, a.gpu_util_pct), 10)
        and within(s.util_mem, (b.mem_util_pct, a.mem_util_pct), 10)
    ]
    assert agree, f"no round where both utilizations agree with nvidia-smi: {rounds}"


def test_process_memory_matches_nvidia_smi(collector: NvmlCollector) -> None:
    if not in_host_pid_namespace(Path("/proc")):
        pytest.skip("own PID namespace: nvidia-smi and NVML list the host's pids")
    for _ in range(ROUNDS):
        before = collector.sample()
        smi = smi_processes()
        after = collector.sample()
        ours_before = {
            p.pid: p.used_memory_bytes for d in before.devices for p in d.processes or ()
        }
        ours = {p.pid: p.used_memory_bytes for d in after.devices for p in d.processes or ()}
        if ours != ours_before:
            time.sleep(0.2)
            continue
        for pid, used_mib in smi.items():
            if pid not in ours:
                continue  # a graphics-only or just-ended process
            if used_mib is None:
                assert ours[pid] is None, f"pid {pid}: nvidia-smi [N/A], NVML {ours[pid]}"
            else:
                assert ours[pid] is not None and abs(ours[pid] / MIB - used_mib) <= 2, (
                    pid,
                    ours[pid],
                    used_mib,
                )
        return
    pytest.fail(f"the process list changed during every one of {ROUNDS} nvidia-smi calls")
