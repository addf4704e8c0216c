"""Test doubles at the two seams gpuherd has: NVML (`FakeNvml`) and a whole collector."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

# The real error classes, so the code under test sees exactly what the driver would raise.
import pynvml  # noqa: TID251

from collectors.base import CollectorUnavailable, SourceExhausted
from collectors.machine.nvml import MemoryInfo, ProcessEntry

GiB = 1 << 30
MiB = 1 << 20

NotSupported = pynvml.NVMLError_NotSupported
NoPermission = pynvml.NVMLError_NoPermission
FunctionNotFound = pynvml.NVMLError_FunctionNotFound
GpuIsLost = pynvml.NVMLError_GpuIsLost
Unknown = pynvml.NVMLError_Unknown
LibraryNotFound = pynvml.NVMLError_LibraryNotFound
DriverNotLoaded = pynvml.NVMLError_DriverNotLoaded
Uninitialized = pynvml.NVMLError_Uninitialized
InsufficientSize = pynvml.NVMLError_InsufficientSize


@dataclass
class FakeGpu:
    """Scripted values of one GPU, in NVML's units (bytes, milliwatts, MHz, percent)."""

    name: str = "NVIDIA H200"
    uuid: str = "GPU-00000000-0000-0000-0000-000000000000"
    total: int = 140 * GiB
    used: int = 615 * MiB
    reserved: int = 512 * MiB
    util: tuple[int, int] = (0, 0)
    temperature: int = 31
    power_mw: int = 75_000
    power_limit_mw: int = 700_000
    sm_clock: int = 345
    mem_clock: int = 2619
    fan: int = 0
    pstate: int = 0
    ecc: tuple[int, int] = (0, 0)
    mig: bool = False
    compute: list[ProcessEntry] = field(default_factory=list)
    graphics: list[ProcessEntry] = field(default_factory=list)


@dataclass
class _Failure:
    error: type[BaseException]
    times: int | None


class FakeNvml:
    """An `NvmlBackend` with scripted per-GPU values that can raise the real pynvml errors.

    `fail(index, method, error, times=None)` makes `method` raise `error` for GPU `index`
    (`None` for the system calls: `init`, `device_count`, versions) every time, or `times`
    times. `calls` counts every call as `(method, index)`.
    """

    def __init__(self, gpus: Sequence[FakeGpu] = (), driver: str = "580.159.04") -> None:
        self.gpus = list(gpus) if gpus else [FakeGpu()]
        self.driver = driver
        self.calls: Counter[tuple[str, int | None]] = Counter()
        self.initialized = 0
        self._failures: dict[tuple[int | None, str], _Failure] = {}

    def fail(
        self, index: int | None, method: str, error: type[BaseException], times: int | None = None
    ) -> None:
        self._failures[(index, method)] = _Failure(error, times)

    def heal(self, index: int | None = None, method: str | None = None) -> None:
        for key in list(self._failures):
            if (index is None or key[0] == index) and (method is None or key[1] == method):
                del self._failures[key]

    def _enter(self, method: str, index: int | None) -> None:
        self.calls[(method, index)] += 1
        failure = self._failures.get((index, method))
        if failure is None:
            return
        if failure.times is not None:
            failure.times -= 1
            if failure.times <= 0:
                del self._failures[(index, method)]
        raise failure.error()

    def _gpu(self, method: str, handle: Any) -> FakeGpu:
        self._enter(method, handle)
        return self.gpus[handle]

    # System calls.
    def init(self) -> None:
        self._enter("init", None)
        self.initialized += 1

    def shutdown(self) -> None:
        self._enter("shutdown", None)
        self.initialized -= 1

    def device_count(self) -> int:
        self._enter("device_count", None)
        return len(self.gpus)

    def driver_version(self) -> str:
        self._enter("driver_version", None)
        return self.driver

    def nvml_version(self) -> str:
        self._enter("nvml_version", None)
        return f"13.{self.driver}"

    def cuda_driver_version(self) -> int:
        self._enter("cuda_driver_version", None)
        return 13000

    # Device calls; a handle is the GPU index.
    def handle(self, index: int) -> int:
        self._enter("handle", index)
        if not 0 <= index < len(self.gpus):
            raise pynvml.NVMLError_InvalidArgument()
        return index

    def name(self, handle: int) -> str:
        return self._gpu("name", handle).name

    def uuid(self, handle: int) -> str:
        return self._gpu("uuid", handle).uuid

    def memory_info(self, handle: int, v2: bool) -> MemoryInfo:
        gpu = self._gpu("memory_info_v2" if v2 else "memory_info", handle)
        if v2:
            return MemoryInfo(
                gpu.total, gpu.used, gpu.total - gpu.used - gpu.reserved, gpu.reserved
            )
        # v1 counts the driver's reservation as used, as real drivers do.
        used = gpu.used + gpu.reserved
        return MemoryInfo(gpu.total, used, gpu.total - used)

    def utilization(self, handle: int) -> tuple[int, int]:
        return self._gpu("utilization", handle).util

    def temperature(self, handle: int) -> int:
        return self._gpu("temperature", handle).temperature

    def power(self, handle: int) -> int:
        return self._gpu("power", handle).power_mw

    def power_limit(self, handle: int) -> int:
        return self._gpu("power_limit", handle).power_limit_mw

    def sm_clock(self, handle: int) -> int:
        return self._gpu("sm_clock", handle).sm_clock

    def mem_clock(self, handle: int) -> int:
        return self._gpu("mem_clock", handle).mem_clock

    def fan(self, handle: int) -> int:
        return self._gpu("fan", handle).fan

    def pstate(self, handle: int) -> int:
        return self._gpu("pstate", handle).pstate

    def ecc_errors(self, handle: int, uncorrected: bool) -> int:
        return self._gpu("ecc_errors", handle).ecc[1 if uncorrected else 0]

    def mig_mode(self, handle: int) -> bool:
        return self._gpu("mig_mode", handle).mig

    def compute_processes(self, handle: int) -> list[ProcessEntry]:
        return list(self._gpu("compute_processes", handle).compute)

    def graphics_processes(self, handle: int) -> list[ProcessEntry]:
        return list(self._gpu("graphics_processes", handle).graphics)


class FakeCollector:
    """A collector that yields the given samples (raising any exception among them) in order.

    After the last item it raises `SourceExhausted`. With `unavailable`, `open()` raises it.
    `role` and `task_id` are declared as a real collector declares them (`collectors.roles`).
    """

    def __init__(
        self,
        samples: Iterable[Any] = (),
        name: str = "fake",
        interval_s: float = 0.0,
        unavailable: CollectorUnavailable | None = None,
        role: str | None = None,
        task_id: str | None = None,
    ) -> None:
        self.name = name
        self.role = role
        self.task_id = task_id
        self.interval_s = interval_s
        self._items = list(samples)
        self._unavailable = unavailable
        self.opened = 0
        self.closed = 0
        self.sampled = 0

    def open(self) -> None:
        self.opened += 1
        if self._unavailable is not None:
            raise self._unavailable

    def sample(self) -> Any:
        if self.sampled >= len(self._items):
            raise SourceExhausted(f"{self.name}: no more samples", title=self.name)
        item = self._items[self.sampled]
        self.sampled += 1
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        self.closed += 1
