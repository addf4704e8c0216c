"""What NVML cannot tell stays unknown all the way to the screen: never 0.

A process whose memory the driver does not report (`usedGpuMemory` is `None` in nvidia-ml-py,
NVML's "not available" value in C) and a power limit the GPU does not support read as `None`
and show as `N/A`. The real `PynvmlBackend` is driven through nvidia-ml-py's own conversion code
by a C function that stands in for the driver's.
"""

from __future__ import annotations

import ctypes
import re

import pynvml  # noqa: TID251 - the test stands in for the driver below nvidia-ml-py
import pytest

from collectors.machine.nvml import NvmlCollector, ProcessEntry, PynvmlBackend, merge_processes
from collectors.samples import GpuProcess
from gpuherd.present.format import fmt_power_pair
from gpuherd.snapshot.snapshot import render_table, take_snapshot, to_json
from tests.fakes import FakeGpu, FakeNvml, GiB, NotSupported

NOT_AVAILABLE = pynvml.NVML_VALUE_NOT_AVAILABLE_ulonglong.value
PROTOTYPE = ctypes.CFUNCTYPE(
    ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint), ctypes.c_void_p
)


def driver_call(rows: list[tuple[int, int]], struct: type) -> object:
    """A C function with the driver's `nvmlDeviceGet*RunningProcesses` contract."""

    def call(_handle: object, count: ctypes.POINTER, procs: int | None) -> int:
        if not procs:  # nvidia-ml-py first asks for the count
            count[0] = len(rows)
            return pynvml.NVML_ERROR_INSUFFICIENT_SIZE
        array = ctypes.cast(procs, ctypes.POINTER(struct))
        for i, (pid, used) in enumerate(rows):
            array[i].pid, array[i].usedGpuMemory = pid, used
        count[0] = len(rows)
        return pynvml.NVML_SUCCESS

    return PROTOTYPE(call)


@pytest.fixture
def driver(monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    """Function name -> C function; a name not listed is one the driver does not have."""
    functions: dict[str, object] = {}

    def lookup(name: str) -> object:
        if name not in functions:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        return functions[name]

    monkeypatch.setattr(pynvml, "_nvmlGetFunctionPointer", lookup)
    return functions


def test_a_process_memory_the_driver_cannot_tell_is_none(driver: dict[str, object]) -> None:
    rows = [(4242, NOT_AVAILABLE), (5151, 3 * GiB), (6161, 0)]
    driver["nvmlDeviceGetComputeRunningProcesses_v3"] = driver_call(
        rows, pynvml.c_nvmlProcessInfo_v3_t
    )
    driver["nvmlDeviceGetGraphicsRunningProcesses_v3"] = driver_call(
        [(4242, NOT_AVAILABLE)], pynvml.c_nvmlProcessInfo_v3_t
    )
    backend = PynvmlBackend()
    assert backend.compute_processes(None) == [
        ProcessEntry(4242, None),
        ProcessEntry(5151, 3 * GiB),
        ProcessEntry(6161, 0),
    ]
    assert backend.graphics_processes(None) == [ProcessEntry(4242, None)]


def test_an_older_driver_without_v3_process_calls_is_read_with_v2(
    driver: dict[str, object],
) -> None:
    driver["nvmlDeviceGetComputeRunningProcesses_v2"] = driver_call(
        [(4242, NOT_AVAILABLE), (5151, GiB)], pynvml.c_nvmlProcessInfo_v2_t
    )
    backend = PynvmlBackend()
    assert backend.compute_processes(None) == [ProcessEntry(4242, None), ProcessEntry(5151, GiB)]


def test_merging_keeps_an_unknown_memory_unknown() -> None:
    merged = merge_processes(
        [ProcessEntry(1, None), ProcessEntry(2, None)],
        [ProcessEntry(2, 2 * GiB), ProcessEntry(3, None)],
    )
    assert merged == (
        GpuProcess(1, None, "compute"),
        GpuProcess(2, 2 * GiB, "compute+graphics"),
        GpuProcess(3, None, "graphics"),
    )
    both_unknown = merge_processes([ProcessEntry(1, None)], [ProcessEntry(1, None)])
    assert both_unknown == (GpuProcess(1, None, "compute+graphics"),)


def unknown_memory_gpu() -> FakeNvml:
    return FakeNvml(
        [
            FakeGpu(
                uuid="GPU-a",
                total=80 * GiB,
                used=12 * GiB,
                reserved=0,
                compute=[ProcessEntry(4242, None), ProcessEntry(5151, 2 * GiB)],
            )
        ]
    )


def test_the_collector_passes_an_unknown_process_memory_on_as_none() -> None:
    collector = NvmlCollector(unknown_memory_gpu())
    collector.open()
    try:
        [device] = collector.sample().devices
    finally:
        collector.close()
    assert device.processes == (
        GpuProcess(4242, None, "compute"),
        GpuProcess(5151, 2 * GiB, "compute"),
    )
    # only what is known is subtracted from the memory in use
    assert device.unattributed_memory_bytes == 10 * GiB


def test_an_unknown_process_memory_shows_na_and_null() -> None:
    snap = take_snapshot(unknown_memory_gpu(), window_s=0.0)
    text = render_table(snap, width=200)
    assert re.search(r"\n\s*0\s+4242\s+\S+\s+N/A\s", text), text
    assert re.search(r"\n\s*0\s+5151\s+\S+\s+2\.0 GiB\s", text), text
    processes = {p["pid"]: p for p in to_json(snap)["gpus"][0]["processes"]}
    assert processes[4242]["used_memory_bytes"] is None
    assert processes[5151]["used_memory_bytes"] == 2 * GiB


def test_an_unknown_power_limit_is_na_not_zero() -> None:
    fake = FakeNvml([FakeGpu(uuid="GPU-a", power_mw=313_400)])
    fake.fail(0, "power_limit", NotSupported)
    snap = take_snapshot(fake, window_s=0.0)
    gpu = to_json(snap)["gpus"][0]
    assert (gpu["power_w"], gpu["power_limit_w"]) == (313.4, None)
    assert "313 / N/A W" in render_table(snap)


@pytest.mark.parametrize(
    ("draw", "limit", "text"),
    [
        (313.4, None, "313 / N/A W"),
        (313.4, float("nan"), "313 / N/A W"),
        (313.4, 0.0, "313 / 0 W"),  # a real 0 W limit is a value, not unknown
        (None, None, "N/A"),
        (0.0, 700.0, "0 / 700 W"),
    ],
)
def test_power_pairs(draw: float | None, limit: float | None, text: str) -> None:
    assert fmt_power_pair(draw, limit) == text
