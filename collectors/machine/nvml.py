"""NVIDIA GPUs through NVML: the only module in gpuherd that imports `pynvml`."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import pynvml  # noqa: TID251 - this module is the one NVML seam

from collectors.base import CollectorError, CollectorUnavailable
from collectors.roles import GPU
from collectors.samples import GpuProcess, GpuSample, GpuTick

T = TypeVar("T")

STATIC_REFRESH_TICKS = 60
"""Power limit and MIG mode change only by an administrator's hand; re-read them this often."""


def _nvml_errors(*names: str) -> tuple[type[BaseException], ...]:
    # Older nvidia-ml-py releases lack the newest error codes; take the classes that exist.
    return tuple(
        getattr(pynvml, f"NVMLError_{name}")
        for name in names
        if hasattr(pynvml, f"NVMLError_{name}")
    )


STATIC_FIELD_ERRORS = (
    *_nvml_errors(
        "NotSupported", "NoPermission", "FunctionNotFound", "ArgumentVersionMismatch", "Deprecated"
    ),
    pynvml.NVMLLibraryMismatchError,
)
"""A field that fails with one of these will fail the same way every tick: stop asking."""

FIELD_ERRORS = (
    *STATIC_FIELD_ERRORS,
    *_nvml_errors(
        "NotFound", "NoData", "InvalidArgument", "CorruptedInforom", "InsufficientSize", "NotReady"
    ),
)
"""Errors that cost one field of one GPU (it becomes `None`), never the whole device."""

GLOBAL_ERRORS = _nvml_errors(
    "Uninitialized", "DriverNotLoaded", "LibraryNotFound", "LibRmVersionMismatch"
)
"""Errors that mean NVML itself stopped working: no GPU can be read."""

_RETRY_ONCE = _nvml_errors("InsufficientSize")

_MEMORY_V1_FALLBACK = _nvml_errors(
    "FunctionNotFound", "ArgumentVersionMismatch", "NotSupported", "InvalidArgument"
)


@dataclass(frozen=True, slots=True)
class MemoryInfo:
    """Device memory in bytes; `reserved` only comes with NVML's v2 memory call."""

    total: int
    used: int
    free: int
    reserved: int | None = None


@dataclass(frozen=True, slots=True)
class ProcessEntry:
    """One process in NVML's running-process list."""

    pid: int
    used_memory_bytes: int | None


class NvmlBackend(Protocol):
    """The NVML calls gpuherd makes, in NVML's own units; the seam tests replace.

    Every method may raise `pynvml.NVMLError` subclasses; the collector decides what they mean.
    """

    def init(self) -> None:
        """Initialize NVML (reference counted by the driver)."""

    def shutdown(self) -> None:
        """Release one `init`."""

    def device_count(self) -> int:
        """Number of GPUs the driver exposes."""

    def handle(self, index: int) -> Any:
        """An opaque handle for the GPU at `index`."""

    def name(self, handle: Any) -> str:
        """Product name, for example `NVIDIA H200`."""

    def uuid(self, handle: Any) -> str:
        """Stable identity, `GPU-...`."""

    def memory_info(self, handle: Any, v2: bool) -> MemoryInfo:
        """Memory figures; `v2=True` asks for the call that also reports the reservation."""

    def utilization(self, handle: Any) -> tuple[int, int]:
        """GPU and memory-controller utilization, percent."""

    def temperature(self, handle: Any) -> int:
        """GPU core temperature, degrees Celsius."""

    def power(self, handle: Any) -> int:
        """Power draw, milliwatts."""

    def power_limit(self, handle: Any) -> int:
        """Enforced power limit, milliwatts."""

    def sm_clock(self, handle: Any) -> int:
        """Current SM clock, MHz."""

    def mem_clock(self, handle: Any) -> int:
        """Current memory clock, MHz."""

    def fan(self, handle: Any) -> int:
        """Fan speed, percent of maximum."""

    def pstate(self, handle: Any) -> int:
        """Performance state, 0 to 15."""

    def ecc_errors(self, handle: Any, uncorrected: bool) -> int:
        """Volatile ECC error count since the driver loaded."""

    def mig_mode(self, handle: Any) -> bool:
        """Whether MIG is currently enabled."""

    def compute_processes(self, handle: Any) -> Sequence[ProcessEntry]:
        """Processes with a compute context on the GPU."""

    def graphics_processes(self, handle: Any) -> Sequence[ProcessEntry]:
        """Processes with a graphics context on the GPU."""

    def driver_version(self) -> str:
        """Driver version string, for example `580.159.04`."""

    def nvml_version(self) -> str:
        """NVML library version string."""

    def cuda_driver_version(self) -> int:
        """CUDA version the driver supports, encoded as 1000 * major + 10 * minor."""


def _entries(raw: Sequence[Any]) -> list[ProcessEntry]:
    return [
        ProcessEntry(int(p.pid), None if p.usedGpuMemory is None else int(p.usedGpuMemory))
        for p in raw
    ]


class PynvmlBackend:
    """`NvmlBackend` over the real `pynvml` module from nvidia-ml-py."""

    def __init__(self) -> None:
        # v3 process structs need a recent driver; drop to v2 once if the symbol is missing.
        self._compute_call = pynvml.nvmlDeviceGetComputeRunningProcesses_v3
        self._graphics_call = pynvml.nvmlDeviceGetGraphicsRunningProcesses_v3

    def init(self) -> None:  # noqa: D102 - see NvmlBackend
        pynvml.nvmlInit()

    def shutdown(self) -> None:  # noqa: D102
        pynvml.nvmlShutdown()

    def device_count(self) -> int:  # noqa: D102
        return int(pynvml.nvmlDeviceGetCount())

    def handle(self, index: int) -> Any:  # noqa: D102
        return pynvml.nvmlDeviceGetHandleByIndex(index)

    def name(self, handle: Any) -> str:  # noqa: D102
        return str(pynvml.nvmlDeviceGetName(handle))

    def uuid(self, handle: Any) -> str:  # noqa: D102
        return str(pynvml.nvmlDeviceGetUUID(handle))

    def memory_info(self, handle: Any, v2: bool) -> MemoryInfo:  # noqa: D102
        if not v2:
            m = pynvml.nvmlDeviceGetMemoryInfo(handle)
            return MemoryInfo(m.total, m.used, m.free)
        version = getattr(pynvml, "nvmlMemory_v2", None)
        if version is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        m = pynvml.nvmlDeviceGetMemoryInfo(handle, version=version)
        return MemoryInfo(m.total, m.used, m.free, m.reserved)

    def utilization(self, handle: Any) -> tuple[int, int]:  # noqa: D102
        u = pynvml.nvmlDeviceGetUtilizationRates(handle)
        return u.gpu, u.memory

    def temperature(self, handle: Any) -> int:  # noqa: D102
        return int(pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU))

    def power(self, handle: Any) -> int:  # noqa: D102
        return int(pynvml.nvmlDeviceGetPowerUsage(handle))

    def power_limit(self, handle: Any) -> int:  # noqa: D102
        return int(pynvml.nvmlDeviceGetEnforcedPowerLimit(handle))

    def sm_clock(self, handle: Any) -> int:  # noqa: D102
        return int(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM))

    def mem_clock(self, handle: Any) -> int:  # noqa: D102
        return int(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM))

    def fan(self, handle: Any) -> int:  # noqa: D102
        return int(pynvml.nvmlDeviceGetFanSpeed(handle))

    def pstate(self, handle: Any) -> int:  # noqa: D102
        return int(pynvml.nvmlDeviceGetPerformanceState(handle))

    def ecc_errors(self, handle: Any, uncorrected: bool) -> int:  # noqa: D102
        kind = (
            pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
            if uncorrected
            else pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED
        )
        return int(pynvml.nvmlDeviceGetTotalEccErrors(handle, kind, pynvml.NVML_VOLATILE_ECC))

    def mig_mode(self, handle: Any) -> bool:  # noqa: D102
        return bool(pynvml.nvmlDeviceGetMigMode(handle)[0] == pynvml.NVML_DEVICE_MIG_ENABLE)

    def compute_processes(self, handle: Any) -> Sequence[ProcessEntry]:  # noqa: D102
        try:
            return _entries(self._compute_call(handle))
        except pynvml.NVMLError_FunctionNotFound:
            if self._compute_call is pynvml.nvmlDeviceGetComputeRunningProcesses_v2:
                raise
            self._compute_call = pynvml.nvmlDeviceGetComputeRunningProcesses_v2
            return _entries(self._compute_call(handle))

    def graphics_processes(self, handle: Any) -> Sequence[ProcessEntry]:  # noqa: D102
        try:
            return _entries(self._graphics_call(handle))
        except pynvml.NVMLError_FunctionNotFound:
            if self._graphics_call is pynvml.nvmlDeviceGetGraphicsRunningProcesses_v2:
                raise
            self._graphics_call = pynvml.nvmlDeviceGetGraphicsRunningProcesses_v2
            return _entries(self._graphics_call(handle))

    def driver_version(self) -> str:  # noqa: D102
        return str(pynvml.nvmlSystemGetDriverVersion())

    def nvml_version(self) -> str:  # noqa: D102
        return str(pynvml.nvmlSystemGetNVMLVersion())

    def cuda_driver_version(self) -> int:  # noqa: D102
        return int(pynvml.nvmlSystemGetCudaDriverVersion())


def merge_processes(
    compute: Sequence[ProcessEntry], graphics: Sequence[ProcessEntry]
) -> tuple[GpuProcess, ...]:
    """One `GpuProcess` per pid: a pid in both lists is one `compute+graphics` process.

    Its memory is counted once (the larger figure), so attributed memory is not doubled.
    """
    merged: dict[int, GpuProcess] = {}
    for kind, entries in (("compute", compute), ("graphics", graphics)):
        for entry in entries:
            seen = merged.get(entry.pid)
            if seen is None:
                merged[entry.pid] = GpuProcess(entry.pid, entry.used_memory_bytes, kind)
                continue
            sizes = [s for s in (seen.used_memory_bytes, entry.used_memory_bytes) if s is not None]
            merged_kind = seen.kind if seen.kind == kind else "compute+graphics"
            merged[entry.pid] = GpuProcess(entry.pid, max(sizes) if sizes else None, merged_kind)
    return tuple(merged.values())


def unavailable_message(error: BaseException) -> str:
    """The sentence a person sees when NVML cannot start.

    It names no way out: the dashboard and `snapshot` add `gpuherd --demo` where it helps; the
    queue, the exporter and the recorder need the GPU itself.
    """
    if isinstance(error, _nvml_errors("LibraryNotFound")):
        why = "the NVML library (libnvidia-ml.so.1) could not be loaded"
        return f"NVIDIA driver not found: {why}."
    if isinstance(error, _nvml_errors("DriverNotLoaded")):
        return "NVIDIA driver not found: the NVIDIA kernel driver is not loaded."
    if isinstance(error, _nvml_errors("LibRmVersionMismatch")):
        return (
            "NVIDIA driver mismatch: the NVML library and the loaded kernel driver differ, "
            "usually after a driver update without a reboot."
        )
    if isinstance(error, _nvml_errors("NoPermission")):
        return f"cannot access the NVIDIA driver: permission denied ({error})."
    return f"NVIDIA driver could not be used: NVML failed to start ({error})."


class NvmlSession:
    """One `init`/`shutdown` pair around a backend, with friendly failures."""

    def __init__(self, backend: NvmlBackend | None) -> None:
        self.backend: NvmlBackend = backend if backend is not None else PynvmlBackend()
        self.active = False

    def open(self) -> int:
        """Initialize NVML and return the GPU count; raise `CollectorUnavailable` if it cannot."""
        try:
            self.backend.init()
        except pynvml.NVMLError as error:
            raise CollectorUnavailable(unavailable_message(error), title="NVML") from error
        self.active = True
        try:
            count = self.backend.device_count()
        except pynvml.NVMLError as error:
            self.close()
            raise CollectorUnavailable(unavailable_message(error), title="NVML") from error
        if count <= 0:
            self.close()
            raise CollectorUnavailable(
                "no NVIDIA GPU found: the driver is loaded but reports no devices.",
                title="NVML",
            )
        return count

    def close(self) -> None:
        """Shut NVML down once; safe to call twice or after a failed `open`."""
        if not self.active:
            return
        self.active = False
        try:
            self.backend.shutdown()
        except pynvml.NVMLError:
            # Shutting down after the driver went away fails; nothing is left to release.
            return

    def require(self) -> NvmlBackend:
        """The backend, or `CollectorError` when NVML is not initialized."""
        if not self.active:
            raise CollectorError("NVML is not initialized", title="NVML")
        return self.backend


def _optional(call: Callable[[], T]) -> T | None:
    try:
        return call()
    except FIELD_ERRORS:
        return None


class DeviceChanged(Exception):
    """The GPU at an index is no longer the card that was there at `open`."""


class DeviceReader:
    """One GPU: its handle, cached static facts, and the fields it has proven not to support."""

    def __init__(self, backend: NvmlBackend, index: int) -> None:
        self.index = index
        self._b = backend
        self._handle: Any = None
        self.uuid = f"unknown-{index}"
        """Placeholder until the GPU answers; kept after a failure so its row shows who it was."""
        self.name = "unknown"
        self._memory_total: int | None = None
        self._power_limit_w: float | None = None
        self._mig_mode: bool | None = None
        self._memory_v2 = True
        self._skip: set[str] = set()
        self._ticks = 0
        self._ecc_corrected = lambda h: backend.ecc_errors(h, False)
        self._ecc_uncorrected = lambda h: backend.ecc_errors(h, True)

    def read(self) -> GpuSample:
        """Query this GPU once; device-level NVML errors propagate to the caller."""
        if self._handle is None:
            self._connect()
        if self._ticks % STATIC_REFRESH_TICKS == 0:
            self._power_limit_w = _milli(self._get("power_limit", self._b.power_limit))
            self._mig_mode = self._get("mig_mode", self._b.mig_mode)
        self._ticks += 1
        memory = self._memory()
        if memory is not None:
            self._memory_total = memory.total
        util = self._get("utilization", self._b.utilization)
        return GpuSample(
            index=self.index,
            uuid=self.uuid,
            name=self.name,
            memory_used_bytes=None if memory is None else memory.used,
            memory_total_bytes=self._memory_total,
            memory_reserved_bytes=None if memory is None else memory.reserved,
            gpu_util_pct=None if util is None else float(util[0]),
            mem_util_pct=None if util is None else float(util[1]),
            temperature_c=_float(self._get("temperature", self._b.temperature)),
            power_w=_milli(self._get("power", self._b.power)),
            power_limit_w=self._power_limit_w,
            sm_clock_mhz=self._get("sm_clock", self._b.sm_clock),
            mem_clock_mhz=self._get("mem_clock", self._b.mem_clock),
            fan_pct=_float(self._get("fan", self._b.fan)),
            pstate=self._get("pstate", self._b.pstate),
            ecc_errors_corrected=self._get("ecc_corrected", self._ecc_corrected),
            ecc_errors_uncorrected=self._get("ecc_uncorrected", self._ecc_uncorrected),
            mig_mode=self._mig_mode,
            processes=self._processes(),
        )

    def failed(self, reason: str) -> GpuSample:
        """The row for a GPU that failed this tick; the handle is fetched again next tick."""
        self._handle = None
        return GpuSample(
            index=self.index,
            uuid=self.uuid,
            name=self.name,
            memory_total_bytes=self._memory_total,
            error=reason,
        )

    def _connect(self) -> None:
        handle = self._b.handle(self.index)
        uuid = self._b.uuid(handle)
        if self.uuid.startswith("GPU-") and uuid != self.uuid:
            # Indices follow bus order; after a GPU drops off, index N may be another card.
            raise DeviceChanged(
                f"index {self.index} now answers as {uuid}; restart gpuherd "
                "to read the new GPU list"
            )
        self.uuid = uuid
        self.name = _optional(lambda: self._b.name(handle)) or self.name
        self._memory_v2 = _supports_v2(self._b, handle)
        self._handle = handle
        self._ticks = 0

    def _get(self, field: str, call: Callable[[Any], T], retry: bool = True) -> T | None:
        if field in self._skip:
            return None
        try:
            return call(self._handle)
        except FIELD_ERRORS as error:
            if isinstance(error, STATIC_FIELD_ERRORS):
                self._skip.add(field)
            elif retry and isinstance(error, _RETRY_ONCE):
                # A process list grew between NVML's count call and its fill call; ask again.
                return self._get(field, call, retry=False)
            return None

    def _memory(self) -> MemoryInfo | None:
        v2 = self._memory_v2
        return self._get("memory", lambda h: self._b.memory_info(h, v2))

    def _processes(self) -> tuple[GpuProcess, ...] | None:
        # An empty list must mean "nobody": if the compute list is unknown, say unknown.
        compute = self._get("compute_processes", self._b.compute_processes)
        if compute is None:
            return None
        graphics = self._get("graphics_processes", self._b.graphics_processes)
        return merge_processes(compute, graphics or ())


def _milli(value: int | None) -> float | None:
    return None if value is None else value / 1000.0


def _float(value: int | None) -> float | None:
    return None if value is None else float(value)


class NvmlCollector:
    """Samples every GPU once per tick into a `GpuTick` (see `collectors.base.Collector`).

    Static facts (name, UUID, power limit, MIG mode) are read at `open` and cached; a GPU that
    fails this tick becomes a `GpuSample` with `error` set while the others keep reporting.
    """

    name = "nvml"
    role = GPU

    def __init__(
        self,
        backend: NvmlBackend | None = None,
        interval_s: float = 1.0,
        clock: Callable[[], float] = time.time,
        name: str = "nvml",
    ) -> None:
        self.name = name
        self.interval_s = interval_s
        self._session = NvmlSession(backend)
        self._clock = clock
        self._devices: list[DeviceReader] = []
        self.driver_version: str | None = None
        self.nvml_version: str | None = None
        self.cuda_driver_version: int | None = None

    def open(self) -> None:
        """Initialize NVML and read static facts; raises `CollectorUnavailable`."""
        count = self._session.open()
        backend = self._session.backend
        self.driver_version = _optional(backend.driver_version)
        self.nvml_version = _optional(backend.nvml_version)
        self.cuda_driver_version = _optional(backend.cuda_driver_version)
        self._devices = [DeviceReader(backend, index) for index in range(count)]

    def sample(self) -> GpuTick:
        """Query every GPU once; raises `CollectorError` when none can be read."""
        self._session.require()
        taken_at = self._clock()
        samples: list[GpuSample] = []
        for device in self._devices:
            try:
                samples.append(device.read())
            except GLOBAL_ERRORS as error:
                raise CollectorError(f"NVML stopped working: {error}", title="NVML") from error
            except (pynvml.NVMLError, DeviceChanged) as error:
                samples.append(device.failed(str(error)))
        if all(s.error is not None for s in samples):
            reasons = "; ".join(f"GPU {s.index}: {s.error}" for s in samples)
            raise CollectorError(f"no GPU could be read ({reasons})", title="NVML")
        return GpuTick(
            taken_at,
            tuple(samples),
            self.driver_version,
            self.nvml_version,
            _cuda_version_text(self.cuda_driver_version),
        )

    def close(self) -> None:
        """Shut NVML down; safe after a failed `open`."""
        self._devices = []
        self._session.close()


def _cuda_version_text(encoded: int | None) -> str | None:
    if encoded is None:
        return None
    return f"{encoded // 1000}.{encoded % 1000 // 10}"


class NvmlMemoryProbe:
    """A cheap memory-only reader for a fast peak sampler: one memory call per GPU per sample.

    It owns its own NVML `init` (reference counted), so it can run on its own thread beside an
    `NvmlCollector`. Readings are in GPU index order and use the same memory call (v2 or v1) as
    the collector, so a peak is comparable with `GpuSample.memory_used_bytes`.
    """

    name = "nvml-memory"
    role = None
    """Peaks for the recorder, not a source any panel shows."""

    def __init__(self, backend: NvmlBackend | None = None, interval_s: float = 0.02) -> None:
        self.interval_s = interval_s
        self._session = NvmlSession(backend)
        self._handles: list[Any] = []
        self._v2: list[bool] = []

    def open(self) -> None:
        """Initialize NVML and pick the memory call per GPU; raises `CollectorUnavailable`."""
        count = self._session.open()
        backend = self._session.backend
        self._handles, self._v2 = [], []
        for index in range(count):
            try:
                handle = backend.handle(index)
            except pynvml.NVMLError:
                # The 1 Hz collector reports why this GPU failed; the probe reads the others.
                handle = None
            self._handles.append(handle)
            self._v2.append(handle is not None and _supports_v2(backend, handle))

    def sample(self) -> tuple[int | None, ...]:
        """Used bytes per GPU; `None` for a GPU that could not be read this time."""
        backend = self._session.require()
        out: list[int | None] = []
        for handle, v2 in zip(self._handles, self._v2, strict=True):
            if handle is None:
                out.append(None)
                continue
            try:
                out.append(backend.memory_info(handle, v2).used)
            except GLOBAL_ERRORS as error:
                raise CollectorError(f"NVML stopped working: {error}", title="NVML") from error
            except pynvml.NVMLError:
                # The 1 Hz collector reports why this GPU failed; the probe only misses a reading.
                out.append(None)
        return tuple(out)

    def close(self) -> None:
        """Shut NVML down; safe after a failed `open`."""
        self._handles = []
        self._session.close()


def _supports_v2(backend: NvmlBackend, handle: Any) -> bool:
    try:
        backend.memory_info(handle, True)
    except _MEMORY_V1_FALLBACK:
        return False
    except pynvml.NVMLError:
        return True
    return True
