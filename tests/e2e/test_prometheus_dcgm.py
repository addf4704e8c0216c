"""A dcgm-exporter-style host beside a gpuherd host, via a real Prometheus and the docs' rules."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuherd.fleet.model import MIB
from gpuherd.fleet.promql import PrometheusClient
from gpuherd.fleet.source import FleetSource
from tests.prometheus import (
    fleet_doc_block,
    free_port,
    get,
    prometheus_binary,
    running_prometheus,
    wait_for,
)

REPO = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.prometheus, pytest.mark.slow]

# What NVIDIA's dcgm-exporter serves (framebuffer in MiB, utilization in percent, these labels),
# for two GPUs of host dgx-1, from prometheus-client in a process of its own.
DCGM = textwrap.dedent("""
    import sys, time
    from prometheus_client import Gauge, start_http_server
    labels = ["gpu", "UUID", "device", "modelName", "Hostname"]
    used = Gauge("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", labels)
    free = Gauge("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", labels)
    util = Gauge("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", labels)
    for gpu, (u, f, pct) in enumerate([(70000, 11920, 97), (1024, 80896, 3)]):
        ids = [str(gpu), f"GPU-dcgm-{gpu}", f"nvidia{gpu}", "NVIDIA A100-SXM4-80GB", "dgx-1"]
        used.labels(*ids).set(u)
        free.labels(*ids).set(f)
        util.labels(*ids).set(pct)
    start_http_server(int(sys.argv[1]), addr="127.0.0.1")
    while True:
        time.sleep(3600)
""")


@pytest.fixture
def two_exporters() -> Iterator[list[int]]:
    prometheus_binary()
    ports = [free_port(), free_port()]
    processes = [
        subprocess.Popen([sys.executable, "-c", DCGM, str(ports[0])], cwd=REPO),
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gpuherd",
                "serve-metrics",
                str(ports[1]),
                "--replay",
                str(REPO / "tests/data/sessions/tasks"),
                "--speed",
                "1000",
            ],
            cwd=REPO,
            stderr=subprocess.DEVNULL,
        ),
    ]
    try:
        for port in ports:
            wait_for(
                lambda port=port: get(f"http://127.0.0.1:{port}/metrics")[0] == 200,
                what="an exporter",
            )
        yield ports
    finally:
        for process in processes:
            process.terminate()
            process.wait(10)


def test_dcgm_hosts_join_the_fleet_and_the_docs_rules_record_both(
    tmp_path: Path, two_exporters
) -> None:
    targets = [f"127.0.0.1:{port}" for port in two_exporters]
    with running_prometheus(tmp_path / "prom", targets, rules=fleet_doc_block("yaml", 1)) as prom:
        wait_for(
            lambda: prom.value("count(fleet:gpu_memory_free_bytes)") == 3.0,
            what="the rules over both exporters",
        )
        source = FleetSource(PrometheusClient(prom.url), stale_after_s=30)
        rows = source.check().rows
        assert [(r.host, r.gpu, r.source) for r in rows] == [
            ("dgx-1", "1", "dcgm"),
            ("tasks-box", "0", "gpuherd"),
            ("dgx-1", "0", "dcgm"),
        ]
        busy = rows[-1]
        assert busy.used_bytes == 70000 * MIB and busy.total_bytes == 81920 * MIB
        assert busy.free_bytes == 11920 * MIB and busy.util_ratio == pytest.approx(0.97)
        assert busy.model == "NVIDIA A100-SXM4-80GB" and not busy.stale

        assert prom.value('fleet:gpu_memory_free_bytes{host="dgx-1",gpu="0"}') == 11920 * MIB
        assert (
            prom.value('fleet:gpu_memory_free_bytes{host="tasks-box",gpu="0"}')
            == 85520809984 - 19285016252
        )  # the tasks session's last row
        assert prom.value('fleet:gpu_utilization_ratio{host="dgx-1",gpu="1"}') == pytest.approx(
            0.03
        )
        assert (
            prom.value('fleet:user_gpu_memory_bytes{host="tasks-box",user="carol"}') == 18641190588
        )
        assert prom.value('fleet:tasks_unhealthy{host="tasks-box"}') == 1.0  # detr's NaN
