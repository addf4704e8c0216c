"""The pure container arithmetic, on stats and inspect JSON recorded from a real Docker 20.10."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collectors.machine.container_stats import (
    StatsReading,
    container_rates,
    container_sample,
    cpu_pct,
    gpu_devices,
    memory_used,
    parse_engine_time,
    parse_stats,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "docker"
MiB = 1 << 20


def load(name: str):
    return json.loads((DATA / name).read_text())


def test_a_frame_gives_memory_without_cache_the_limit_pids_and_no_network() -> None:
    frame = load("stream_busy_memory64m.json")[1]
    reading = parse_stats(frame)
    assert reading is not None
    assert reading.read_s == pytest.approx(1795709556.828808585, abs=1e-6)
    assert reading.cpu_total_ns == 1209523018
    assert reading.system_cpu_ns == 23693340000000
    assert reading.online_cpus == 2
    assert reading.memory_used_bytes == 598016  # usage; total_inactive_file is 0 here
    assert reading.memory_limit_bytes == 64 * MiB
    assert reading.pids == 1
    assert (reading.net_rx_bytes, reading.net_tx_bytes) == (None, None)  # --network none
    assert (reading.block_read_bytes, reading.block_write_bytes) == (0, 0)  # an empty list


def test_cpu_percent_is_docker_stats_formula_on_two_consecutive_frames() -> None:
    frames = [parse_stats(f) for f in load("stream_busy_memory64m.json")]
    assert all(frames)
    first, second, third = frames
    # (container ns) / (host ns) * cores * 100, as docker/cli's calculateCPUPercentUnix.
    assert cpu_pct(first, second) == 100.0 * 856445644 / 1990000000 * 2
    assert cpu_pct(first, second) == pytest.approx(86.0749, abs=1e-4)
    assert cpu_pct(second, third) == pytest.approx(
        100.0 * (2079961734 - 1209523018) / (23695340000000 - 23693340000000) * 2
    )
    # The engine sends `precpu_stats`, the previous frame's counters: the same figure.
    pre = load("stream_busy_memory64m.json")[1]["precpu_stats"]
    assert pre["cpu_usage"]["total_usage"] == first.cpu_total_ns


def test_network_rates_come_from_the_read_times_of_two_frames() -> None:
    frames = load("stream_network.json")
    a, b = parse_stats(frames[0]), parse_stats(frames[1])
    assert a is not None and b is not None
    assert (a.net_rx_bytes, a.net_tx_bytes) == (340, 0)
    rates = container_rates(a, b)
    elapsed = 52.517407987 - 51.514267774
    assert rates.net_rx_bytes_per_s == pytest.approx((2912 - 340) / elapsed, rel=1e-6)
    assert rates.net_tx_bytes_per_s == pytest.approx(2126 / elapsed, rel=1e-6)
    still = container_rates(parse_stats(frames[2]), parse_stats(frames[3]))
    assert still.net_rx_bytes_per_s == 0.0 and still.net_tx_bytes_per_s == 0.0


def test_rates_are_unknown_before_a_second_reading() -> None:
    reading = parse_stats(load("stream_busy_memory64m.json")[0])
    assert container_rates(None, reading) == container_rates(None, None)
    assert container_rates(None, reading).cpu_pct is None


def test_the_frame_of_a_container_not_running_is_no_reading() -> None:
    assert parse_stats(load("frame_not_running.json")) is None


def test_block_io_adds_reads_and_writes_of_every_device_in_either_cgroup_spelling() -> None:
    # cgroup v1 spells the ops "Read"/"Write" (plus "Sync", "Total"...), v2 "read"/"write".
    frame = load("stream_busy_memory64m.json")[1]
    frame["blkio_stats"]["io_service_bytes_recursive"] = [
        {"major": 8, "minor": 0, "op": "Read", "value": 4096},
        {"major": 8, "minor": 0, "op": "Write", "value": 100},
        {"major": 8, "minor": 0, "op": "Total", "value": 4196},
        {"major": 8, "minor": 16, "op": "read", "value": 1000},
        {"major": 8, "minor": 16, "op": "write", "value": 5},
    ]
    reading = parse_stats(frame)
    assert reading is not None
    assert (reading.block_read_bytes, reading.block_write_bytes) == (5096, 105)


@pytest.mark.parametrize(
    ("stats", "used"),
    [
        ({"total_inactive_file": 100, "inactive_file": 7}, 900),  # cgroup v1: its own key first
        ({"inactive_file": 300}, 700),  # cgroup v2
        ({"total_inactive_file": 5000, "inactive_file": 300}, 700),  # v1 total above usage: skipped
        ({}, 1000),
    ],
)
def test_memory_used_takes_inactive_file_off_the_usage_as_docker_does(stats, used) -> None:
    assert memory_used({"usage": 1000, "stats": stats}) == used


def test_a_counter_that_goes_back_gives_no_rate() -> None:
    a = StatsReading(read_s=10.0, cpu_total_ns=5_000_000_000, net_rx_bytes=900)
    b = StatsReading(read_s=11.0, cpu_total_ns=1_000_000, net_rx_bytes=100)
    assert container_rates(a, b).cpu_pct is None  # restarted between the readings
    assert container_rates(a, b).net_rx_bytes_per_s is None


def test_without_the_hosts_cpu_time_cpu_is_over_wall_time() -> None:
    a = StatsReading(read_s=10.0, cpu_total_ns=0)
    b = StatsReading(read_s=12.0, cpu_total_ns=3_000_000_000)
    assert cpu_pct(a, b) == pytest.approx(150.0)


@given(st.integers(0, 2**62), st.integers(0, 2**40), st.integers(1, 2**40), st.integers(1, 256))
def test_cpu_percent_is_never_negative_and_at_most_all_cores(prev, used, host, cores) -> None:
    used = min(used, host)  # a container cannot use more than the whole host
    a = StatsReading(read_s=1.0, cpu_total_ns=prev, system_cpu_ns=10**15, online_cpus=cores)
    b = StatsReading(
        read_s=2.0, cpu_total_ns=prev + used, system_cpu_ns=10**15 + host, online_cpus=cores
    )
    value = cpu_pct(a, b)
    assert value is not None and 0.0 <= value <= 100.0 * cores + 1e-9


@given(
    st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(9999, 1, 1)),
    st.integers(0, 999_999_999),
)
def test_engine_times_keep_nanoseconds_and_zones(moment, nanos) -> None:
    moment = moment.replace(microsecond=0, tzinfo=timezone.utc)
    text = moment.strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos:09d}Z"
    assert parse_engine_time(text) == pytest.approx(moment.timestamp() + nanos / 1e9, abs=1e-6)
    shifted = (moment + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%S") + "+02:00"
    assert parse_engine_time(shifted) == moment.timestamp()


@pytest.mark.parametrize(
    "text", ["0001-01-01T00:00:00Z", "", "yesterday", None, 5, "2026-13-01T00:00:00Z"]
)
def test_the_zero_time_and_garbage_are_no_time(text) -> None:
    assert parse_engine_time(text) is None


@pytest.mark.parametrize(
    ("recorded", "devices"),
    [
        ("inspect_gpus_devices.json", ("0", "GPU-abc")),  # --gpus '"device=0,GPU-abc"'
        ("inspect_gpus_count.json", ("0", "1")),  # --gpus 2: moby hands out the first two
        ("inspect_gpus_all.json", ("all",)),  # --gpus all
        ("inspect_busy_memory64m.json", ()),
        ("inspect_env_all_runc.json", ()),  # NVIDIA_VISIBLE_DEVICES=all means nothing under runc
    ],
)
def test_gpu_devices_from_device_requests(recorded: str, devices: tuple[str, ...]) -> None:
    assert gpu_devices(load(recorded)) == devices


@pytest.mark.parametrize(
    ("value", "devices"),
    [
        ("all", ("all",)),
        ("0,2", ("0", "2")),
        ("GPU-1a2b, GPU-3c4d", ("GPU-1a2b", "GPU-3c4d")),
        ("none", ()),
        ("void", ()),
        ("", ()),
    ],
)
def test_the_environment_counts_under_nvidias_runtime(value: str, devices) -> None:
    inspect = load("inspect_env_all_runc.json")
    inspect["HostConfig"]["Runtime"] = "nvidia"
    inspect["Config"]["Env"] = [
        e for e in inspect["Config"]["Env"] if not e.startswith("NVIDIA_VISIBLE_DEVICES=")
    ]
    inspect["Config"]["Env"].append(f"NVIDIA_VISIBLE_DEVICES={value}")
    assert gpu_devices(inspect) == devices


def test_device_requests_win_over_the_environment() -> None:
    inspect = load("inspect_gpus_devices.json")
    inspect["HostConfig"]["Runtime"] = "nvidia"
    inspect["Config"]["Env"] = ["NVIDIA_VISIBLE_DEVICES=all"]
    assert gpu_devices(inspect) == ("0", "GPU-abc")


def test_a_sample_from_the_listing_the_inspect_and_two_readings() -> None:
    listed = load("list_busy.json")[0]
    frames = [parse_stats(f) for f in load("stream_busy_memory64m.json")]
    inspect = load("inspect_busy_memory64m.json")
    started = parse_engine_time(inspect["State"]["StartedAt"])
    sample = container_sample(listed, started, gpu_devices(inspect), frames[0], frames[1])
    assert sample.id == "064694041fdd6230da5b6472cbe4d2b2be04c78b4ebfda1fae691be336c0fb18"
    assert sample.short_id == "064694041fdd"
    assert (sample.name, sample.image, sample.status) == (
        "gpuherd-test-cap",
        "gpuherd-test-busybox:proto",
        "running",
    )
    assert sample.started_at == pytest.approx(1795709555.419351694, abs=1e-6)
    assert sample.cpu_pct == pytest.approx(86.0749, abs=1e-4)
    assert (sample.memory_used_bytes, sample.memory_limit_bytes, sample.pids) == (
        598016,
        64 * MiB,
        1,
    )
    assert sample.block_read_bytes_per_s == 0.0 and sample.net_rx_bytes_per_s is None
    first = container_sample(listed, started, (), None, frames[0])
    assert first.cpu_pct is None and first.memory_used_bytes == frames[0].memory_used_bytes
    unread = container_sample(listed, None, (), None, None)
    assert unread.memory_used_bytes is None and unread.pids is None
