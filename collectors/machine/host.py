"""Host figures and details of GPU processes, through psutil."""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from collectors.roles import HOST
from collectors.samples import GpuTick, HostSample, ProcessInfo

VIRTUAL_NIC_PREFIXES = (
    "lo",
    "veth",
    "docker",
    "br-",
    "ifb",
    "virbr",
    "cni",
    "flannel",
    "cali",
    "vxlan",
    "tunl",
    "kube",
)
"""Interfaces that mirror traffic already counted on a real one (bridges, veth pairs, ifb)."""

_CONTAINER_ID = re.compile(
    r"(?:^|[/:-])(?:docker-|cri-containerd-|crio-|libpod-|containerd-)?([0-9a-f]{64})(?:\.scope)?$"
)


class PidWatch:
    """The set of pids whose host details are wanted; written by one thread, read by another.

    The UI or recorder calls `set` (or `set_from_tick`) after each NVML tick, and the host
    collector calls `get` on its own thread. The set is replaced whole, never mutated.
    `grew` is set whenever a pid not watched before arrives: the host collector waits on it
    between samples, so a new GPU process gets its user and command within milliseconds
    instead of at the next host tick (the first frame after start-up needs exactly that).
    """

    def __init__(self, pids: Iterable[int] = ()) -> None:
        self._lock = threading.Lock()
        self._pids: frozenset[int] = frozenset(pids)
        self.grew = threading.Event()

    def set(self, pids: Iterable[int]) -> None:
        """Replace the watched pids."""
        new = frozenset(pids)
        with self._lock:
            added = not new <= self._pids
            self._pids = new
        if added:
            self.grew.set()

    def set_from_tick(self, tick: GpuTick) -> None:
        """Watch every process any GPU reported in `tick`."""
        self.set(gpu_pids(tick))

    def get(self) -> frozenset[int]:
        """The watched pids right now."""
        with self._lock:
            return self._pids


def gpu_pids(tick: GpuTick) -> frozenset[int]:
    """Every pid listed on any GPU in `tick`."""
    return frozenset(p.pid for d in tick.devices for p in d.processes or ())


@dataclass(frozen=True, slots=True)
class HostCounters:
    """Cumulative counters read at one moment; two of them give rates."""

    at_s: float
    """`time.monotonic()` when read."""
    cpu_busy_s: float | None = None
    cpu_total_s: float | None = None
    disk_read_bytes: int | None = None
    disk_write_bytes: int | None = None
    net_rx_bytes: int | None = None
    net_tx_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class HostRates:
    """Rates between two `HostCounters`; all `None` when there is no previous reading."""

    cpu_pct: float | None = None
    disk_read_bytes_s: float | None = None
    disk_write_bytes_s: float | None = None
    net_rx_bytes_s: float | None = None
    net_tx_bytes_s: float | None = None


def counter_rate(prev: float | None, cur: float | None, elapsed_s: float) -> float | None:
    """Per-second rate of a cumulative counter; `None` if unknown or the counter went back."""
    if prev is None or cur is None or elapsed_s <= 0 or cur < prev:
        return None
    return (cur - prev) / elapsed_s


def busy_pct(
    prev_busy: float | None,
    prev_total: float | None,
    cur_busy: float | None,
    cur_total: float | None,
) -> float | None:
    """Share of CPU time spent busy between two readings, percent of all CPUs."""
    if prev_busy is None or prev_total is None or cur_busy is None or cur_total is None:
        return None
    total = cur_total - prev_total
    if total <= 0:
        return None
    return max(0.0, min(100.0, 100.0 * (cur_busy - prev_busy) / total))


def process_cpu_pct(
    prev_cpu_s: float | None, cur_cpu_s: float | None, elapsed_s: float
) -> float | None:
    """CPU use of one process, as `top` shows it: 100 is one full core, more with threads."""
    rate = counter_rate(prev_cpu_s, cur_cpu_s, elapsed_s)
    return None if rate is None else 100.0 * rate


def compute_rates(prev: HostCounters | None, cur: HostCounters) -> HostRates:
    """Rates from the previous and current counters (`None` everywhere on the first sample)."""
    if prev is None:
        return HostRates()
    dt = cur.at_s - prev.at_s
    return HostRates(
        cpu_pct=busy_pct(prev.cpu_busy_s, prev.cpu_total_s, cur.cpu_busy_s, cur.cpu_total_s),
        disk_read_bytes_s=counter_rate(prev.disk_read_bytes, cur.disk_read_bytes, dt),
        disk_write_bytes_s=counter_rate(prev.disk_write_bytes, cur.disk_write_bytes, dt),
        net_rx_bytes_s=counter_rate(prev.net_rx_bytes, cur.net_rx_bytes, dt),
        net_tx_bytes_s=counter_rate(prev.net_tx_bytes, cur.net_tx_bytes, dt),
    )


def cpu_busy_total(times: Any) -> tuple[float, float]:
    """Busy and total seconds from `psutil.cpu_times()`, the way psutil's own percent does it."""
    total = sum(times) - getattr(times, "guest", 0.0) - getattr(times, "guest_nice", 0.0)
    idle = times.idle + getattr(times, "iowait", 0.0)
    return total - idle, total


def nic_counted(name: str) -> bool:
    """Whether an interface's traffic counts toward the host rate (not loopback or virtual)."""
    return not name.startswith(VIRTUAL_NIC_PREFIXES)


def parse_container_id(cgroup_text: str) -> str | None:
    """Short (12-character) container id from the text of `/proc/<pid>/cgroup`, if any.

    Recognizes docker, containerd, CRI-O, podman and Kubernetes paths in cgroup v1 and v2, for
    example `0::/system.slice/docker-<64 hex>.scope` or
    `/kubepods/burstable/pod<uid>/<64 hex>`. Podman's `libpod-conmon-` monitor is not a container.
    """
    for line in cgroup_text.splitlines():
        path = line.split(":", 2)[-1].strip()
        for segment in reversed(path.split("/")):
            if "conmon" in segment:
                continue
            match = _CONTAINER_ID.search(segment)
            if match:
                return match.group(1)[:12]
    return None


def read_container_id(pid: int, proc_root: Path) -> str | None:
    """`parse_container_id` of one process; `None` when its cgroup file cannot be read."""
    try:
        text = (proc_root / str(pid) / "cgroup").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return parse_container_id(text)


def in_host_pid_namespace(proc_root: Path) -> bool:
    """Whether pids here are host pids, the ones NVML reports.

    In a container without the host PID namespace, `NSpid` in `/proc/self/status` lists one pid
    per nested namespace; a host pid from NVML would then name an unrelated local process.
    """
    try:
        status = (proc_root / "self" / "status").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            return len(line.split()[1:]) <= 1
    return True


@dataclass
class _Tracked:
    proc: psutil.Process
    container: str | None
    cpu_s: float | None = None
    at_s: float = 0.0


def _soft(call: Callable[[], Any]) -> Any:
    # Denied (hidepid, other users) and zombie reads lose one field; a vanished process
    # (NoSuchProcess) propagates so the caller drops it.
    try:
        return call()
    except (psutil.AccessDenied, psutil.ZombieProcess):
        return None


class HostCollector:
    """Samples host figures and the watched pids into a `HostSample` (a `Collector`).

    CPU percent and disk/network rates come from two readings, so they are `None` on the first
    sample; so is a process's CPU percent the first time it is seen. Memory "used" is total
    minus available, the memory other programs cannot have.
    """

    name = "host"
    role = HOST

    def __init__(
        self,
        pids: PidWatch | None = None,
        interval_s: float = 1.0,
        proc_root: str | os.PathLike[str] = "/proc",
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pids = pids if pids is not None else PidWatch()
        self.interval_s = interval_s
        self.wakeup = self.pids.grew
        """Cuts the loop's pause short (`collectors.loop.run_collector`): new pids to detail."""
        self.proc_root = Path(proc_root)
        self._clock = clock
        self._monotonic = monotonic
        self._prev: HostCounters | None = None
        self._tracked: dict[int, _Tracked] = {}
        self.pids_visible = True
        """False inside a PID namespace of its own: GPU pids then cannot be looked up here."""

    def open(self) -> None:
        """Check whether NVML's pids can be looked up here; psutil needs nothing opened."""
        self.pids_visible = in_host_pid_namespace(self.proc_root)

    def wake(self) -> None:
        """End the pause between samples now (the owner is stopping the loop)."""
        self.wakeup.set()

    def close(self) -> None:
        """Forget cached processes and counters."""
        self._tracked.clear()
        self._prev = None

    @property
    def tracked_pids(self) -> frozenset[int]:
        """Pids with a cached process object (for CPU percent across samples)."""
        return frozenset(self._tracked)

    def sample(self) -> HostSample:
        """Read host figures and the watched processes; never raises for a vanished process."""
        taken_at = self._clock()
        counters = self._read_counters()
        rates = compute_rates(self._prev, counters)
        self._prev = counters
        memory = psutil.virtual_memory()
        swap = psutil.swap_memory()
        load = os.getloadavg()
        return HostSample(
            taken_at=taken_at,
            cpu_pct=rates.cpu_pct,
            cpu_count=psutil.cpu_count(),
            mem_used_bytes=memory.total - memory.available,
            mem_total_bytes=memory.total,
            swap_used_bytes=swap.used,
            swap_total_bytes=swap.total,
            load_1m=load[0],
            load_5m=load[1],
            load_15m=load[2],
            disk_read_bytes_s=rates.disk_read_bytes_s,
            disk_write_bytes_s=rates.disk_write_bytes_s,
            net_rx_bytes_s=rates.net_rx_bytes_s,
            net_tx_bytes_s=rates.net_tx_bytes_s,
            processes=self._read_processes(counters.at_s),
        )

    def _read_counters(self) -> HostCounters:
        busy, total = cpu_busy_total(psutil.cpu_times())
        disk = psutil.disk_io_counters()
        nics = [c for name, c in psutil.net_io_counters(pernic=True).items() if nic_counted(name)]
        return HostCounters(
            at_s=self._monotonic(),
            cpu_busy_s=busy,
            cpu_total_s=total,
            disk_read_bytes=None if disk is None else disk.read_bytes,
            disk_write_bytes=None if disk is None else disk.write_bytes,
            net_rx_bytes=sum(c.bytes_recv for c in nics) if nics else None,
            net_tx_bytes=sum(c.bytes_sent for c in nics) if nics else None,
        )

    def _read_processes(self, now_s: float) -> tuple[ProcessInfo, ...]:
        wanted = self.pids.get() if self.pids_visible else frozenset()
        for pid in set(self._tracked) - wanted:
            del self._tracked[pid]
        infos = []
        for pid in sorted(wanted):
            tracked = self._track(pid)
            info = None if tracked is None else self._read_process(pid, tracked, now_s)
            if info is None:
                self._tracked.pop(pid, None)
            else:
                infos.append(info)
        return tuple(infos)

    def _track(self, pid: int) -> _Tracked | None:
        tracked = self._tracked.get(pid)
        # is_running() also catches a pid reused by a new process since the last sample.
        if tracked is not None and tracked.proc.is_running():
            return tracked
        try:
            proc = psutil.Process(pid)
        except psutil.Error:
            return None
        tracked = _Tracked(proc, read_container_id(pid, self.proc_root))
        self._tracked[pid] = tracked
        return tracked

    def _read_process(self, pid: int, tracked: _Tracked, now_s: float) -> ProcessInfo | None:
        proc = tracked.proc
        try:
            with proc.oneshot():
                user = _soft(proc.username)
                cmdline = _soft(proc.cmdline)
                name = None if cmdline else _soft(proc.name)
                times = _soft(proc.cpu_times)
                memory = _soft(proc.memory_info)
                started = _soft(proc.create_time)
        except psutil.NoSuchProcess:
            return None
        cpu_s = None if times is None else times.user + times.system
        cpu_pct = process_cpu_pct(tracked.cpu_s, cpu_s, now_s - tracked.at_s)
        tracked.cpu_s, tracked.at_s = cpu_s, now_s
        command = " ".join(cmdline) if cmdline else (f"[{name}]" if name else None)
        return ProcessInfo(
            pid=pid,
            user=user,
            command=command,
            cpu_pct=cpu_pct,
            rss_bytes=None if memory is None else memory.rss,
            started_at=started,
            container=tracked.container,
        )
