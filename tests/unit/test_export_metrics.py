"""What one scrape shows: exact values, bounded labels, and parts that fail on their own."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from collectors.base import (
    CollectorError,
    CollectorUnavailable,
    Failed,
    Recovered,
    Sampled,
    Unavailable,
)
from collectors.logs.discovery import DiscoveredLogs
from collectors.machine.containers import NoEngine
from collectors.samples import GpuProcess, GpuSample, GpuTick, HostSample, LogBatch, ProcessInfo
from gpuherd import __version__
from gpuherd.export.families import (
    FINDING_KINDS,
    MAX_PROCESSES,
    MAX_TASKS,
    STATUSES,
    max_series,
)
from gpuherd.export.queue_metrics import QueueState
from gpuherd.export.scrape import ScrapeCollector
from gpuherd.export.state import ExportState
from gpuherd.tasks.hints import TaskHint
from parsers.model import LogFinding, LogMetric
from tests.fakes import GiB

UUID0, UUID1 = "GPU-aaaa", "GPU-bbbb"


def scrape(state: ExportState, queue=None, report=None) -> dict[str, list[tuple[dict, float]]]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ScrapeCollector(state, queue, report))
    text = generate_latest(registry).decode()
    out: dict[str, list[tuple[dict, float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def one(found: dict, name: str, **labels: str) -> float:
    matches = [v for ls, v in found.get(name, []) if all(ls.get(k) == x for k, x in labels.items())]
    assert len(matches) == 1, (name, labels, found.get(name))
    return matches[0]


def tick(*devices: GpuSample, at: float = 100.0) -> Sampled:
    return Sampled("nvml", GpuTick(at, devices))


def gpu0(**over) -> GpuSample:
    values = dict(
        index=0,
        uuid=UUID0,
        name="NVIDIA H100 80GB HBM3",
        memory_used_bytes=40 * GiB,
        memory_total_bytes=80 * GiB,
        memory_reserved_bytes=GiB // 2,
        gpu_util_pct=75.0,
        temperature_c=66.0,
        power_w=310.5,
        processes=(GpuProcess(31337, 30 * GiB), GpuProcess(4711, 2 * GiB)),
    )
    values.update(over)
    return GpuSample(**values)


def batch(path: str, *metrics: LogMetric, findings=(), at: float = 100.0) -> Sampled:
    return Sampled(
        f"log:{path}",
        LogBatch(
            path,
            at,
            "keyvalue",
            tuple((i + 1, m) for i, m in enumerate(metrics)),
            tuple(findings),
            lines_read=len(metrics),
            generation=1,
            size_bytes=10,
            offset_bytes=10,
        ),
    )


def test_gpu_gauges_carry_the_tick_values_with_host_gpu_and_uuid_labels() -> None:
    state = ExportState("box-1")
    state.emit(
        tick(
            gpu0(),
            GpuSample(
                1,
                UUID1,
                "NVIDIA A100",
                memory_used_bytes=0,
                memory_total_bytes=40 * GiB,
                error="GPU is lost",
            ),
        )
    )
    found = scrape(state)
    assert one(found, "gpuherd_gpu_memory_used_bytes", gpu="0") == 40 * GiB
    assert (
        one(found, "gpuherd_gpu_memory_total_bytes", gpu="0", uuid=UUID0, host="box-1") == 80 * GiB
    )
    assert one(found, "gpuherd_gpu_memory_reserved_bytes", gpu="0") == GiB // 2
    assert one(found, "gpuherd_gpu_utilization_ratio", gpu="0") == 0.75
    assert one(found, "gpuherd_gpu_temperature_celsius", gpu="0") == 66.0
    assert one(found, "gpuherd_gpu_power_watts", gpu="0") == 310.5
    assert one(found, "gpuherd_gpu_info", gpu="1", model="NVIDIA A100") == 1.0
    assert (one(found, "gpuherd_gpu_ok", gpu="0"), one(found, "gpuherd_gpu_ok", gpu="1")) == (
        1.0,
        0.0,
    )
    # GPU 1 reports no temperature: the series is absent, never 0.
    assert [ls["gpu"] for ls, _ in found["gpuherd_gpu_temperature_celsius"]] == ["0"]
    assert "gpuherd_gpu_memory_peak_bytes" not in found  # no fast sampler outside a recording


def test_process_memory_is_labelled_with_user_and_container_never_the_command() -> None:
    state = ExportState("box-1")
    state.emit(tick(gpu0()))
    state.emit(
        Sampled(
            "host",
            HostSample(
                100.0,
                processes=(
                    ProcessInfo(
                        31337,
                        user="carol",
                        command="python train.py --token=s3cret /data/x",
                        container="4f3c2a1b9e8d",
                    ),
                    ProcessInfo(4711, user="dave", command="torchrun /home/dave/job.py"),
                ),
            ),
        )
    )
    found = scrape(state)
    assert (
        one(
            found,
            "gpuherd_process_gpu_memory_bytes",
            pid="31337",
            user="carol",
            container="4f3c2a1b9e8d",
            gpu="0",
        )
        == 30 * GiB
    )
    assert (
        one(found, "gpuherd_process_gpu_memory_bytes", pid="4711", user="dave", container="")
        == 2 * GiB
    )
    everything = repr(found)
    for secret in ("s3cret", "train.py", "/data/x", "torchrun", "/home/dave"):
        assert secret not in everything
    assert one(found, "gpuherd_processes_unexported") == 0


def test_task_metrics_and_one_findings_series_per_kind() -> None:
    state = ExportState(
        "box-1", [TaskHint("/runs/cifar/command.log", label="command", gpu_uuids=(UUID0,))]
    )
    state.emit(tick(gpu0()))
    state.emit(
        batch(
            "/runs/cifar/command.log",
            LogMetric(
                values=(
                    ("train/loss", 0.75),
                    ("val/acc", 0.81),
                    ("throughput/it_s", 11.5),
                    ("eta_s", 90.0),
                ),
                step=300,
            ),
        )
    )
    state.emit(
        batch(
            "/runs/detr/train.log",
            LogMetric(values=(("loss", math.nan),), step=900),
            findings=[
                (1, LogFinding("nan", "loss = nan")),
                (2, LogFinding("nan", "loss = nan")),
                (3, LogFinding("brand_new_rule", "?")),
            ],
        )
    )
    found = scrape(state)
    assert one(found, "gpuherd_task_loss", task="command") == 0.75
    assert math.isnan(one(found, "gpuherd_task_loss", task="detr/train.log"))
    assert one(found, "gpuherd_task_validation", task="command", metric="val/acc") == 0.81
    assert one(found, "gpuherd_task_throughput", task="command", unit="it_s") == 11.5
    assert one(found, "gpuherd_task_eta_seconds", task="command") == 90.0
    assert one(found, "gpuherd_task_step", task="command") == 300
    assert one(found, "gpuherd_task_gpu", task="command", gpu="0", uuid=UUID0) == 1.0
    detr = {
        ls["kind"]: v for ls, v in found["gpuherd_task_findings"] if ls["task"] == "detr/train.log"
    }
    assert set(detr) == set(FINDING_KINDS) and len(FINDING_KINDS) == 15
    assert detr["nan"] == 2.0 and detr["other"] == 1.0  # times shown; an unknown kind: other
    assert sum(detr.values()) == 3.0
    status = {ls["status"]: v for ls, v in found["gpuherd_task_status"] if ls["task"] == "command"}
    assert status == {s: float(s == "running") for s in STATUSES}


def test_peaks_are_the_highest_row_peak_of_the_last_15_seconds() -> None:
    state = ExportState("box-1")
    state.emit(tick(gpu0()))
    state.add_peaks(GpuTick(100.0, ()), {UUID0: 50 * GiB})
    state.add_peaks(GpuTick(110.0, ()), {UUID0: 45 * GiB})
    assert one(scrape(state), "gpuherd_gpu_memory_peak_bytes", gpu="0") == 50 * GiB
    state.add_peaks(GpuTick(115.5, ()), {UUID0: 41 * GiB})  # the 100.0 row is 15.5 s old now
    assert one(scrape(state), "gpuherd_gpu_memory_peak_bytes", gpu="0") == 45 * GiB


def test_a_vanished_run_loses_its_task_series() -> None:
    state = ExportState("box-1")
    state.emit(batch("/w/a/train.log", LogMetric(values=(("loss", 1.0),), step=1)))
    state.emit(batch("/w/b/train.log", LogMetric(values=(("loss", 2.0),), step=1)))
    state.emit(Sampled("discovery", DiscoveredLogs(101.0, (), removed=("/w/a/train.log",))))
    assert [ls["task"] for ls, _ in scrape(state)["gpuherd_task_loss"]] == ["b/train.log"]


def test_failing_sources_are_counted_and_a_failing_log_marks_its_task() -> None:
    state = ExportState("box-1")
    state.emit(batch("/w/a/train.log", LogMetric(values=(("loss", 1.0),), step=1)))
    state.emit(Failed("log:/w/a/train.log", CollectorError("permission denied")))
    found = scrape(state)
    assert one(found, "gpuherd_sources_failing") == 1
    assert one(found, "gpuherd_task_status", task="a/train.log", status="error") == 1.0
    state.emit(Recovered("log:/w/a/train.log"))
    assert one(scrape(state), "gpuherd_sources_failing") == 0


def test_a_source_that_never_started_is_failing_and_no_container_engine_is_not() -> None:
    state = ExportState("box-1")
    state.emit(Unavailable("docker", NoEngine("no container engine at /var/run/docker.sock")))
    state.emit(Unavailable("docker", CollectorUnavailable("permission denied on the socket")))
    assert one(scrape(state), "gpuherd_sources_failing") == 0
    state.emit(Unavailable("nvml", CollectorUnavailable("NVIDIA driver not found: ...")))
    assert one(scrape(state), "gpuherd_sources_failing") == 1


def test_a_flood_of_processes_and_tasks_stays_within_the_series_bound() -> None:
    """1000 processes on 8 GPUs and 1000 tasks (200 sharing one short label)."""
    state = ExportState("box-1")
    devices = tuple(
        GpuSample(
            i,
            f"GPU-{i}",
            "H100",
            memory_used_bytes=GiB,
            memory_total_bytes=80 * GiB,
            gpu_util_pct=50.0,
            temperature_c=50.0,
            power_w=100.0,
            memory_reserved_bytes=1,
            processes=tuple(GpuProcess(10_000 + i * 125 + p, p * 1000) for p in range(125)),
        )
        for i in range(8)
    )
    state.emit(tick(*devices))
    state.emit(
        Sampled(
            "host",
            HostSample(
                100.0,
                processes=tuple(
                    ProcessInfo(10_000 + n, user=f"user{n}", command=f"python job{n}.py")
                    for n in range(1000)
                ),
            ),
        )
    )
    for n in range(1000):
        folder = "same" if n < 200 else f"run{n}"
        state.emit(
            batch(
                f"/w/{n}/{folder}/train.log",
                LogMetric(
                    values=(("loss", 1.0), ("val/acc", 0.5), ("throughput/it_s", 3.0)), step=n
                ),
                at=100.0 + n,
            )
        )
    found = scrape(state)
    processes = found["gpuherd_process_gpu_memory_bytes"]
    assert len(processes) == MAX_PROCESSES == 64
    assert min(v for _, v in processes) == 117_000  # the largest 8 x 8 are kept
    assert one(found, "gpuherd_processes_unexported") == 1000 - 64
    tasks = {ls["task"] for ls, _ in found["gpuherd_task_loss"]}
    assert len(tasks) == MAX_TASKS == 32
    assert one(found, "gpuherd_tasks_unexported") == 1000 - 32
    series = sum(len(v) for v in found.values())
    assert (
        series <= max_series(8) == (8 * 9 + 64 + 1 + 32 * (5 + 9 + 15 + 8) + 1 + 7 + 3 * 64)
    )  # the Slurm jobs of a node
    # 8 GPUs x 8 series, 64 processes + 1, 32 tasks x (loss, val, throughput, step, 9 statuses,
    # 15 kinds) + 1, the exporter's info and failing sources.
    assert series == 8 * 8 + 64 + 1 + 32 * (4 + 9 + 15) + 1 + 2


def test_tasks_sharing_a_short_label_get_distinct_series() -> None:
    state = ExportState("box-1")
    for n in range(3):
        state.emit(
            batch(
                f"/w/{n}/version_0/metrics.csv",
                LogMetric(values=(("loss", float(n)),), step=1),
                at=100.0 + n,
            )
        )
    state.emit(
        batch("/w/x/version_0/metrics.csv#2", LogMetric(values=(("loss", 9.0),), step=1), at=99.0)
    )
    labels = sorted(ls["task"] for ls, _ in scrape(state)["gpuherd_task_loss"])
    assert labels == [
        "version_0/metrics.csv",
        "version_0/metrics.csv#2",
        "version_0/metrics.csv#2#2",
        "version_0/metrics.csv#3",
    ]


@settings(max_examples=50, deadline=None)
@given(user=st.text(max_size=300), container=st.text(max_size=300))
def test_any_user_or_container_text_makes_a_valid_scrape(user: str, container: str) -> None:
    state = ExportState("box-1")
    state.emit(tick(gpu0()))
    state.emit(
        Sampled(
            "host",
            HostSample(100.0, processes=(ProcessInfo(31337, user=user, container=container),)),
        )
    )
    labels = [
        ls for ls, _ in scrape(state)["gpuherd_process_gpu_memory_bytes"] if ls["pid"] == "31337"
    ]
    assert labels[0]["user"] == user[:64] and labels[0]["container"] == container[:64]


def test_a_part_that_raises_is_left_out_and_counted_and_the_next_scrape_is_whole() -> None:
    state = ExportState("box-1")
    state.emit(tick(gpu0()))
    said: list[str] = []
    calls = {"n": 0}

    def queue() -> QueueState:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("queue database is locked")
        return QueueState({"waiting": 3, "running": 1}, {UUID0: 20 * GiB, "GPU-gone": GiB})

    registry = CollectorRegistry(auto_describe=False)
    registry.register(ScrapeCollector(state, queue, said.append))
    first = parse(generate_latest(registry).decode())
    assert one(first, "gpuherd_gpu_memory_used_bytes", gpu="0") == 40 * GiB
    assert "gpuherd_queue_jobs" not in first
    assert one(first, "gpuherd_exporter_scrape_errors_total", part="queue") == 1
    assert said == [
        "metrics: the queue part of a scrape failed: RuntimeError: queue database is locked"
    ]
    scrape_twice = parse(generate_latest(registry).decode())
    assert one(scrape_twice, "gpuherd_queue_jobs", state="waiting") == 3
    assert one(scrape_twice, "gpuherd_queue_reserved_bytes", gpu="0", uuid=UUID0) == 20 * GiB
    assert one(scrape_twice, "gpuherd_queue_reserved_bytes", gpu="", uuid="GPU-gone") == GiB
    assert one(scrape_twice, "gpuherd_exporter_scrape_errors_total", part="queue") == 1


def parse(text: str) -> dict[str, list[tuple[dict, float]]]:
    out: dict[str, list[tuple[dict, float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def test_a_state_that_raises_still_gives_the_exporter_series(monkeypatch) -> None:
    state = ExportState("box-1")

    def broken():
        raise KeyError("bug")

    monkeypatch.setattr(state, "snapshot", broken)
    found = scrape(state, report=lambda line: None)
    assert one(found, "gpuherd_exporter_info", version=__version__) == 1.0
    assert one(found, "gpuherd_exporter_scrape_errors_total", part="snapshot") == 1
