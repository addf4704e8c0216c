from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collectors.machine.host import HostCollector, PidWatch, in_host_pid_namespace
from collectors.machine.nvml import NvmlCollector, NvmlMemoryProbe

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
GiB = 1 << 30

HOLD_2_GIB = """
import sys, torch
x = torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
x.fill_(1)
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def collector():
    c = NvmlCollector()
    c.open()
    yield c
    c.close()


def test_collector_reads_sane_values(collector):
    tick = collector.sample()
    assert tick.driver_version and tick.nvml_version
    assert tick.cuda_driver_version and tick.cuda_driver_version[0].isdigit()
    assert tick.devices
    for gpu in tick.devices:
        assert gpu.error is None, gpu
        assert "NVIDIA" in gpu.name
        assert gpu.uuid.startswith("GPU-")
        assert gpu.memory_total_bytes and gpu.memory_total_bytes > 0
        assert gpu.memory_used_bytes is not None
        assert 0 <= gpu.memory_used_bytes <= gpu.memory_total_bytes
        assert gpu.gpu_util_pct is None or 0 <= gpu.gpu_util_pct <= 100
        assert gpu.temperature_c is None or 5 <= gpu.temperature_c <= 110
        assert gpu.power_w is None or 0 < gpu.power_w < 2000
        assert gpu.power_limit_w is None or gpu.power_limit_w >= 50
        assert gpu.processes is not None
    assert len({g.uuid for g in tick.devices}) == len(tick.devices)


def test_second_tick_reads_the_same_gpus(collector):
    first, second = collector.sample(), collector.sample()
    assert [g.uuid for g in first.devices] == [g.uuid for g in second.devices]
    assert second.taken_at >= first.taken_at


def test_memory_probe_agrees_with_collector(collector):
    probe = NvmlMemoryProbe()
    probe.open()
    try:
        reading = probe.sample()
        tick = collector.sample()
    finally:
        probe.close()
    assert len(reading) == len(tick.devices)
    for used, gpu in zip(reading, tick.devices, strict=True):
        assert used is not None
        assert abs(used - gpu.memory_used_bytes) < 256 * (1 << 20)


def _used_by_uuid(collector) -> dict[str, int]:
    return {g.uuid: g.memory_used_bytes for g in collector.sample().devices}


def test_torch_allocation_in_child_shows_up(collector):
    pytest.importorskip("torch")
    before = _used_by_uuid(collector)
    child = subprocess.Popen(
        [sys.executable, "-c", HOLD_2_GIB], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        tick = collector.sample()
        grown = [g for g in tick.devices if g.memory_used_bytes - before[g.uuid] >= 2 * GiB]
        assert grown, "no GPU's used memory grew by 2 GiB"
        if not in_host_pid_namespace(Path("/proc")):
            pytest.skip("own PID namespace: the driver's pids are not this container's")
        owners = [(g, p) for g in tick.devices for p in g.processes or () if p.pid == child.pid]
        assert owners, f"pid {child.pid} not in any GPU's process list"
        gpu, proc = owners[0]
        assert proc.used_memory_bytes is None or proc.used_memory_bytes >= 2 * GiB
        assert gpu in grown
        host = HostCollector(PidWatch([child.pid]))
        host.open()
        (info,) = host.sample().processes
        assert info.pid == child.pid and "python" in (info.command or "")
    finally:
        child.communicate("\n", timeout=60)
    deadline = time.time() + 10
    while time.time() < deadline:
        listed = {p.pid for g in collector.sample().devices for p in g.processes or ()}
        if child.pid not in listed:
            break
        time.sleep(0.2)
    assert child.pid not in listed


def test_snapshot_json_on_a_real_gpu():
    out = subprocess.run(
        [sys.executable, "-m", "gpuherd", "snapshot", "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["gpu_error"] is None and data["driver_version"]
    assert data["gpus"]
    for gpu in data["gpus"]:
        assert gpu["error"] is None
        assert gpu["uuid"].startswith("GPU-") and "NVIDIA" in gpu["name"]
        assert gpu["memory_total_bytes"] > 0
        assert isinstance(gpu["processes"], list)


def test_snapshot_table_on_a_real_gpu():
    out = subprocess.run(
        [sys.executable, "-m", "gpuherd", "snapshot"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "NVIDIA" in out.stdout and "GiB" in out.stdout
    print(out.stdout)
