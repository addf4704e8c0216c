"""`gpuherd snapshot [--json]`: one sample of every GPU and the host, printed once."""

from __future__ import annotations

import json
import shutil
import socket
import sys
import time
from dataclasses import dataclass
from typing import Any

from collectors.base import CollectorError, CollectorUnavailable
from collectors.machine.container_gpu import container_label, container_names, gpu_use_by_container
from collectors.machine.host import HostCollector, PidWatch, gpu_pids
from collectors.machine.nvml import NvmlBackend, NvmlCollector
from collectors.samples import GpuProcess, GpuSample, GpuTick, HostSample, ProcessInfo
from gpuherd import __version__
from gpuherd.common import exit_codes
from gpuherd.common.options import SnapshotOptions
from gpuherd.present import format as fmt
from gpuherd.snapshot.snapshot_containers import (
    ContainerLook,
    ContainerProbe,
    container_json,
    container_lines,
)
from gpuherd.snapshot.snapshot_slurm import (
    SlurmLook,
    add_process_jobs,
    look_at_slurm,
    process_job,
    slurm_json,
    slurm_lines,
)

SCHEMA = 1
"""Version of the JSON layout in docs/snapshot-json.md; bumped only for incompatible changes."""

WINDOW_S = 0.25
"""Host CPU percent and disk/network rates are measured over this window."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One NVML tick and one host sample taken together."""

    hostname: str
    host: HostSample
    tick: GpuTick | None = None
    gpu_error: str | None = None
    """Why there is no tick: the driver is missing (`driver_missing`) or no GPU could be read."""
    driver_missing: bool = False
    pids_visible: bool = True
    """False when gpuherd runs in its own PID namespace and cannot look up GPU pids."""
    containers: ContainerLook = ContainerLook(error="containers were not looked at")
    slurm: SlurmLook = SlurmLook()

    @property
    def container_names(self) -> dict[str, str]:
        """Short container id -> name, for the containers the engine listed."""
        return container_names(self.containers.tick)

    @property
    def gpus_known(self) -> bool:
        """Whether some GPU listed its processes (a container without any then holds 0)."""
        return self.tick is not None and any(d.processes is not None for d in self.tick.devices)

    @property
    def exit_code(self) -> int:
        """0 all read; 1 NVML works but a GPU (or all) failed; 3 no driver or no GPU."""
        if self.driver_missing:
            return exit_codes.NO_SOURCE
        if self.tick is None or any(d.error for d in self.tick.devices):
            return exit_codes.FAILED
        return exit_codes.OK


def take_snapshot(
    backend: NvmlBackend | None = None,
    window_s: float = WINDOW_S,
    proc_root: str = "/proc",
    hostname: str | None = None,
    containers: ContainerProbe | None = None,
    slurm: bool = True,
) -> Snapshot:
    """Read every GPU once, then the host twice `window_s` apart (for CPU percent and rates).

    The container engine is read around both (`containers`, by default the machine's engine):
    listed first, its stats read last, once the engine has given two readings or
    `CONTAINER_WAIT_S` has passed.
    """
    probe = (containers if containers is not None else ContainerProbe()).start()
    collector = NvmlCollector(backend=backend)
    tick, error, missing = None, None, False
    try:
        collector.open()
        tick = collector.sample()
    except CollectorUnavailable as unavailable:
        error, missing = unavailable.msg, True
    except CollectorError as failure:
        error = failure.msg
    finally:
        collector.close()
    host = HostCollector(PidWatch(gpu_pids(tick) if tick else ()), proc_root=proc_root)
    host.open()
    host.sample()
    if window_s > 0:
        time.sleep(window_s)
    sample = host.sample()
    host.close()
    jobs = look_at_slurm(gpu_pids(tick) if tick else ()) if slurm else SlurmLook()
    return Snapshot(
        hostname or socket.gethostname(),
        sample,
        tick,
        error,
        missing,
        host.pids_visible,
        probe.finish(),
        jobs,
    )


def run(args: SnapshotOptions, backend: NvmlBackend | None = None) -> int:
    """Print one snapshot as a table or JSON; the exit code is `Snapshot.exit_code`."""
    snap = take_snapshot(backend)
    if snap.gpu_error:
        print(fmt.visible(f"gpuherd: {snap.gpu_error}"), file=sys.stderr)
        if snap.exit_code == exit_codes.NO_SOURCE:  # no GPU at all: the demo shows one
            print("gpuherd: run `gpuherd --demo` to see gpuherd without a GPU", file=sys.stderr)
    if args.json:
        print(json.dumps(to_json(snap), indent=2))
    else:
        # A terminal's width cuts long lines; a file or a pipe gets them whole.
        width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
        print(render_table(snap, width=width))
    return snap.exit_code


# JSON.


def to_json(snap: Snapshot) -> dict[str, Any]:
    """The documented JSON object (docs/snapshot-json.md); every key is always present."""
    tick = snap.tick
    details = {p.pid: p for p in snap.host.processes}
    names = snap.container_names
    uses = gpu_use_by_container(tick, snap.host.processes)
    listed = snap.containers.tick
    gpus = [_gpu_json(d, details, names) for d in tick.devices] if tick else []
    add_process_jobs(gpus, snap.slurm)
    return {
        "schema": SCHEMA,
        "tool": f"gpuherd {__version__}",
        "hostname": snap.hostname,
        "taken_at": tick.taken_at if tick else snap.host.taken_at,
        "driver_version": tick.driver_version if tick else None,
        "nvml_version": tick.nvml_version if tick else None,
        "cuda_driver_version": tick.cuda_driver_version if tick else None,
        "gpu_error": snap.gpu_error,
        "processes_visible": snap.pids_visible,
        "gpus": gpus,
        "host": _host_json(snap.host),
        "container_engine": listed.engine if listed else None,
        "containers_error": snap.containers.error,
        "containers": [
            container_json(c, uses.get(c.short_id), snap.gpus_known) for c in listed.containers
        ]
        if listed
        else [],
        "slurm": slurm_json(snap.slurm, tick),
    }


def _gpu_json(
    gpu: GpuSample, details: dict[int, ProcessInfo], names: dict[str, str]
) -> dict[str, Any]:
    return {
        "index": gpu.index,
        "uuid": gpu.uuid,
        "name": gpu.name,
        "error": gpu.error,
        "memory_used_bytes": gpu.memory_used_bytes,
        "memory_total_bytes": gpu.memory_total_bytes,
        "memory_reserved_bytes": gpu.memory_reserved_bytes,
        "memory_used_pct": _round(fmt.pct_of(gpu.memory_used_bytes, gpu.memory_total_bytes)),
        "memory_unattributed_bytes": gpu.unattributed_memory_bytes,
        "gpu_util_pct": gpu.gpu_util_pct,
        "mem_util_pct": gpu.mem_util_pct,
        "temperature_c": gpu.temperature_c,
        "power_w": gpu.power_w,
        "power_limit_w": gpu.power_limit_w,
        "sm_clock_mhz": gpu.sm_clock_mhz,
        "mem_clock_mhz": gpu.mem_clock_mhz,
        "fan_pct": gpu.fan_pct,
        "pstate": gpu.pstate,
        "ecc_errors_corrected": gpu.ecc_errors_corrected,
        "ecc_errors_uncorrected": gpu.ecc_errors_uncorrected,
        "mig_mode": gpu.mig_mode,
        "processes": None
        if gpu.processes is None
        else [_process_json(p, details.get(p.pid), names) for p in gpu.processes],
    }


def _process_json(
    proc: GpuProcess, info: ProcessInfo | None, names: dict[str, str]
) -> dict[str, Any]:
    container = info.container if info else None
    return {
        "pid": proc.pid,
        "kind": proc.kind,
        "used_memory_bytes": proc.used_memory_bytes,
        "user": info.user if info else None,
        "command": info.command if info else None,
        "cpu_pct": _round(info.cpu_pct) if info else None,
        "rss_bytes": info.rss_bytes if info else None,
        "started_at": info.started_at if info else None,
        "container": container,
        "container_name": names.get(container) if container else None,
    }


def _host_json(host: HostSample) -> dict[str, Any]:
    return {
        "cpu_pct": _round(host.cpu_pct),
        "cpu_count": host.cpu_count,
        "mem_used_bytes": host.mem_used_bytes,
        "mem_total_bytes": host.mem_total_bytes,
        "swap_used_bytes": host.swap_used_bytes,
        "swap_total_bytes": host.swap_total_bytes,
        "load_1m": _round(host.load_1m),
        "load_5m": _round(host.load_5m),
        "load_15m": _round(host.load_15m),
        "disk_read_bytes_s": _round(host.disk_read_bytes_s),
        "disk_write_bytes_s": _round(host.disk_write_bytes_s),
        "net_rx_bytes_s": _round(host.net_rx_bytes_s),
        "net_tx_bytes_s": _round(host.net_tx_bytes_s),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


# Table.


def render_table(snap: Snapshot, width: int | None = 120) -> str:
    """The readable form: a header line, a GPU table, a process table and the host figures.

    Lines longer than `width` are cut with `…`; `None` cuts none (output that is no terminal).
    """
    tick = snap.tick
    head = [
        f"host {snap.hostname}",
        fmt.fmt_timestamp(tick.taken_at if tick else snap.host.taken_at),
    ]
    if tick:
        head += [
            f"driver {fmt.fmt_text(tick.driver_version)}",
            f"CUDA {fmt.fmt_text(tick.cuda_driver_version)}",
        ]
    lines = ["  ".join(head), ""]
    if tick is None:
        lines += [f"GPUs: {fmt.NA} (see the message on stderr)", ""]
    else:
        lines += _gpu_table(tick) + [""] + _process_lines(snap, tick, width) + [""]
    jobs = slurm_lines(snap.slurm, tick)
    lines += [_clip(line, width) for line in jobs] + [""] if jobs else []
    lines += _host_lines(snap.host)
    look = snap.containers
    if look.tick is not None and look.tick.containers:
        uses = gpu_use_by_container(tick, snap.host.processes)
        lines += [""] + [
            _clip(line, width) for line in container_lines(look.tick, uses, snap.gpus_known)
        ]
    elif look.error and not look.no_engine:
        lines += ["", f"containers: {look.error}"]
    # Names (processes, users, containers, GPUs) are escaped where the columns are built, so
    # they stay aligned; this pass makes sure no line carries a control character whatever
    # its source.
    return "\n".join(fmt.visible(line) for line in lines)


def _gpu_table(tick: GpuTick) -> list[str]:
    rows = [["GPU", "NAME", "VRAM", "VRAM%", "UTIL", "MEM UTIL", "TEMP", "POWER", "SM CLOCK"]]
    for d in tick.devices:
        if d.error:
            rows.append(
                [
                    str(d.index),
                    fmt.visible(d.name),
                    fmt.fmt_gib_pair(None, d.memory_total_bytes),
                    f"error: {d.error}",
                ]
            )
            continue
        rows.append(
            [
                str(d.index),
                fmt.visible(d.name),
                fmt.fmt_gib_pair(d.memory_used_bytes, d.memory_total_bytes),
                fmt.fmt_pct(fmt.pct_of(d.memory_used_bytes, d.memory_total_bytes)),
                fmt.fmt_pct(d.gpu_util_pct),
                fmt.fmt_pct(d.mem_util_pct),
                fmt.fmt_temp(d.temperature_c),
                fmt.fmt_power_pair(d.power_w, d.power_limit_w),
                fmt.fmt_mhz(d.sm_clock_mhz),
            ]
        )
    return _align(rows, right={0, 2, 3, 4, 5, 6, 7, 8})


def _process_lines(snap: Snapshot, tick: GpuTick, width: int | None) -> list[str]:
    details = {p.pid: p for p in snap.host.processes}
    rows = [["GPU", "PID", "USER", "GPU MEM", "CPU", "RSS", "ELAPSED", "COMMAND"]]
    notes: list[str] = []
    now = snap.host.taken_at
    for d in tick.devices:
        if d.error:
            continue
        if d.processes is None:
            notes.append(
                f"GPU {d.index}: the driver would not list processes; "
                f"{fmt.fmt_bytes(d.memory_used_bytes)} in use"
            )
            continue
        for p in d.processes:
            info = details.get(p.pid) or ProcessInfo(p.pid)
            rows.append(
                [
                    str(d.index),
                    str(p.pid),
                    fmt.fmt_text(info.user),
                    fmt.fmt_bytes(p.used_memory_bytes),
                    fmt.fmt_pct(info.cpu_pct),
                    fmt.fmt_bytes(info.rss_bytes),
                    fmt.fmt_elapsed(info.started_at, now),
                    process_job(snap.slurm, p.pid) + _command(info, snap.container_names),
                ]
            )
        hidden = d.unattributed_memory_bytes
        if hidden:
            notes.append(
                f"GPU {d.index}: {fmt.fmt_bytes(hidden)} in use by processes not "
                "visible here (or held by the driver)"
            )
    if not snap.pids_visible:
        notes.append(
            "process details unavailable: gpuherd runs in its own PID namespace "
            "(a container without the host's)"
        )
    table = _align(rows, right={0, 1, 3, 4, 5, 6}) if len(rows) > 1 else ["no GPU processes"]
    return [_clip(line, width) for line in table] + notes


def _command(info: ProcessInfo, names: dict[str, str]) -> str:
    text = fmt.fmt_text(info.command)
    label = container_label(info.container, names)
    return f"{text} [{fmt.visible(label)}]" if label else text


def _host_lines(host: HostSample) -> list[str]:
    cores = "" if host.cpu_count is None else f" of {host.cpu_count} cores"
    loads = " ".join(fmt.fmt_number(v) for v in (host.load_1m, host.load_5m, host.load_15m))
    return [
        f"CPU {fmt.fmt_pct(host.cpu_pct)}{cores}   "
        f"RAM {fmt.fmt_gib_pair(host.mem_used_bytes, host.mem_total_bytes)}   "
        f"swap {fmt.fmt_gib_pair(host.swap_used_bytes, host.swap_total_bytes)}   load {loads}",
        f"disk read {fmt.fmt_rate(host.disk_read_bytes_s)} "
        f"write {fmt.fmt_rate(host.disk_write_bytes_s)}   "
        f"net rx {fmt.fmt_rate(host.net_rx_bytes_s)} tx {fmt.fmt_rate(host.net_tx_bytes_s)}",
    ]


def _align(rows: list[list[str]], right: set[int]) -> list[str]:
    # A short row (a GPU in error) lets its last cell run on instead of widening a column.
    n = len(rows[0])
    widths = [
        max((len(r[i]) for r in rows if i < len(r) - (len(r) < n)), default=0) for i in range(n)
    ]
    out = []
    for row in rows:
        cells = [
            c
            if i == len(row) - 1 and len(row) < n
            else c.rjust(widths[i])
            if i in right
            else c.ljust(widths[i])
            for i, c in enumerate(row)
        ]
        out.append("  ".join(cells).rstrip())
    return out


def _clip(line: str, width: int | None) -> str:
    return line if width is None or len(line) <= width else line[: max(1, width - 1)] + "…"
