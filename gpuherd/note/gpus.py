"""The GPU sentences of a verification note: which cards a run used, and how much of them."""

from __future__ import annotations

import re
from typing import Any

from gpuherd.summary.summary import GIB

MARKETED_GB = {"NVIDIA H200": 141, "NVIDIA H100 NVL": 94, "NVIDIA H20": 96}
"""Cards whose name does not carry their size and whose usable memory reads far from it."""


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


def used_gpus(data: dict[str, Any]) -> tuple[list[dict[str, Any]], dict[int, int], bool]:
    """The GPUs the run used, the memory attributed to it per GPU index, and whether known.

    With `run_peaks` the recording attributed memory to the command itself. Without them the
    session does not say which GPUs were the run's (another user's job on the next card looks
    the same): the GPUs busy in the window stand in, each with its whole-card figures.
    """
    gpus = {g["index"]: g for g in data["gpus"]}
    run_peaks = {
        p["gpu"]: p["peak_bytes"]
        for p in data["session"]["run_peaks"]
        if p.get("gpu") in gpus and isinstance(p.get("peak_bytes"), int)
    }
    if run_peaks:
        return [gpus[i] for i in sorted(run_peaks)], run_peaks, True
    busy = [g for g in data["gpus"] if (g["util_p95_pct"] or 0) > 0]
    chosen = busy or list(data["gpus"])
    return (
        chosen,
        {g["index"]: g["peak_mem_bytes"] for g in chosen if isinstance(g["peak_mem_bytes"], int)},
        False,
    )


def _models(chosen: list[dict[str, Any]]) -> str:
    """`NVIDIA H200 (141GB VRAM)`, `2x NVIDIA H200 (141GB VRAM each)`, or every model named."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for gpu in chosen:
        groups.setdefault(gpu["name"], []).append(gpu)
    parts = []
    for name, same in groups.items():
        size = card_size_gb(name, same[0]["mem_total_bytes"])
        each = " each" if len(same) > 1 else ""
        vram = f" ({size}GB VRAM{each})" if size else ""
        count = f"{len(same)}x " if len(same) > 1 else ""
        parts.append(f"{count}{name}{vram}")
    return " and ".join(parts)


def _pct(peak: int, gpu: dict[str, Any]) -> str:
    total = gpu["mem_total_bytes"]
    return f" ({100 * peak / total:.0f}%)" if isinstance(total, (int, float)) and total else ""


def _util(gpus: list[dict[str, Any]]) -> str:
    means = [g["util_mean_pct"] for g in gpus if g["util_mean_pct"] is not None]
    p95s = [g["util_p95_pct"] for g in gpus if g["util_p95_pct"] is not None]
    if not means:
        return ""
    text = f", {sum(means) / len(means):.0f}% GPU utilization"
    return text + (f" (p95 {max(p95s):.0f}%)" if p95s else "")


def gpu_sentences(data: dict[str, Any]) -> tuple[str, str]:
    """`(where, usage)`: the cards the run used, and its VRAM and utilization on them."""
    chosen, peaks, attributed = used_gpus(data)
    if not chosen:
        return "", ""
    where = _models(chosen)
    if not peaks:
        return where, ""
    if not attributed and len(chosen) > 1:
        # Which of these GPUs were the run's is not known: one figure per GPU, never a mean
        # that would take in another user's card.
        per_gpu = "; ".join(
            f"GPU {g['index']} {peaks[g['index']] / GIB:.1f}GB VRAM{_pct(peaks[g['index']], g)}"
            f"{_util([g])}"
            for g in chosen
            if g["index"] in peaks
        )
        return where, (
            "GPU usage per GPU (the session does not say which GPUs the run used): " + per_gpu
        )
    index = max(peaks, key=lambda i: peaks[i])
    gpu = next(g for g in chosen if g["index"] == index)
    per = " per GPU" if len(chosen) > 1 else ""
    return (
        where,
        f"GPU usage: {peaks[index] / GIB:.1f}GB VRAM{_pct(peaks[index], gpu)}{per}{_util(chosen)}",
    )
