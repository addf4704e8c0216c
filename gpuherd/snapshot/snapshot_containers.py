"""The containers part of `gpuherd snapshot`: one look at the engine, as JSON and as a table."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from collectors.base import CollectorError, CollectorUnavailable
from collectors.machine.container_gpu import ContainerGpuUse
from collectors.machine.containers import DockerCollector, NoEngine
from collectors.samples import ContainerSample, ContainerTick
from gpuherd.present import format as fmt

CONTAINER_WAIT_S = 2.5
"""Longest wait for the engine's second reading of each container (it reads once a second), so
that CPU percent and I/O rates are known; without running containers there is no wait."""


@dataclass(frozen=True, slots=True)
class ContainerLook:
    """What the snapshot saw of the container engine."""

    tick: ContainerTick | None = None
    error: str | None = None
    """Why there are no containers: no engine here, or it did not answer."""
    no_engine: bool = False
    """No engine's socket exists: not worth a line in the table."""


class ContainerProbe:
    """Starts reading the engine before the GPUs and the host are read, finishes after.

    The engine's stats readers need up to two seconds for two readings; they run while the
    rest of the snapshot is taken.
    """

    def __init__(
        self, collector: DockerCollector | None = None, wait_s: float = CONTAINER_WAIT_S
    ) -> None:
        self.collector = collector if collector is not None else DockerCollector()
        self.wait_s = wait_s
        self._started = time.monotonic()
        self._error: str | None = None
        self._no_engine = False

    def start(self) -> ContainerProbe:
        """Find the engine, list the containers and start their readers."""
        self._started = time.monotonic()
        try:
            self.collector.open()
            self.collector.sample()  # lists the containers and starts their readers
        except (CollectorUnavailable, CollectorError) as error:
            self._error, self._no_engine = error.msg, isinstance(error, NoEngine)
        return self

    def finish(self) -> ContainerLook:
        """Wait (bounded) for the readings, take the final tick and close the engine."""
        try:
            if self._error is not None:
                return ContainerLook(error=self._error, no_engine=self._no_engine)
            left = self.wait_s - (time.monotonic() - self._started)
            self.collector.wait_readings(2, max(0.0, left))
            return ContainerLook(tick=self.collector.sample())
        except CollectorError as error:
            return ContainerLook(error=error.msg)
        finally:
            self.collector.close()


def container_json(
    c: ContainerSample, use: ContainerGpuUse | None, gpus_known: bool
) -> dict[str, Any]:
    """One documented `containers[]` object (docs/snapshot-json.md)."""
    gpu_memory = use.memory_bytes if use is not None else (0 if gpus_known else None)
    return {
        "id": c.id,
        "short_id": c.short_id,
        "name": c.name,
        "image": c.image,
        "status": c.status,
        "started_at": c.started_at,
        "cpu_pct": _round(c.cpu_pct),
        "memory_used_bytes": c.memory_used_bytes,
        "memory_limit_bytes": c.memory_limit_bytes,
        "net_rx_bytes_per_s": _round(c.net_rx_bytes_per_s),
        "net_tx_bytes_per_s": _round(c.net_tx_bytes_per_s),
        "block_read_bytes_per_s": _round(c.block_read_bytes_per_s),
        "block_write_bytes_per_s": _round(c.block_write_bytes_per_s),
        "pids": c.pids,
        "gpu_devices": list(c.gpu_devices),
        "gpu_memory_bytes": gpu_memory,
        "gpu_pids": list(use.pids) if use is not None else [],
    }


def container_lines(
    tick: ContainerTick, uses: Mapping[str, ContainerGpuUse], gpus_known: bool
) -> list[str]:
    """The table form: one line per running container."""
    rows = [["CONTAINER", "IMAGE", "STATUS", "CPU", "MEM / LIMIT", "PIDS", "GPUS", "GPU MEM"]]
    for c in tick.containers:
        use = uses.get(c.short_id)
        gpu_memory = use.memory_bytes if use is not None else (0 if gpus_known else None)
        rows.append(
            [
                fmt.visible(c.name),
                fmt.visible(c.image),
                fmt.visible(c.status),
                fmt.fmt_pct(c.cpu_pct),
                f"{fmt.fmt_bytes(c.memory_used_bytes)} / {fmt.fmt_bytes(c.memory_limit_bytes)}",
                fmt.fmt_count(c.pids),
                ",".join(c.gpu_devices) or "-",
                fmt.fmt_bytes(gpu_memory),
            ]
        )
    return rows_text(rows, right={3, 5, 7})


def rows_text(rows: list[list[str]], right: set[int]) -> list[str]:
    """Columns padded to their widest cell, `right` ones right-aligned."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ).rstrip()
        for row in rows
    ]


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
