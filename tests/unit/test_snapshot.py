from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from collectors.machine.nvml import ProcessEntry
from collectors.samples import ContainerSample, ContainerTick
from gpuherd.common.options import SnapshotOptions
from gpuherd.snapshot.snapshot import render_table, run, take_snapshot, to_json
from gpuherd.snapshot.snapshot_containers import ContainerLook
from tests.fakes import FakeGpu, FakeNvml, GiB, GpuIsLost, MiB, NoPermission, NotSupported

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "snapshot-json.md"


@pytest.fixture(autouse=True)
def _no_container_engine(monkeypatch, tmp_path):
    # The machine's engine (and other people's containers on it) stays out of these tests;
    # tests/docker/test_snapshot_containers.py reads a real one.
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")


@pytest.fixture
def sleeper():
    proc = subprocess.Popen(["sleep", "30"])
    yield proc
    proc.kill()
    proc.wait()


def busy_fake(pid: int) -> FakeNvml:
    return FakeNvml(
        [
            FakeGpu(
                name="NVIDIA H100 80GB HBM3",
                uuid="GPU-a",
                total=80 * GiB,
                used=12 * GiB,
                util=(97, 41),
                compute=[ProcessEntry(pid, 10 * GiB)],
            ),
            FakeGpu(name="NVIDIA H100 80GB HBM3", uuid="GPU-b", total=80 * GiB, used=615 * MiB),
        ]
    )


def documented_keys(section: str) -> set[str]:
    text = DOC.read_text()
    body = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    keys: set[str] = set()
    for line in body.splitlines():
        if line.startswith("| `"):
            keys.update(re.findall(r"`([a-z0-9_]+)`", line.split("|")[1]))
    return keys


# The real path on this machine: no NVIDIA driver.


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpuherd", "snapshot", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )


def test_cli_json_without_driver_prints_host_and_exits_3():
    out = run_cli("--json")
    data = json.loads(out.stdout)
    if data["gpu_error"] is None:
        pytest.skip("an NVIDIA driver is present; tests/gpu covers this machine")
    assert out.returncode == 3  # no source: 2 is kept for usage errors
    assert out.stderr.startswith("gpuherd: NVIDIA driver not found: ")
    assert "gpuherd --demo" in out.stderr
    assert data["gpus"] == [] and data["driver_version"] is None
    assert data["host"]["mem_total_bytes"] > 0
    assert data["host"]["cpu_pct"] is not None  # measured over the window


def test_cli_table_without_driver():
    out = run_cli()
    if out.returncode != 3:
        pytest.skip("an NVIDIA driver is present; tests/gpu covers this machine")
    assert "NVIDIA driver not found" in out.stderr
    assert "GPUs: N/A" in out.stdout
    assert re.search(r"RAM [\d.]+ / [\d.]+ GiB", out.stdout)
    assert "Traceback" not in out.stderr


def test_snapshot_does_not_import_textual():
    code = (
        "import sys, io, contextlib; from gpuherd.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()): main(['snapshot', '--json'])\n"
        "print('textual' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert out.stdout.strip() == "False"


# In-process, with FakeNvml and real host processes.


def test_json_keys_match_the_documentation(sleeper):
    data = to_json(take_snapshot(busy_fake(sleeper.pid), window_s=0.05))
    assert set(data) == documented_keys("Top level")
    assert set(data["gpus"][0]) == documented_keys("`gpus[]`")
    assert set(data["gpus"][0]["processes"][0]) == documented_keys("`gpus[].processes[]`")
    assert set(data["host"]) == documented_keys("`host`")
    assert data["containers"] == [] and data["container_engine"] is None
    assert data["containers_error"].startswith("no container engine: no socket at DOCKER_HOST=")
    json.dumps(data, allow_nan=False)


def test_container_json_keys_match_the_documentation(sleeper):
    snap = take_snapshot(busy_fake(sleeper.pid), window_s=0.0)
    listed = ContainerTick(
        snap.host.taken_at,
        (
            ContainerSample(
                id="ab" * 32,
                short_id="ab" * 6,
                name="trainer",
                image="pytorch:24.01",
                status="running",
                gpu_devices=("0",),
            ),
        ),
        engine="Docker 28.2.2",
    )
    data = to_json(dataclasses.replace(snap, containers=ContainerLook(tick=listed)))
    (container,) = data["containers"]
    assert set(container) == documented_keys("`containers[]`")
    assert container["gpu_memory_bytes"] == 0 and container["gpu_pids"] == []
    assert container["gpu_devices"] == ["0"] and data["container_engine"] == "Docker 28.2.2"
    assert data["containers_error"] is None
    text = render_table(dataclasses.replace(snap, containers=ContainerLook(tick=listed)), width=200)
    assert re.search(
        r"\ntrainer\s+pytorch:24\.01\s+running\s+N/A\s+N/A / N/A\s+N/A\s+0\s+0 B$", text
    )


def test_json_values_join_gpu_and_host(sleeper):
    snap = take_snapshot(busy_fake(sleeper.pid), window_s=0.1, hostname="gpu-box-3")
    assert snap.exit_code == 0
    data = to_json(snap)
    assert data["hostname"] == "gpu-box-3"
    assert data["driver_version"] == "580.159.04" and data["cuda_driver_version"] == "13.0"
    gpu0, gpu1 = data["gpus"]
    assert gpu0["memory_used_pct"] == 15.0
    assert gpu0["memory_unattributed_bytes"] == 2 * GiB
    (proc,) = gpu0["processes"]
    assert proc["pid"] == sleeper.pid and proc["used_memory_bytes"] == 10 * GiB
    assert proc["command"] == "sleep 30" and proc["user"]
    assert proc["cpu_pct"] is not None and proc["rss_bytes"] > 0
    assert gpu1["processes"] == [] and gpu1["memory_unattributed_bytes"] == 615 * MiB


def test_table_shows_gpus_processes_and_the_invisible_gap(sleeper):
    text = render_table(take_snapshot(busy_fake(sleeper.pid), window_s=0.0), width=200)
    assert re.search(r"0\s+NVIDIA H100 80GB HBM3\s+12\.0 / 80\.0 GiB\s+15%\s+97%\s+41%", text)
    assert re.search(rf"0\s+{sleeper.pid}\s+\S+\s+10\.0 GiB.*sleep 30", text)
    assert "GPU 0: 2.0 GiB in use by processes not visible here" in text
    assert "GPU 1: 615 MiB in use by processes not visible here" in text


def test_not_supported_fields_show_na_and_null():
    fake = FakeNvml([FakeGpu(uuid="GPU-a")])
    fake.fail(0, "temperature", NotSupported)
    fake.fail(0, "power", NotSupported)
    snap = take_snapshot(fake, window_s=0.0)
    gpu = to_json(snap)["gpus"][0]
    assert gpu["temperature_c"] is None and gpu["power_w"] is None
    assert "N/A / 700 W" in render_table(snap)


def test_lost_gpu_is_reported_and_exit_code_is_1(sleeper):
    fake = busy_fake(sleeper.pid)
    fake.fail(1, "memory_info_v2", GpuIsLost)
    snap = take_snapshot(fake, window_s=0.0)
    assert snap.exit_code == 1
    assert to_json(snap)["gpus"][1]["error"] == "GPU is lost"
    assert re.search(r"1\s+NVIDIA H100 80GB HBM3\s+N/A\s+error: GPU is lost", render_table(snap))


def test_all_gpus_failing_gives_gpu_error_and_exit_1():
    fake = FakeNvml([FakeGpu(uuid="GPU-a")])
    fake.fail(0, "memory_info_v2", GpuIsLost)
    snap = take_snapshot(fake, window_s=0.0)
    data = to_json(snap)
    assert snap.exit_code == 1 and data["gpus"] == []
    assert "GPU is lost" in data["gpu_error"]


def test_unlisted_processes_are_null_not_empty():
    fake = FakeNvml([FakeGpu(uuid="GPU-a", used=30 * GiB)])
    fake.fail(0, "compute_processes", NoPermission)
    snap = take_snapshot(fake, window_s=0.0)
    assert to_json(snap)["gpus"][0]["processes"] is None
    assert "GPU 0: the driver would not list processes; 30.0 GiB in use" in render_table(snap)


def test_own_pid_namespace_is_said_plainly(sleeper, tmp_path):
    (tmp_path / "self").mkdir()
    (tmp_path / "self" / "status").write_text("NSpid:\t981234\t17\n")
    snap = take_snapshot(busy_fake(sleeper.pid), window_s=0.0, proc_root=str(tmp_path))
    data = to_json(snap)
    assert data["processes_visible"] is False
    assert data["gpus"][0]["processes"][0]["user"] is None
    assert "own PID namespace" in render_table(snap)


def test_long_commands_are_clipped_to_the_width(sleeper):
    text = render_table(take_snapshot(busy_fake(sleeper.pid), window_s=0.0), width=60)
    process_rows = [line for line in text.splitlines() if str(sleeper.pid) in line]
    assert process_rows and all(len(line) <= 60 for line in process_rows)


def test_run_prints_json_and_returns_the_exit_code(sleeper, capsys):
    fake = busy_fake(sleeper.pid)
    fake.fail(1, "utilization", GpuIsLost)
    code = run(SnapshotOptions(json=True), backend=fake)
    captured = capsys.readouterr()
    assert code == 1
    assert json.loads(captured.out)["gpus"][1]["error"] == "GPU is lost"
    assert captured.err == ""


def test_run_without_driver_writes_stderr(capsys):
    fake = FakeNvml()
    fake.gpus.clear()
    code = run(SnapshotOptions(json=False), backend=fake)
    captured = capsys.readouterr()
    assert code == 3
    assert captured.err.startswith("gpuherd: no NVIDIA GPU found")
    assert "CPU" in captured.out and "GPUs: N/A" in captured.out


def test_output_that_is_no_terminal_is_never_cut(capsys, monkeypatch):
    # `gpuherd snapshot > file`: an 80-column terminal size must not cut what goes to the file.
    monkeypatch.setenv("COLUMNS", "80")
    argument = "a-long-argument-" * 12
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", argument])
    try:
        assert run(SnapshotOptions(json=False), backend=busy_fake(proc.pid)) == 0
    finally:
        proc.kill()
        proc.wait()
    out = capsys.readouterr().out
    [row] = [line for line in out.splitlines() if str(proc.pid) in line]
    assert row.endswith(argument) and len(row) > 200 and "…" not in out
