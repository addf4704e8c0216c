"""The fleet's rows: one per host and GPU, from gpuherd's series or dcgm-exporter's.

One query per refresh (`fleet_query`): every part is tagged with a `fleet_q` label and joined
with `or`, so the whole fleet costs one HTTP round trip. GPU figures come from the newest sample
within the look-back window (`last_over_time`), so a host that stopped answering keeps its last
figures on screen, marked stale; who uses a GPU and which tasks run there come from the newest
scrape only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from gpuherd.fleet.promql import Series
from gpuherd.present.format import MIB
from gpuherd.tasks.health import severity_of

"""dcgm-exporter reports framebuffer memory in MiB."""
MAX_RATIO = 1.0 + 1e-9
"""Utilization above this (as a ratio of 1) is impossible; the slack absorbs float rounding."""
SEVERITY_RANK = {"error": 0, "warning": 1, "info": 2}
MAX_GPU_INDEX_DIGITS = 9
"""A longer `gpu` label sorts as a name: int() refuses thousands of digits."""
AFTER_EVERY_INDEX = 10**MAX_GPU_INDEX_DIGITS
"""The sort place of a `gpu` label that is not an index: after every index it could be."""


def fleet_query(lookback_s: float) -> str:
    """The one PromQL expression a refresh evaluates."""
    window = f"[{max(1, round(lookback_s))}s]"
    parts = {
        "used": f"last_over_time(gpuherd_gpu_memory_used_bytes{window})",
        "total": f"last_over_time(gpuherd_gpu_memory_total_bytes{window})",
        "util": f"last_over_time(gpuherd_gpu_utilization_ratio{window})",
        "model": f"last_over_time(gpuherd_gpu_info{window})",
        "fresh": "timestamp(gpuherd_gpu_memory_used_bytes)",
        "user": "sum by (host, gpu, user) (gpuherd_process_gpu_memory_bytes)",
        "status": "gpuherd_task_status == 1",
        "finding": "gpuherd_task_findings > 0",
        "task_gpu": "gpuherd_task_gpu",
        "dcgm_used": f"last_over_time(DCGM_FI_DEV_FB_USED{window})",
        "dcgm_free": f"last_over_time(DCGM_FI_DEV_FB_FREE{window})",
        "dcgm_util": f"last_over_time(DCGM_FI_DEV_GPU_UTIL{window})",
        "dcgm_fresh": "timestamp(DCGM_FI_DEV_FB_USED)",
    }
    return " or ".join(
        f'label_replace({expr}, "fleet_q", "{name}", "", "")' for name, expr in parts.items()
    )


@dataclass(frozen=True, slots=True)
class FleetTask:
    """A task on a GPU: its short label, status and what its health shows."""

    name: str
    status: str | None
    findings: tuple[str, ...] = ()
    """Finding kinds, most serious first."""

    @property
    def severity(self) -> str | None:
        """The most serious finding's severity, `None` when healthy."""
        return severity_of(self.findings[0], False) if self.findings else None


@dataclass(frozen=True, slots=True)
class FleetRow:
    """One GPU of one host."""

    host: str
    gpu: str
    source: str
    """`gpuherd` or `dcgm` (the exporter that gave it)."""
    model: str | None = None
    used_bytes: float | None = None
    total_bytes: float | None = None
    util_ratio: float | None = None
    top_user: str | None = None
    top_user_bytes: float | None = None
    tasks: tuple[FleetTask, ...] = ()
    stale: bool = False
    age_s: float | None = None
    """How old the newest sample is; `None` when Prometheus holds no fresh one."""
    invalid: frozenset[str] = frozenset()
    """Figures Prometheus gave that cannot be (`memory`, `util`, `user`): shown as invalid,
    their values `None`."""

    @property
    def key(self) -> str:
        """The table's row key."""
        return f"{self.source}/{self.host}/{self.gpu}"

    @property
    def free_bytes(self) -> float | None:
        """Total minus used, when both are known."""
        if self.used_bytes is None or self.total_bytes is None:
            return None
        return max(0.0, self.total_bytes - self.used_bytes)


@dataclass(frozen=True, slots=True)
class FleetSnapshot:
    """What one refresh found, rows sorted: fresh ones by free memory, then the stale ones."""

    rows: tuple[FleetRow, ...]
    taken_at: float
    """Prometheus's evaluation time of the query."""
    query_s: float = 0.0
    """How long the query took (request, answer and decoding)."""
    hosts: int = field(init=False)
    stale_hosts: int = field(init=False)

    def __post_init__(self) -> None:
        hosts = {row.host for row in self.rows}
        stale = {row.host for row in self.rows if row.stale}
        object.__setattr__(self, "hosts", len(hosts))
        object.__setattr__(self, "stale_hosts", len(stale))


def sort_key(row: FleetRow) -> tuple[bool, float, str, int, str]:
    """Where to run now first: fresh before stale, most free memory first."""
    free = row.free_bytes
    gpu = (
        int(row.gpu)
        if len(row.gpu) <= MAX_GPU_INDEX_DIGITS and row.gpu.isascii() and row.gpu.isdigit()
        else AFTER_EVERY_INDEX
    )
    return (row.stale, -(free if free is not None else -1.0), row.host, gpu, row.gpu)


def build_rows(
    series: Iterable[Series], stale_after_s: float
) -> tuple[tuple[FleetRow, ...], float]:
    """The rows of one answer to `fleet_query`, sorted, and the answer's evaluation time."""
    parts: dict[str, list[Series]] = {}
    at = 0.0
    for s in series:
        parts.setdefault(s.labels.get("fleet_q", ""), []).append(s)
        at = max(at, s.at)
    rows = [*_gpuherd_rows(parts, stale_after_s), *_dcgm_rows(parts, stale_after_s)]
    return tuple(sorted((checked(row) for row in rows), key=sort_key)), at


def checked(row: FleetRow) -> FleetRow:
    """`row` with its impossible figures taken out and named in `invalid`.

    Prometheus holds what any exporter sent: a negative or NaN memory, more used than there
    is, a utilization above 100 % are a broken or hostile exporter's, never a GPU's, and are
    shown as invalid rather than as numbers. A figure merely missing stays `None` (N/A).
    """
    bad = set()
    used, total, util = row.used_bytes, row.total_bytes, row.util_ratio
    if (
        not _possible(used)
        or not _possible(total)
        or total == 0
        or (used is not None and total is not None and used > total)
    ):
        bad.add("memory")
        used = total = None
    if not _possible(util, MAX_RATIO):
        bad.add("util")
        util = None
    user_bytes = row.top_user_bytes
    if not _possible(user_bytes):
        bad.add("user")
        user_bytes = None
    if not bad:
        return row
    return replace(
        row,
        used_bytes=used,
        total_bytes=total,
        util_ratio=util,
        top_user_bytes=user_bytes,
        invalid=frozenset(bad),
    )


def _possible(value: float | None, most: float = math.inf) -> bool:
    """Missing, or a finite number from 0 to `most`."""
    return value is None or (math.isfinite(value) and 0 <= value <= most)


def _host(labels: dict[str, str], name: str) -> str:
    return labels.get(name) or labels.get("instance") or "?"


def _values(
    parts: dict[str, list[Series]], name: str, host_label: str, scale: float = 1.0
) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for s in parts.get(name, ()):
        key = (_host(s.labels, host_label), s.labels.get("gpu", "?"))
        out[key] = s.value * scale
    return out


def _ages(
    parts: dict[str, list[Series]], name: str, host_label: str
) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for s in parts.get(name, ()):
        key = (_host(s.labels, host_label), s.labels.get("gpu", "?"))
        out[key] = min(out.get(key, float("inf")), max(0.0, s.at - s.value))
    return out


def _gpuherd_rows(parts: dict[str, list[Series]], stale_after_s: float) -> list[FleetRow]:
    used, total = _values(parts, "used", "host"), _values(parts, "total", "host")
    util, ages = _values(parts, "util", "host"), _ages(parts, "fresh", "host")
    models = {
        (_host(s.labels, "host"), s.labels.get("gpu", "?")): s.labels.get("model")
        for s in parts.get("model", ())
    }
    users = _top_users(parts.get("user", ()))
    tasks = _tasks(parts)
    rows = []
    for key in sorted({*used, *total}):
        age = ages.get(key)
        user = users.get(key)
        rows.append(
            FleetRow(
                key[0],
                key[1],
                "gpuherd",
                models.get(key),
                used.get(key),
                total.get(key),
                util.get(key),
                user[0] if user else None,
                user[1] if user else None,
                tasks.get(key, ()),
                stale=age is None or age > stale_after_s,
                age_s=age,
            )
        )
    return rows


def _dcgm_rows(parts: dict[str, list[Series]], stale_after_s: float) -> list[FleetRow]:
    used = _values(parts, "dcgm_used", "Hostname", MIB)
    free = _values(parts, "dcgm_free", "Hostname", MIB)
    util = _values(parts, "dcgm_util", "Hostname", 0.01)
    ages = _ages(parts, "dcgm_fresh", "Hostname")
    models = {
        (_host(s.labels, "Hostname"), s.labels.get("gpu", "?")): s.labels.get("modelName")
        for s in parts.get("dcgm_used", ())
    }
    rows = []
    for key in sorted(used):
        age = ages.get(key)
        total = used[key] + free[key] if key in free else None
        rows.append(
            FleetRow(
                key[0],
                key[1],
                "dcgm",
                models.get(key),
                used[key],
                total,
                util.get(key),
                stale=age is None or age > stale_after_s,
                age_s=age,
            )
        )
    return rows


def _top_users(series: Iterable[Series]) -> dict[tuple[str, str], tuple[str, float]]:
    top: dict[tuple[str, str], tuple[str, float]] = {}
    for s in series:
        key = (_host(s.labels, "host"), s.labels.get("gpu", "?"))
        user = s.labels.get("user") or "?"
        if key not in top or s.value > top[key][1]:
            top[key] = (user, s.value)
    return top


def _tasks(parts: dict[str, list[Series]]) -> dict[tuple[str, str], tuple[FleetTask, ...]]:
    """Tasks by (host, GPU); a task whose GPU is unknown shows on its host's first GPU."""
    status = {
        (_host(s.labels, "host"), s.labels.get("task", "")): s.labels.get("status")
        for s in parts.get("status", ())
    }
    kinds: dict[tuple[str, str], list[str]] = {}
    for s in parts.get("finding", ()):
        kinds.setdefault((_host(s.labels, "host"), s.labels.get("task", "")), []).append(
            s.labels.get("kind", "other")
        )
    gpus: dict[tuple[str, str], list[str]] = {}
    for s in parts.get("task_gpu", ()):
        gpus.setdefault((_host(s.labels, "host"), s.labels.get("task", "")), []).append(
            s.labels.get("gpu", "?")
        )
    host_gpus: dict[str, list[str]] = {}
    for s in parts.get("used", ()):
        host_gpus.setdefault(_host(s.labels, "host"), []).append(s.labels.get("gpu", "?"))
    out: dict[tuple[str, str], list[FleetTask]] = {}
    for host, name in sorted({*status, *kinds}):
        found = sorted(
            kinds.get((host, name), ()),
            key=lambda k: (SEVERITY_RANK.get(severity_of(k, False), 3), k),
        )
        task = FleetTask(name, status.get((host, name)), tuple(found))
        first = sorted(host_gpus.get(host, ["?"]), key=lambda g: (len(g), g))[:1]
        for gpu in gpus.get((host, name)) or first:
            out.setdefault((host, gpu), []).append(task)
    return {key: tuple(tasks) for key, tasks in out.items()}
