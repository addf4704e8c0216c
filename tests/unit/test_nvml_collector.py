from __future__ import annotations

import threading

import pytest

import collectors.machine.nvml as nvml
from collectors.base import CollectorError, CollectorUnavailable, Failed, Recovered, Sampled
from collectors.loop import run_collector
from collectors.machine.nvml import NvmlCollector, ProcessEntry, merge_processes
from collectors.samples import GpuProcess
from tests.fakes import (
    DriverNotLoaded,
    FakeGpu,
    FakeNvml,
    FunctionNotFound,
    GiB,
    GpuIsLost,
    InsufficientSize,
    LibraryNotFound,
    MiB,
    NoPermission,
    NotSupported,
    Uninitialized,
    Unknown,
)

UUID_A = "GPU-aaaaaaaa-0000-0000-0000-000000000000"
UUID_B = "GPU-bbbbbbbb-0000-0000-0000-000000000000"


def two_gpus() -> FakeNvml:
    return FakeNvml(
        [
            FakeGpu(
                name="NVIDIA H100 80GB HBM3",
                uuid=UUID_A,
                total=80 * GiB,
                used=10 * GiB,
                util=(97, 41),
                temperature=64,
                power_mw=512_345,
                power_limit_mw=700_000,
            ),
            FakeGpu(name="NVIDIA H100 80GB HBM3", uuid=UUID_B, total=80 * GiB, used=1 * GiB),
        ]
    )


def opened(fake: FakeNvml, clock=lambda: 1000.0) -> NvmlCollector:
    collector = NvmlCollector(backend=fake, clock=clock)
    collector.open()
    return collector


def test_tick_converts_units_and_carries_versions():
    collector = opened(two_gpus())
    tick = collector.sample()
    gpu = tick.devices[0]
    assert tick.taken_at == 1000.0
    assert (tick.driver_version, tick.nvml_version, tick.cuda_driver_version) == (
        "580.159.04",
        "13.580.159.04",
        "13.0",
    )
    assert gpu.uuid == UUID_A and gpu.name == "NVIDIA H100 80GB HBM3" and gpu.index == 0
    assert gpu.memory_used_bytes == 10 * GiB
    assert gpu.memory_total_bytes == 80 * GiB
    assert gpu.memory_reserved_bytes == 512 * MiB
    assert (gpu.gpu_util_pct, gpu.mem_util_pct) == (97.0, 41.0)
    assert gpu.power_w == pytest.approx(512.345)
    assert gpu.power_limit_w == 700.0
    assert gpu.temperature_c == 64.0
    assert gpu.mig_mode is False
    assert gpu.processes == ()
    assert gpu.error is None
    assert [d.uuid for d in tick.devices] == [UUID_A, UUID_B]


def test_not_supported_field_is_none_and_not_asked_again():
    fake = two_gpus()
    fake.fail(0, "fan", NotSupported)
    fake.fail(0, "ecc_errors", NoPermission)
    collector = opened(fake)
    for _ in range(3):
        tick = collector.sample()
    gpu = tick.devices[0]
    assert gpu.fan_pct is None
    assert gpu.ecc_errors_corrected is None and gpu.ecc_errors_uncorrected is None
    assert gpu.temperature_c == 64.0
    assert fake.calls[("fan", 0)] == 1
    assert fake.calls[("fan", 1)] == 3  # the other GPU supports it
    assert tick.devices[1].fan_pct == 0.0


def test_transient_field_error_is_none_this_tick_only():
    fake = two_gpus()
    fake.fail(0, "temperature", nvml.pynvml.NVMLError_NoData, times=1)
    collector = opened(fake)
    assert collector.sample().devices[0].temperature_c is None
    assert collector.sample().devices[0].temperature_c == 64.0


def test_memory_falls_back_to_v1_without_v2_call():
    fake = two_gpus()
    fake.fail(0, "memory_info_v2", FunctionNotFound)
    collector = opened(fake)
    collector.sample()
    gpu = collector.sample().devices[0]
    assert gpu.memory_used_bytes == 10 * GiB + 512 * MiB  # v1 counts the reservation as used
    assert gpu.memory_reserved_bytes is None
    assert fake.calls[("memory_info", 0)] == 2
    assert collector.sample().devices[1].memory_reserved_bytes == 512 * MiB


def test_lost_gpu_reports_error_while_other_keeps_updating():
    fake = two_gpus()
    collector = opened(fake)
    collector.sample()
    fake.fail(1, "memory_info_v2", GpuIsLost)
    fake.fail(1, "handle", GpuIsLost)
    fake.gpus[0].used = 20 * GiB
    tick = collector.sample()
    good, lost = tick.devices
    assert good.error is None and good.memory_used_bytes == 20 * GiB
    assert lost.error == "GPU is lost"
    assert lost.uuid == UUID_B and lost.name == "NVIDIA H100 80GB HBM3"
    assert lost.memory_total_bytes == 80 * GiB
    assert lost.memory_used_bytes is None and lost.temperature_c is None and lost.processes is None
    fake.gpus[0].used = 30 * GiB
    tick = collector.sample()
    assert tick.devices[0].memory_used_bytes == 30 * GiB
    assert tick.devices[1].error == "GPU is lost"


def test_lost_gpu_recovers_with_a_fresh_handle():
    fake = two_gpus()
    collector = opened(fake)
    fake.fail(1, "utilization", Unknown, times=1)
    assert collector.sample().devices[1].error == "Unknown Error"
    tick = collector.sample()
    assert tick.devices[1].error is None
    assert tick.devices[1].memory_used_bytes == 1 * GiB
    assert fake.calls[("handle", 1)] == 2
    assert fake.calls[("handle", 0)] == 1


def test_reconnect_to_a_different_card_is_an_error():
    fake = two_gpus()
    collector = opened(fake)
    collector.sample()
    fake.fail(1, "temperature", Unknown, times=1)
    collector.sample()
    fake.gpus[1].uuid = "GPU-cccccccc-0000-0000-0000-000000000000"
    tick = collector.sample()
    assert tick.devices[1].error.startswith("index 1 now answers as GPU-cccccccc")
    assert tick.devices[1].uuid == UUID_B
    assert tick.devices[0].error is None


def test_gpu_failing_at_open_shows_placeholder_then_its_identity():
    fake = two_gpus()
    fake.fail(1, "handle", GpuIsLost, times=1)
    collector = opened(fake)
    row = collector.sample().devices[1]
    assert row.error == "GPU is lost" and row.uuid == "unknown-1"
    row = collector.sample().devices[1]
    assert row.error is None and row.uuid == UUID_B


def test_every_gpu_failing_raises_collector_error():
    fake = two_gpus()
    collector = opened(fake)
    fake.fail(0, "memory_info_v2", GpuIsLost)
    fake.fail(1, "memory_info_v2", Unknown)
    with pytest.raises(CollectorError) as info:
        collector.sample()
    assert "GPU 0: GPU is lost" in info.value.msg
    assert "GPU 1: Unknown Error" in info.value.msg


def test_nvml_uninitialized_mid_run_raises_collector_error():
    fake = two_gpus()
    collector = opened(fake)
    fake.fail(0, "utilization", Uninitialized)
    with pytest.raises(CollectorError, match="NVML stopped working"):
        collector.sample()


@pytest.mark.parametrize("error", [LibraryNotFound, DriverNotLoaded])
def test_missing_driver_is_unavailable_with_clear_message(error):
    fake = two_gpus()
    fake.fail(None, "init", error)
    collector = NvmlCollector(backend=fake)
    with pytest.raises(CollectorUnavailable) as info:
        collector.open()
    assert info.value.msg.startswith("NVIDIA driver not found: ")
    # the queue, the exporter and the recorder show this message too: the demo helps none
    assert "demo" not in info.value.msg
    collector.close()
    assert fake.calls[("shutdown", None)] == 0


def test_no_gpus_is_unavailable_and_releases_nvml():
    fake = FakeNvml()
    fake.gpus.clear()
    collector = NvmlCollector(backend=fake)
    with pytest.raises(CollectorUnavailable, match="^no NVIDIA GPU found"):
        collector.open()
    collector.close()
    assert fake.initialized == 0


def test_real_pynvml_without_driver_is_unavailable():
    collector = NvmlCollector()
    try:
        collector.open()
    except CollectorUnavailable as error:
        assert error.msg.startswith(("NVIDIA driver not found: ", "no NVIDIA GPU found"))
        assert "demo" not in error.msg
    else:
        collector.close()
        pytest.skip("an NVIDIA driver is present; tests/gpu covers this machine")


def test_open_and_close_pair_init_and_shutdown():
    fake = two_gpus()
    collector = opened(fake)
    collector.sample()
    collector.close()
    collector.close()
    assert fake.calls[("init", None)] == 1
    assert fake.calls[("shutdown", None)] == 1
    with pytest.raises(CollectorError, match="not initialized"):
        collector.sample()


def test_static_facts_are_not_read_every_tick(monkeypatch):
    monkeypatch.setattr(nvml, "STATIC_REFRESH_TICKS", 4)
    fake = two_gpus()
    collector = opened(fake)
    for _ in range(3):
        collector.sample()
    fake.gpus[0].power_limit_mw = 600_000
    assert collector.sample().devices[0].power_limit_w == 700.0
    assert collector.sample().devices[0].power_limit_w == 600.0
    assert fake.calls[("name", 0)] == 1 and fake.calls[("uuid", 0)] == 1
    assert fake.calls[("power_limit", 0)] == 2 and fake.calls[("mig_mode", 0)] == 2


def test_each_tick_asks_each_dynamic_field_once():
    fake = FakeNvml([FakeGpu(uuid=UUID_A)])
    collector = opened(fake)
    collector.sample()
    before = fake.calls.copy()
    collector.sample()
    per_tick = fake.calls - before
    assert dict(per_tick) == {
        ("memory_info_v2", 0): 1,
        ("utilization", 0): 1,
        ("temperature", 0): 1,
        ("power", 0): 1,
        ("sm_clock", 0): 1,
        ("mem_clock", 0): 1,
        ("fan", 0): 1,
        ("pstate", 0): 1,
        ("ecc_errors", 0): 2,
        ("compute_processes", 0): 1,
        ("graphics_processes", 0): 1,
    }


def test_processes_listed_and_unattributed_memory():
    fake = two_gpus()
    fake.gpus[0].compute = [ProcessEntry(4242, 6 * GiB), ProcessEntry(4343, 3 * GiB)]
    collector = opened(fake)
    gpu = collector.sample().devices[0]
    assert gpu.processes == (GpuProcess(4242, 6 * GiB), GpuProcess(4343, 3 * GiB))
    assert gpu.unattributed_memory_bytes == 1 * GiB


def test_idle_gpu_with_memory_but_no_process():
    fake = FakeNvml([FakeGpu(used=615 * MiB)])
    gpu = opened(fake).sample().devices[0]
    assert gpu.processes == ()
    assert gpu.unattributed_memory_bytes == 615 * MiB


def test_process_memory_hidden_by_driver_is_none():
    fake = FakeNvml([FakeGpu(used=8 * GiB, compute=[ProcessEntry(7, None)])])
    gpu = opened(fake).sample().devices[0]
    assert gpu.processes == (GpuProcess(7, None),)
    assert gpu.unattributed_memory_bytes == 8 * GiB


def test_unlistable_compute_processes_are_unknown_not_empty():
    fake = two_gpus()
    fake.fail(0, "compute_processes", NoPermission)
    fake.fail(1, "graphics_processes", NotSupported)
    fake.gpus[1].compute = [ProcessEntry(99, 512 * MiB)]
    tick = opened(fake).sample()
    assert tick.devices[0].processes is None
    assert tick.devices[1].processes == (GpuProcess(99, 512 * MiB),)


def test_process_list_growing_mid_query_is_asked_again():
    fake = two_gpus()
    fake.gpus[0].compute = [ProcessEntry(1, GiB)]
    fake.fail(0, "compute_processes", InsufficientSize, times=1)
    collector = opened(fake)
    assert collector.sample().devices[0].processes == (GpuProcess(1, GiB),)
    fake.fail(0, "compute_processes", InsufficientSize, times=2)
    assert collector.sample().devices[0].processes is None
    assert collector.sample().devices[0].processes == (GpuProcess(1, GiB),)


def test_process_exiting_between_ticks_leaves_the_list():
    fake = two_gpus()
    fake.gpus[0].compute = [ProcessEntry(1, GiB), ProcessEntry(2, GiB)]
    collector = opened(fake)
    assert {p.pid for p in collector.sample().devices[0].processes} == {1, 2}
    fake.gpus[0].compute = [ProcessEntry(2, GiB)]
    assert {p.pid for p in collector.sample().devices[0].processes} == {2}


def test_merge_processes_counts_a_shared_pid_once():
    merged = merge_processes(
        [ProcessEntry(1, 4 * GiB), ProcessEntry(2, None)],
        [ProcessEntry(1, 4 * GiB), ProcessEntry(3, GiB)],
    )
    assert merged == (
        GpuProcess(1, 4 * GiB, "compute+graphics"),
        GpuProcess(2, None, "compute"),
        GpuProcess(3, GiB, "graphics"),
    )


def test_runs_in_the_collector_loop_with_outage_and_recovery():
    fake = FakeNvml([FakeGpu(uuid=UUID_A)])
    collector = NvmlCollector(backend=fake, interval_s=0.0)
    events = []
    stop = threading.Event()

    def emit(event):
        events.append(event)
        n = len(events)
        if n == 1:
            fake.fail(0, "memory_info_v2", GpuIsLost, times=1)
        if n >= 4:
            stop.set()

    run_collector(collector, emit, stop)
    kinds = [type(e) for e in events]
    assert kinds[:4] == [Sampled, Failed, Recovered, Sampled]
    assert "GPU is lost" in events[1].error.msg
    assert fake.initialized == 0


def test_memory_probe_matches_collector_and_makes_one_call_per_gpu():
    fake = two_gpus()
    fake.fail(1, "memory_info_v2", FunctionNotFound)
    probe = nvml.NvmlMemoryProbe(backend=fake)
    probe.open()
    collector = opened(fake)
    tick = collector.sample()
    before = fake.calls.copy()
    reading = probe.sample()
    assert reading == tuple(d.memory_used_bytes for d in tick.devices)
    assert reading == (10 * GiB, 1 * GiB + 512 * MiB)
    assert sum((fake.calls - before).values()) == 2
    fake.fail(0, "memory_info_v2", GpuIsLost)
    assert probe.sample() == (None, 1 * GiB + 512 * MiB)
    fake.fail(1, "memory_info", Uninitialized)
    with pytest.raises(CollectorError):
        probe.sample()
    probe.close()
    collector.close()
    assert fake.initialized == 0
