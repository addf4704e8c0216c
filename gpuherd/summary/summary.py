"""Run summaries from a session directory alone: per-GPU peaks, per-task metrics, statistics."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np
import pandas as pd

from collectors.session.session_format import EVENT, META, SUMMARY_SCHEMA_VERSION
from gpuherd.common.safe_files import Directory, UnsafeFileError, swappable_path_problem
from gpuherd.present.format import GIB
from gpuherd.summary.containers import container_summary
from gpuherd.summary.frames import SessionFrames, load_frames
from gpuherd.summary.slurm_summary import slurm_summary
from gpuherd.summary.stats import (
    STAT_COLUMNS,
    in_window,
    stat_key,
    stats_frame,
    stats_records,
)
from parsers.vocabulary import direction

__all__ = ["STAT_COLUMNS", "Summary", "direction", "stat_key", "summarize", "summarize_frames"]

MAX_LISTED_FINDINGS = 50


@dataclass(frozen=True)
class Summary:
    """A session's summary: JSON-ready `data` and the statistics frame (STYLE section 6)."""

    data: dict[str, Any]
    stats: pd.DataFrame
    """One row per (scope, metric), index `'<scope>/<metric> (<unit>)'`, columns
    `count, mean, min, max, p95, unit`."""


def _num(value: Any) -> Any:
    """A float for JSON: integers stay integers, NaN and infinities become strings."""
    if value is None:
        return None
    value = float(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return int(value) if value.is_integer() and abs(value) < 2**53 else value


def _window(frames: SessionFrames) -> dict[str, Any]:
    """When the task ran: between the `start` and `exit` events, else the whole session."""
    starts = [e["t"] for e in frames.events if e.get("kind") == EVENT.start and _is_num(e.get("t"))]
    exits = [e["t"] for e in frames.events if e.get("kind") == EVENT.exit and _is_num(e.get("t"))]
    t = frames.gpu["t"]
    first = float(t.min()) if len(t) else _meta_num(frames.meta, META.started_at)
    last = float(t.max()) if len(t) else _meta_num(frames.meta, META.ended_at)
    if starts and frames.meta.get(META.command):
        return {"start": min(starts), "end": max(exits) if exits else last, "source": "command"}
    return {"start": first, "end": last, "source": "session"}


def _is_num(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _meta_num(meta: dict[str, Any], key: str) -> float | None:
    value = meta.get(key)
    return float(value) if _is_num(value) else None


def _gpu_frame(frames: SessionFrames) -> pd.DataFrame:
    gpu = frames.gpu
    gpu = gpu.assign(mem_best=np.fmax(gpu["mem_peak_bytes"], gpu["mem_used_bytes"]))
    return gpu[gpu["gpu"].notna()]


def gpu_summary(frames: SessionFrames, window: dict[str, Any]) -> list[dict[str, Any]]:
    """Per GPU: peak VRAM (bytes, GiB, % of total, when), utilization in the window, maxima."""
    gpu = _gpu_frame(frames)
    if gpu.empty:
        return []
    by = gpu.groupby("gpu")
    total = by["mem_total_bytes"].max()
    temp, power = by["temp_c"].max(), by["power_w"].max()
    valid = gpu[gpu["mem_best"].notna()]
    peak_rows = valid.loc[valid.groupby("gpu")["mem_best"].idxmax()].set_index("gpu")
    busy = in_window(gpu, window).groupby("gpu")["util_gpu_pct"]
    mean, p95 = busy.mean(), busy.quantile(0.95)
    started = frames.meta.get(META.started_at)
    out = []
    for index in sorted(by.groups):
        uuid, name = frames.gpu_names.get(int(index), ("", ""))
        peak = peak_rows["mem_best"].get(index)
        at = peak_rows["t"].get(index)
        tot = total.get(index)
        pct = None if peak is None or not tot or math.isnan(tot) else 100.0 * peak / tot
        out.append(
            {
                "index": int(index),
                "uuid": uuid,
                "name": name,
                "mem_total_bytes": _num(_nan_none(tot)),  # unknown on every row: null
                "peak_mem_bytes": _num(peak),
                "peak_mem_gib": None if peak is None else round(peak / GIB, 3),
                "peak_mem_pct": None if pct is None else round(pct, 2),
                "peak_at": _num(at),
                "peak_at_elapsed_s": (
                    None if at is None or not _is_num(started) else round(float(at) - started, 3)
                ),
                "util_mean_pct": _round(mean.get(index)),
                "util_p95_pct": _round(p95.get(index)),
                "temp_max_c": _round(temp.get(index)),
                "power_max_w": _round(power.get(index)),
            }
        )
    return out


def _round(value: Any, digits: int = 2) -> Any:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return _num(round(float(value), digits))


def task_summary(frames: SessionFrames) -> list[dict[str, Any]]:
    """Per task: first/last/best of each metric, steps and epochs covered, duration, rate."""
    metrics = frames.metrics
    if metrics is None or metrics.empty:
        return []
    metrics = metrics[metrics["task"].notna() & metrics["metric"].notna()]
    per_metric = _metric_table(metrics)
    out = []
    for task, rows in metrics.groupby("task", sort=False, observed=True):
        t, step, epoch = rows["t"], rows["step"], rows["epoch"]
        entry: dict[str, Any] = {
            "task": str(task),
            "first_t": _num(t.min()),
            "last_t": _num(t.max()),
            "duration_s": _round(t.max() - t.min(), 3),
            "steps": _span(step),
            "epochs": _span(epoch),
            "steps_per_s": _steps_per_s(rows),
            "metrics": per_metric.get(str(task), {}),
        }
        entry["throughput"] = {
            m: {"mean": v["mean"], "last": v["last"]}
            for m, v in entry["metrics"].items()
            if m.startswith("throughput/")
        }
        out.append(entry)
    return out


def _span(counter: pd.Series) -> dict[str, Any]:
    """Lowest and highest of a step or epoch column; both `None` (not NaN) when no row has one."""
    known = counter.dropna()
    if known.empty:
        return {"first": None, "last": None}
    return {"first": _num(known.min()), "last": _num(known.max())}


def _steps_per_s(rows: pd.DataFrame) -> float | None:
    stepped = rows[rows["step"].notna()]
    if len(stepped) < 2:
        return None
    first, last = stepped.loc[stepped["t"].idxmin()], stepped.loc[stepped["t"].idxmax()]
    elapsed = float(last["t"] - first["t"])
    if elapsed <= 0 or last["step"] <= first["step"]:
        return None
    return round(float(last["step"] - first["step"]) / elapsed, 4)


def _metric_table(metrics: pd.DataFrame) -> dict[str, dict[str, dict[str, Any]]]:
    keys = ["task", "metric"]
    first = metrics.drop_duplicates(keys, keep="first").set_index(keys)
    last = metrics.drop_duplicates(keys, keep="last").set_index(keys)
    finite = metrics[np.isfinite(metrics["value"])]
    grouped = finite.groupby(keys, observed=True)["value"]
    agg = grouped.agg(["count", "min", "max", "mean"])
    total = metrics.groupby(keys, observed=True)["value"].size()
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for (task, metric), row in first.iterrows():
        stats = agg.loc[(task, metric)] if (task, metric) in agg.index else None
        best_is = direction(str(metric))
        best = None
        if stats is not None and best_is is not None:
            best = stats["min"] if best_is == "min" else stats["max"]
        count = int(total.loc[(task, metric)])
        out.setdefault(str(task), {})[str(metric)] = {
            "first": _num(row["value"]),
            "last": _num(last.loc[(task, metric), "value"]),
            "best": _num(best),
            "best_is": best_is,
            "first_step": _num(_nan_none(row["step"])),
            "last_step": _num(_nan_none(last.loc[(task, metric), "step"])),
            "count": count,
            "nonfinite": count - (0 if stats is None else int(stats["count"])),
            "mean": None if stats is None else _num(stats["mean"]),
        }
    return out


def _nan_none(value: Any) -> Any:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def findings_summary(frames: SessionFrames) -> dict[str, Any]:
    """Health findings from `events.jsonl`: counts per (task, kind) and the first ones listed."""
    found = [e for e in frames.events if e.get("kind") == EVENT.finding]
    counts: dict[tuple[str, str], dict[str, Any]] = {}
    for event in found:
        key = (str(event.get("task", "")), str(event.get("finding", "")))
        if key not in counts:
            counts[key] = {
                "task": key[0],
                "finding": key[1],
                "count": 0,
                "first_line": event.get("line"),
                "first_t": event.get("t"),
                "evidence": str(event.get("evidence", ""))[:300],
            }
        counts[key]["count"] += 1
    listed = [
        {k: e.get(k) for k in ("t", "task", "line", "finding", "evidence")}
        for e in found[:MAX_LISTED_FINDINGS]
    ]
    return {"total": len(found), "by_kind": list(counts.values()), "listed": listed}


def lifecycle_summary(frames: SessionFrames) -> dict[str, Any]:
    """Counts of lifecycle events and the reasons of the ones that matter for a verification."""
    counts: dict[str, int] = {}
    notable = []
    for event in frames.events:
        kind = str(event.get("kind", ""))
        if kind == EVENT.finding:
            continue
        counts[kind] = counts.get(kind, 0) + 1
        if kind in (
            EVENT.collector_failed,
            EVENT.collector_unavailable,
            EVENT.disk_full,
            EVENT.signal,
            EVENT.write_failed,
            EVENT.log_dropped,
        ):
            notable.append({k: v for k, v in event.items() if k != "t"} | {"t": event.get("t")})
    return {"counts": counts, "notable": notable[:MAX_LISTED_FINDINGS]}


def _session(frames: SessionFrames, window: dict[str, Any]) -> dict[str, Any]:
    meta = frames.meta
    started, ended = _meta_num(meta, META.started_at), _meta_num(meta, META.ended_at)
    last_t = window["end"]
    end = ended if ended is not None else last_t
    exits = [e for e in frames.events if e.get("kind") == EVENT.exit]
    exit_code = meta.get(META.exit_code)
    if exit_code is None and exits:
        exit_code = exits[-1].get("exit_code")
    return {
        "directory": str(frames.directory),
        "host": meta.get(META.host),
        "tool": meta.get(META.tool),
        "driver": meta.get(META.driver),
        "started_at": started,
        "ended_at": ended,
        "complete": ended is not None,
        "duration_s": _duration(started, end),
        "readings": len(frames.gpu) + (0 if frames.metrics is None else len(frames.metrics)),
        "interval_s": meta.get(META.interval_s),
        "peak_interval_s": meta.get(META.peak_interval_s),
        "command": meta.get(META.command),
        "exit_code": exit_code,
        # the person's own --duration ended the command: a limit reached, not a failure
        "stopped_at_duration": any(
            e.get("kind") == EVENT.duration_reached and e.get("sent") for e in frames.events
        ),
        "run_peaks": meta.get(META.run_peaks) or [],
    }


def _duration(started: float | None, end: float | None) -> float | None:
    """Seconds from `started` to `end`; `None` when either is unknown or the end comes first."""
    if started is None or end is None or end < started:
        return None
    return round(end - started, 3)


def summarize(directory: str | os.PathLike[str]) -> Summary:
    """Summarize a session directory; raises `SessionError` / `SessionFormatError`."""
    return summarize_frames(load_frames(directory))


def summarize_frames(frames: SessionFrames) -> Summary:
    """Summarize already-loaded frames (the benchmark times loading and summarizing apart)."""
    # A log's 1e308 losses add up past the largest float: the mean is then "inf", as it
    # should read, without numpy's warning on stderr.
    with np.errstate(over="ignore", invalid="ignore"):
        return _summarize(frames)


def _summarize(frames: SessionFrames) -> Summary:
    window = _window(frames)
    stats = stats_frame(frames, _gpu_frame(frames), window)
    data = {
        "schema": SUMMARY_SCHEMA_VERSION,
        "session": _session(frames, window),
        "window": window,
        "gpus": gpu_summary(frames, window),
        "tasks": task_summary(frames),
        "containers": container_summary(frames, window),
        "findings": findings_summary(frames),
        "events": lifecycle_summary(frames),
        "stats": stats_records(stats),
        "warnings": list(frames.warnings),
    }
    slurm = slurm_summary(Path(frames.directory), frames.meta)
    if slurm is not None:  # a session without Slurm keeps its summary as it was
        data["slurm"] = slurm
    return Summary(data, stats)


def write_atomic(
    path: Path,
    text: str,
    newline: str | None = "",
    mode: int | None = None,
    opened: Directory | None = None,
) -> None:
    """Write `text` to `path` through a temporary file in the same directory and `os.replace`.

    An interrupt (SIGINT) or a full disk leaves either the old file or the new one, never a
    partial file, and removes the temporary file. `mode` sets the new file's permission bits.
    The temporary name is unpredictable and created new, never through a link, and the rename
    is made relative to the directory's descriptor: a session directory may be one other users
    write to (`gpuherd.common.safe_files`). A directory whose path another user could swap for a
    link
    meanwhile is refused (`UnsafeFileError`, an `OSError`). With `opened` (the directory
    already open and checked), the file is written there, whatever the path names now.
    """
    if newline not in ("", "\n"):
        text = text.replace("\n", os.linesep if newline is None else newline)
    if opened is not None:
        opened.write_atomic(path.name, text.encode("utf-8"), mode=mode)
        return
    with Directory(path.parent) as directory:
        problem = swappable_path_problem(directory)
        if problem is not None:
            raise UnsafeFileError(f"refusing to write {path.name}: {problem}")
        directory.write_atomic(path.name, text.encode("utf-8"), mode=mode)
