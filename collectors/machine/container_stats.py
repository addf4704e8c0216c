"""Pure functions over the container engine's JSON: stats readings, rates, GPUs, times.

No I/O and no `docker` import: `collectors.machine.containers` feeds these the decoded JSON of the
Engine API (`/containers/{id}/stats` and `/containers/{id}/json`), and tests feed them recorded
JSON from `tests/data/docker/`. The arithmetic follows the `docker stats` command (docker/cli:
`cli/command/container/stats_helpers.go`) so the two show the same numbers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from collectors.samples import ContainerSample

_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")
_NVIDIA_CDI = re.compile(r"^nvidia\.com/gpu=")


@dataclass(frozen=True, slots=True)
class StatsReading:
    """The cumulative counters and gauges of one stats frame of one container."""

    read_s: float
    """Unix seconds when the engine read the counters (the frame's `read`)."""
    cpu_total_ns: int | None = None
    """CPU time the container used since it started, nanoseconds."""
    system_cpu_ns: int | None = None
    """CPU time of the whole host (all cores) at the same moment, nanoseconds."""
    online_cpus: int | None = None
    memory_used_bytes: int | None = None
    memory_limit_bytes: int | None = None
    net_rx_bytes: int | None = None
    net_tx_bytes: int | None = None
    block_read_bytes: int | None = None
    block_write_bytes: int | None = None
    pids: int | None = None


@dataclass(frozen=True, slots=True)
class ContainerRates:
    """What two consecutive readings of one container give; `None` where one is missing."""

    cpu_pct: float | None = None
    net_rx_bytes_per_s: float | None = None
    net_tx_bytes_per_s: float | None = None
    block_read_bytes_per_s: float | None = None
    block_write_bytes_per_s: float | None = None


def parse_engine_time(text: object) -> float | None:
    """Unix seconds of an RFC 3339 time the engine writes (nanoseconds allowed).

    The engine's zero time (`0001-01-01T00:00:00Z`: never started, or a stats frame of a
    container that is not running) and anything unreadable are `None`.
    """
    if not isinstance(text, str):
        return None
    match = _TIME.match(text)
    if match is None:
        return None
    whole, fraction, zone = match.groups()
    try:
        stamp = datetime.fromisoformat(whole + ("+00:00" if zone == "Z" else zone))
    except ValueError:
        return None
    if stamp.year <= 1:
        return None
    seconds = stamp.astimezone(timezone.utc).timestamp()
    return seconds + (int(fraction[:9].ljust(9, "0")) / 1e9 if fraction else 0.0)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _get(data: object, *keys: str) -> object:
    for key in keys:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def memory_used(memory_stats: object) -> int | None:
    """Usage without the inactive page cache, as `docker stats` computes it.

    cgroup v1 reports `total_inactive_file` (and `inactive_file`), v2 `inactive_file`; the first
    one present and below the usage is taken off it, in the docker command's order.
    """
    usage = _int(_get(memory_stats, "usage"))
    if usage is None:
        return None
    stats = _get(memory_stats, "stats")
    for key in ("total_inactive_file", "inactive_file"):
        inactive = _int(_get(stats, key))
        if inactive is not None and inactive < usage:
            return usage - inactive
    return usage


def _network_totals(networks: object) -> tuple[int | None, int | None]:
    if not isinstance(networks, Mapping) or not networks:
        return None, None
    rx = [_int(_get(n, "rx_bytes")) for n in networks.values()]
    tx = [_int(_get(n, "tx_bytes")) for n in networks.values()]
    return (
        None if None in rx else sum(v for v in rx if v is not None),
        None if None in tx else sum(v for v in tx if v is not None),
    )


def _block_totals(blkio: object) -> tuple[int | None, int | None]:
    entries = _get(blkio, "io_service_bytes_recursive")
    if not isinstance(entries, Sequence) or isinstance(entries, (str, bytes)):
        return None, None  # null: the engine could not read them (not running, Windows)
    read = write = 0
    for entry in entries:
        op, value = str(_get(entry, "op") or "").lower(), _int(_get(entry, "value"))
        if value is None:
            continue
        if op == "read":
            read += value
        elif op == "write":
            write += value
    return read, write


def parse_stats(frame: Mapping[str, Any]) -> StatsReading | None:
    """One stats frame as a reading; `None` for the empty frame of a container not running."""
    read_s = parse_engine_time(frame.get("read"))
    if read_s is None:
        return None
    cpu = frame.get("cpu_stats")
    rx, tx = _network_totals(frame.get("networks"))
    block_read, block_write = _block_totals(frame.get("blkio_stats"))
    memory = frame.get("memory_stats")
    return StatsReading(
        read_s=read_s,
        cpu_total_ns=_int(_get(cpu, "cpu_usage", "total_usage")),
        system_cpu_ns=_int(_get(cpu, "system_cpu_usage")),
        online_cpus=_online_cpus(cpu),
        memory_used_bytes=memory_used(memory),
        memory_limit_bytes=_int(_get(memory, "limit")) or None,
        net_rx_bytes=rx,
        net_tx_bytes=tx,
        block_read_bytes=block_read,
        block_write_bytes=block_write,
        pids=_int(_get(frame, "pids_stats", "current")),
    )


def _online_cpus(cpu: object) -> int | None:
    online = _int(_get(cpu, "online_cpus"))
    if online:
        return online
    percpu = _get(cpu, "cpu_usage", "percpu_usage")  # engines before API 1.27
    return len(percpu) if isinstance(percpu, list) and percpu else None


def counter_rate(prev: int | None, cur: int | None, elapsed_s: float) -> float | None:
    """Per-second rate of a cumulative counter; `None` if unknown or the counter went back."""
    if prev is None or cur is None or elapsed_s <= 0 or cur < prev:
        return None
    return (cur - prev) / elapsed_s


def cpu_pct(prev: StatsReading, cur: StatsReading) -> float | None:
    """CPU use between two readings, 100 per busy core, exactly as `docker stats` computes it.

    The container's CPU time over the host's CPU time, times the number of cores. Without the
    host's figure (some engines omit it), the container's CPU time over the wall time between
    the two readings.
    """
    if prev.cpu_total_ns is None or cur.cpu_total_ns is None:
        return None
    used = cur.cpu_total_ns - prev.cpu_total_ns
    if used < 0:
        return None  # the container restarted between the readings
    if (
        prev.system_cpu_ns is not None
        and cur.system_cpu_ns is not None
        and cur.online_cpus
        and cur.system_cpu_ns > prev.system_cpu_ns
    ):
        return 100.0 * used / (cur.system_cpu_ns - prev.system_cpu_ns) * cur.online_cpus
    rate = counter_rate(prev.cpu_total_ns, cur.cpu_total_ns, cur.read_s - prev.read_s)
    return None if rate is None else 100.0 * rate / 1e9


def container_rates(prev: StatsReading | None, cur: StatsReading | None) -> ContainerRates:
    """Rates from the previous and current readings (`None` everywhere without both)."""
    if prev is None or cur is None:
        return ContainerRates()
    dt = cur.read_s - prev.read_s
    return ContainerRates(
        cpu_pct=cpu_pct(prev, cur),
        net_rx_bytes_per_s=counter_rate(prev.net_rx_bytes, cur.net_rx_bytes, dt),
        net_tx_bytes_per_s=counter_rate(prev.net_tx_bytes, cur.net_tx_bytes, dt),
        block_read_bytes_per_s=counter_rate(prev.block_read_bytes, cur.block_read_bytes, dt),
        block_write_bytes_per_s=counter_rate(prev.block_write_bytes, cur.block_write_bytes, dt),
    )


def _count_devices(count: int) -> tuple[str, ...]:
    # moby gives `--gpus N` the first N indices (daemon/nvidia_linux.go, countToDevices).
    return ("all",) if count < 0 else tuple(str(i) for i in range(count))


def _split_devices(value: str) -> tuple[str, ...]:
    ids = tuple(_NVIDIA_CDI.sub("", part.strip()) for part in value.split(",") if part.strip())
    if any(i in ("none", "void") for i in ids):
        return ()
    return ("all",) if "all" in ids else ids


def gpu_devices(inspect: Mapping[str, Any]) -> tuple[str, ...]:
    """The GPUs a container was given, from its inspect JSON.

    `HostConfig.DeviceRequests` with the `gpu` capability (`--gpus all`, `--gpus 2`,
    `--gpus '"device=0,GPU-..."'`) decide, as they override the environment inside the
    container. Without them, `NVIDIA_VISIBLE_DEVICES` counts only under NVIDIA's runtime: CUDA
    images set it to `all` in their environment, and it means nothing under plain runc.
    """
    found: list[str] = []
    requested = False
    for request in _list(_get(inspect, "HostConfig", "DeviceRequests")):
        capabilities = _list(_get(request, "Capabilities"))
        driver = str(_get(request, "Driver") or "")
        if not (any("gpu" in _list(c) for c in capabilities) or driver in ("nvidia", "cdi")):
            continue
        requested = True
        ids = _get(request, "DeviceIDs")
        if isinstance(ids, list) and ids:
            found += _split_devices(",".join(str(i) for i in ids))
        else:
            count = _get(request, "Count")
            found += _count_devices(count if isinstance(count, int) else 0)
    if requested:
        return ("all",) if "all" in found else tuple(dict.fromkeys(found))
    runtime = str(_get(inspect, "HostConfig", "Runtime") or "")
    if "nvidia" not in runtime:
        return ()
    for entry in _list(_get(inspect, "Config", "Env")):
        if isinstance(entry, str) and entry.startswith("NVIDIA_VISIBLE_DEVICES="):
            return _split_devices(entry.partition("=")[2])
    return ()


def container_sample(
    listed: Mapping[str, Any],
    started_at: float | None,
    gpus: tuple[str, ...],
    prev: StatsReading | None,
    cur: StatsReading | None,
) -> ContainerSample:
    """A container's sample from its listing entry, its inspect facts and its last two readings."""
    cid = str(listed.get("Id") or "")
    names = listed.get("Names") or ()
    name = str(names[0]).lstrip("/") if names else cid[:12]
    rates = container_rates(prev, cur)
    return ContainerSample(
        id=cid,
        short_id=cid[:12],
        name=name,
        image=str(listed.get("Image") or ""),
        status=str(listed.get("State") or ""),
        started_at=started_at,
        cpu_pct=rates.cpu_pct,
        memory_used_bytes=None if cur is None else cur.memory_used_bytes,
        memory_limit_bytes=None if cur is None else cur.memory_limit_bytes,
        net_rx_bytes_per_s=rates.net_rx_bytes_per_s,
        net_tx_bytes_per_s=rates.net_tx_bytes_per_s,
        block_read_bytes_per_s=rates.block_read_bytes_per_s,
        block_write_bytes_per_s=rates.block_write_bytes_per_s,
        pids=None if cur is None else cur.pids,
        gpu_devices=gpus,
    )
