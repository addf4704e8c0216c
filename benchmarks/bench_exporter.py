"""CPU of one scrape of gpuherd's exporter: an 8-GPU host with 50 GPU processes and 10 tasks.

Goal: <= 10 ms of CPU per scrape. Measured three ways, in one run:

- `gpuherd`: `generate_latest` over the exporter's registry (snapshot under the lock, task views,
  health judged again because every task got a new line since the previous scrape, the families,
  the text); thread CPU time per scrape;
- `gpuherd over HTTP`: a real `GET /metrics` on loopback against the exporter's own server, CPU
  of the whole process per scrape (server thread, and the urllib client, which runs in the same
  process: an upper bound);
- `bare prometheus-client`: the same series (same names, labels and values) as plain `Gauge`s in
  a registry, rendered by `generate_latest`: the floor the library itself sets;
- `node_exporter` (Debian's `prometheus-node-exporter`, when installed): CPU of its process per
  `GET /metrics` of its default collectors, for scale (dcgm-exporter has no Debian package).

Run from the repository root:

    python benchmarks/bench_exporter.py [--scrapes 300]

Prints one JSON line, then a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from collectors.base import Sampled  # noqa: E402
from collectors.samples import (  # noqa: E402
    GpuProcess,
    GpuSample,
    GpuTick,
    HostSample,
    LogBatch,
    ProcessInfo,
)
from gpuherd.export.address import parse_listen  # noqa: E402
from gpuherd.export.exporter import Exporter  # noqa: E402
from parsers.model import LogMetric  # noqa: E402

GiB = 1 << 30
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def host_state(exporter: Exporter, history: int = 300) -> None:
    """8 GPUs, 50 processes of 12 users in 4 containers, 10 tasks with `history` steps each."""
    devices = tuple(
        GpuSample(
            i,
            f"GPU-{i:08d}-0000-0000-0000-000000000000",
            "NVIDIA H100 80GB HBM3",
            memory_used_bytes=(20 + i) * GiB,
            memory_total_bytes=80 * GiB,
            memory_reserved_bytes=GiB // 2,
            gpu_util_pct=10.0 * i,
            temperature_c=40.0 + i,
            power_w=100.0 + 10 * i,
            processes=tuple(
                GpuProcess(10_000 + i * 7 + p, (p + 1) * GiB // 4) for p in range(7 if i < 2 else 6)
            ),
        )
        for i in range(8)
    )
    exporter.emit(Sampled("nvml", GpuTick(1000.0, devices)))
    pids = [p.pid for d in devices for p in d.processes or ()]
    assert len(pids) == 50
    exporter.emit(
        Sampled(
            "host",
            HostSample(
                1000.0,
                processes=tuple(
                    ProcessInfo(
                        pid,
                        user=f"user{n % 12}",
                        command=f"python train_{n}.py",
                        container=f"c0ffee{n % 4:06d}",
                    )
                    for n, pid in enumerate(pids)
                ),
            ),
        )
    )
    for task in range(10):
        feed(exporter, task, range(1, history + 1), 1000.0)


def feed(exporter: Exporter, task: int, steps: range, at: float) -> None:
    path = f"/runs/exp{task}/version_0/metrics.csv"
    metrics = tuple(
        (
            n,
            LogMetric(
                values=(
                    ("train/loss", 3.0 / n),
                    ("val/acc", min(0.9, n / 400)),
                    ("throughput/it_s", 12.5),
                ),
                step=n,
                epoch=n // 100,
            ),
        )
        for n in steps
    )
    exporter.emit(
        Sampled(
            f"log:{path}",
            LogBatch(path, at, "lightning_csv", metrics, lines_read=len(metrics), generation=1),
        )
    )


def bare_registry(text: str) -> CollectorRegistry:
    """The same samples as plain prometheus-client gauges."""
    registry = CollectorRegistry(auto_describe=False)
    for family in text_string_to_metric_families(text):
        labels = sorted({k for s in family.samples for k in s.labels})
        gauge = Gauge(family.name, family.documentation or family.name, labels, registry=registry)
        for sample in family.samples:
            child = gauge.labels(**sample.labels) if labels else gauge
            child.set(sample.value)
    return registry


def cpu_per_call(call, scrapes: int) -> float:  # type: ignore[no-untyped-def]
    call()  # warm up
    started = time.thread_time()
    for _ in range(scrapes):
        call()
    return (time.thread_time() - started) / scrapes


def gpuherd_scrape_ms(exporter: Exporter, scrapes: int) -> tuple[float, int]:
    registry = exporter.registry
    step = [1000]

    def scrape() -> bytes:
        step[0] += 1  # a new line in every task since the last scrape: health is judged again
        for task in range(10):
            feed(exporter, task, range(step[0], step[0] + 1), 1000.0 + step[0])
        return generate_latest(registry)

    series = sum(len(f.samples) for f in text_string_to_metric_families(scrape().decode()))
    feed_only = cpu_per_call(
        lambda: [feed(exporter, t, range(1, 2), 2000.0) for t in range(10)], scrapes
    )
    return (cpu_per_call(scrape, scrapes) - feed_only) * 1000, series


def http_scrape_ms(url: str, pid: int, scrapes: int) -> float:
    process = psutil.Process(pid)
    DIRECT.open(url).read()
    before = process.cpu_times()
    for _ in range(scrapes):
        with DIRECT.open(url) as answer:
            answer.read()
    after = process.cpu_times()
    return ((after.user - before.user) + (after.system - before.system)) / scrapes * 1000


def node_exporter_ms(scrapes: int) -> tuple[float, int] | None:
    binary = shutil.which("prometheus-node-exporter") or shutil.which("node_exporter")
    if binary is None:
        return None
    port = free_port()
    process = subprocess.Popen(
        [binary, f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                body = DIRECT.open(url).read().decode()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        series = sum(len(f.samples) for f in text_string_to_metric_families(body))
        return http_scrape_ms(url, process.pid, scrapes), series
    finally:
        process.terminate()
        process.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scrapes", type=int, default=300)
    args = parser.parse_args()

    exporter = Exporter(parse_listen(str(free_port())), "bench-host", report=print)
    host_state(exporter)
    own_ms, series = gpuherd_scrape_ms(exporter, args.scrapes)
    exporter.start()
    over_http_ms = http_scrape_ms(exporter.url, os.getpid(), args.scrapes)
    text = generate_latest(exporter.registry).decode()
    exporter.close()
    bare = bare_registry(text)
    bare_ms = cpu_per_call(lambda: generate_latest(bare), args.scrapes) * 1000
    node = node_exporter_ms(args.scrapes)
    result = {
        "machine": f"{platform.node()} {platform.machine()} {psutil.cpu_count()} CPUs, "
        f"Python {platform.python_version()}",
        "series": series,
        "gpuherd_scrape_cpu_ms": round(own_ms, 3),
        "gpuherd_http_scrape_cpu_ms": round(over_http_ms, 3),
        "bare_prometheus_client_cpu_ms": round(bare_ms, 3),
        "node_exporter_cpu_ms": None if node is None else round(node[0], 3),
        "node_exporter_series": None if node is None else node[1],
    }
    print(json.dumps(result))
    print(f"{'exporter':34} {'series':>7} {'CPU ms / scrape':>16}")
    print(f"{'gpuherd (generate_latest)':34} {series:>7} {own_ms:>16.2f}")
    print(f"{'gpuherd (GET /metrics, + client)':34} {series:>7} {over_http_ms:>16.2f}")
    print(f"{'bare prometheus-client, same':34} {series:>7} {bare_ms:>16.2f}")
    if node is not None:
        print(f"{'node_exporter (GET /metrics)':34} {node[1]:>7} {node[0]:>16.2f}")


if __name__ == "__main__":
    main()
