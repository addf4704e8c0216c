"""The verification note of an example: composed from a run summary, written into example.yaml."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from typing import Any

from collectors.session_format import EVENT
from gpuherd.note.yaml_edit import YamlEditError
from gpuherd.summary.summary import GIB, Summary
from parsers.vocabulary import LOSS_NAMES, SUMMARY_METRICS

BLOCK = "verification"
MARKETED_GB = {"NVIDIA H200": 141, "NVIDIA H100 NVL": 94, "NVIDIA H20": 96}
"""Cards whose name does not carry their size and whose usable memory reads far from it."""
MAX_TREND = 4
FINDING_TEXT = {"oom": "CUDA out of memory", "nan": "NaN loss", "inf": "Inf loss",
                "traceback": "a traceback in the log", "stalled": "loss not falling",
                "download": "downloads on this run (cache miss)"}


class NoteError(YamlEditError):
    """The note cannot be written; the example file is left untouched."""


@dataclass(frozen=True)
class Note:
    """What goes under `verification:`."""

    last_verified: dt.date
    text: str

    def values(self) -> dict[str, Any]:
        """The keys and values to set."""
        return {"last_verified": self.last_verified, "last_verification_note": self.text}


def card_size_gb(name: str, total_bytes: Any) -> int | None:
    """The card's memory as people name it: `80GB` from the name, a known size, or rounded GB."""
    found = re.search(r"(\d+)\s*GB", name or "")
    if found:
        return int(found.group(1))
    if name in MARKETED_GB:
        return MARKETED_GB[name]
    if isinstance(total_bytes, (int, float)) and total_bytes > 0:
        return round(total_bytes / 1e9)
    return None


def _used_gpus(data: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[int, int]]:
    """The GPUs the run used and, per GPU index, the memory attributed to the run."""
    gpus = {g["index"]: g for g in data["gpus"]}
    run_peaks = {p["gpu"]: p["peak_bytes"] for p in data["session"]["run_peaks"]
                 if p.get("gpu") in gpus and isinstance(p.get("peak_bytes"), int)}
    if run_peaks:
        return [gpus[i] for i in sorted(run_peaks)], run_peaks
    busy = [g for g in data["gpus"] if (g["util_p95_pct"] or 0) > 0]
    chosen = busy or list(data["gpus"])
    return chosen, {g["index"]: g["peak_mem_bytes"] for g in chosen
                    if isinstance(g["peak_mem_bytes"], int)}


def _fmt(value: Any) -> str:
    if isinstance(value, str):
        return value
    return f"{value:.3g}" if isinstance(value, float) else f"{value:,}"


def _gpu_sentences(data: dict[str, Any]) -> tuple[str, str]:
    chosen, peaks = _used_gpus(data)
    if not chosen:
        return "", ""
    first = chosen[0]
    size = card_size_gb(first["name"], first["mem_total_bytes"])
    vram = f" ({size}GB VRAM{' each' if len(chosen) > 1 else ''})" if size else ""
    count = f"{len(chosen)}x " if len(chosen) > 1 else ""
    where = f"{count}{first['name']}{vram}"
    if not peaks:
        return where, ""
    index = max(peaks, key=lambda i: peaks[i])
    gpu = next(g for g in chosen if g["index"] == index)
    peak = peaks[index]
    total = gpu["mem_total_bytes"]
    pct = f" ({100 * peak / total:.0f}%)" if isinstance(total, (int, float)) and total else ""
    per = " per GPU" if len(chosen) > 1 else ""
    usage = f"GPU usage: {peak / GIB:.1f}GB VRAM{pct}{per}"
    means = [g["util_mean_pct"] for g in chosen if g["util_mean_pct"] is not None]
    p95s = [g["util_p95_pct"] for g in chosen if g["util_p95_pct"] is not None]
    if means:
        usage += f", {sum(means) / len(means):.0f}% GPU utilization"
        if p95s:
            usage += f" (p95 {max(p95s):.0f}%)"
    return where, usage


def _main_task(data: dict[str, Any]) -> dict[str, Any] | None:
    tasks = data["tasks"]
    for task in tasks:
        if task["task"] == "command":
            return task
    return max(tasks, key=lambda t: sum(m["count"] for m in t["metrics"].values()), default=None)


def _extent(task: dict[str, Any]) -> str:
    parts = []
    first_epoch, last_epoch = task["epochs"]["first"], task["epochs"]["last"]
    last_step = task["steps"]["last"]
    if isinstance(last_epoch, (int, float)):
        if isinstance(last_epoch, int) and first_epoch == 0:
            parts.append(f"{last_epoch + 1} epoch{'s' if last_epoch else ''}")
        else:
            parts.append(f"{_fmt(last_epoch)} epochs")
    if isinstance(last_step, (int, float)):
        steps = f"{_fmt(last_step)} steps"
        parts.append(f"({steps})" if parts else steps)
    return "Trained " + " ".join(parts) if parts else ""


def _trend(task: dict[str, Any]) -> str:
    metrics = task["metrics"]
    names = [n for n in SUMMARY_METRICS if n in metrics][:MAX_TREND]
    losses = [n for n in names if n in LOSS_NAMES]
    out = []
    for name in names:
        label = "loss" if name in losses and len(losses) == 1 else name
        out.append(f"{label} {_fmt(metrics[name]['first'])} -> {_fmt(metrics[name]['last'])}")
    return ", ".join(out)


def _limitations(data: dict[str, Any]) -> list[str]:
    out = []
    for found in data["findings"]["by_kind"]:
        text = FINDING_TEXT.get(found["finding"], found["finding"])
        line = f" at line {found['first_line']}" if found.get("first_line") else ""
        out.append(f"{text} ({found['task']}{line})")
    session = data["session"]
    code = session["exit_code"]
    if isinstance(code, int) and code != 0:
        out.append(f"the command exited with code {code}")
    for event in data["events"]["notable"]:
        if event.get("kind") == EVENT.collector_unavailable:
            out.append(f"no {event.get('source', 'collector')} data")
        elif event.get("kind") == EVENT.disk_full:
            out.append("the recording stopped early: disk full")
    if not session["complete"]:
        out.append("the recording did not end cleanly")
    return list(dict.fromkeys(out))


def compose(summary: Summary) -> Note:
    """The note for a summarized run, in the shape of the project's example notes."""
    data = summary.data
    started = data["session"]["started_at"]
    if not isinstance(started, (int, float)):
        raise NoteError("the session has no start time (meta.json `started_at`)")
    where, usage = _gpu_sentences(data)
    task = _main_task(data)
    code = data["session"]["exit_code"]
    failed = isinstance(code, int) and code != 0
    kind = "training run" if task and task["metrics"] else "run"
    on = f" on {where}" if where else ""
    sentences = [f"Training run{on} failed" if failed else f"Verified {kind}{on}"]
    if usage:
        sentences.append(usage)
    if task:
        training = "; ".join(p for p in (_extent(task), _trend(task)) if p)
        if training:
            sentences.append(training)
    limits = _limitations(data)
    if limits:
        sentences.append("Known limitations: " + "; ".join(limits))
    date = dt.datetime.fromtimestamp(started).date()
    return Note(date, ". ".join(sentences) + ".")
