"""Summary output: `summary.md`, `summary.json` and the short text printed after recording."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from collectors.session.session_format import SUMMARY_JSON_FILE, SUMMARY_MD_FILE
from gpuherd.common.safe_files import Directory
from gpuherd.present.format import fmt_local_time as fmt_time
from gpuherd.present.format import fmt_num, fmt_size, visible, visible_lines
from gpuherd.present.format import fmt_span as fmt_duration
from gpuherd.present.format import fmt_whole_pct as fmt_pct
from gpuherd.summary import charts
from gpuherd.summary.frames import SessionFrames, load_frames
from gpuherd.summary.slurm_summary import slurm_lines
from gpuherd.summary.summary import Summary, summarize_frames, write_atomic
from parsers.vocabulary import SUMMARY_METRICS


def _command_text(command: Any) -> str:
    if isinstance(command, list):
        return " ".join(str(part) for part in command)
    return str(command) if command else ""


def _ending(session: dict[str, Any], joint: str) -> str:
    """How the command ended, after `joint`: its exit code, or the --duration limit."""
    code = session["exit_code"]
    if session.get("stopped_at_duration"):
        told = "" if code is None else f" (exit code {code})"
        return f"{joint}stopped at the --duration limit{told}"
    return "" if code is None else f"{joint}exit code {code}"


def _header(data: dict[str, Any]) -> list[str]:
    s = data["session"]
    lines = ["# gpuherd session summary", ""]
    lines.append(f"- Host: {s['host'] or '-'}; driver {s['driver'] or '-'}; {s['tool'] or ''}")
    state = "" if s["complete"] else " (recording did not end cleanly)"
    lines.append(f"- Recorded: {fmt_time(s['started_at'])}, {fmt_duration(s['duration_s'])}{state}")
    if s["command"]:
        lines.append(
            f"- Command: `{_command_text(s['command'])}`" + (_ending(s, "; ") or "; exit code -")
        )
    window = data["window"]
    if window["source"] == "command":
        lines.append(
            f"- Utilization and statistics cover the command's run "
            f"({fmt_duration((window['end'] or 0) - (window['start'] or 0))})."
        )
    return lines + [""]


def _gpu_section(data: dict[str, Any]) -> list[str]:
    if not data["gpus"]:
        return ["## GPUs", "", "No GPU figures were recorded.", ""]
    lines = [
        "## GPUs",
        "",
        "| GPU | name | peak VRAM | of total | at | util mean | util p95 | max temp | max power |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for g in data["gpus"]:
        at = "-" if g["peak_at_elapsed_s"] is None else f"+{fmt_duration(g['peak_at_elapsed_s'])}"
        temp = "-" if g["temp_max_c"] is None else f"{g['temp_max_c']:.0f} C"
        power = "-" if g["power_max_w"] is None else f"{g['power_max_w']:.0f} W"
        lines.append(
            f"| {g['index']} | {g['name']} | {fmt_size(g['peak_mem_bytes'])} | "
            f"{fmt_pct(g['peak_mem_pct'])} | {at} | {fmt_pct(g['util_mean_pct'])} | "
            f"{fmt_pct(g['util_p95_pct'])} | {temp} | {power} |"
        )
    lines.append("")
    for peak in data["session"]["run_peaks"]:
        lines.append(
            f"- The command's own peak on GPU {peak.get('gpu')}: "
            f"{fmt_size(peak.get('peak_bytes'))} ({peak.get('method')})."
        )
    return lines + ([""] if data["session"]["run_peaks"] else [])


def _container_section(data: dict[str, Any]) -> list[str]:
    containers = data.get("containers") or []
    if not containers:
        return []
    lines = [
        "## Containers",
        "",
        "| container | image | peak GPU memory | at | CPU mean | CPU p95 | CPU max | peak memory |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in containers:
        at = c["gpu_mem_peak_at_elapsed_s"]
        lines.append(
            f"| {c['name']} | {c['image'] or '-'} | {fmt_size(c['gpu_mem_peak_bytes'])} | "
            f"{'-' if at is None else '+' + fmt_duration(at)} | "
            f"{fmt_pct(c['cpu_mean_pct'])} | {fmt_pct(c['cpu_p95_pct'])} | "
            f"{fmt_pct(c['cpu_max_pct'])} | {fmt_size(c['mem_peak_bytes'])} |"
        )
    return lines + [""]


def _task_section(data: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for task in data["tasks"]:
        lines += [f"### Task `{task['task']}`", ""]
        extent = [f"duration {fmt_duration(task['duration_s'])}"]
        extent += [
            span for span in (_span("step", task["steps"]), _span("epoch", task["epochs"])) if span
        ]
        if task["steps_per_s"]:
            extent.append(f"{task['steps_per_s']:.3g} steps/s")
        lines += [
            "; ".join(extent),
            "",
            "| metric | first | last | best | count |",
            "|---|---|---|---|---|",
        ]
        for name, m in task["metrics"].items():
            best = "-" if m["best"] is None else f"{fmt_num(m['best'])} ({m['best_is']})"
            lines.append(
                f"| {name} | {fmt_num(m['first'])} | {fmt_num(m['last'])} | {best} | {m['count']} |"
            )
        lines.append("")
    return ["## Tasks", ""] + lines if lines else []


def _span(name: str, span: dict[str, Any]) -> str:
    """`steps 120 to 1200`, `epoch 5`, or nothing when the log gave none.

    A summary.json of an older version may hold "nan" for none: that is nothing too.
    """
    first, last = span.get("first"), span.get("last")
    if not isinstance(last, (int, float)) or isinstance(last, bool):
        return ""
    if not isinstance(first, (int, float)) or first == last:
        return f"{name} {fmt_num(last)}"
    return f"{name}s {fmt_num(first)} to {fmt_num(last)}"


def _findings_section(data: dict[str, Any]) -> list[str]:
    lines = []
    for f in data["findings"]["by_kind"]:
        evidence = f["evidence"].replace("`", "'")
        lines.append(
            f"- {f['task']}: **{f['finding']}** x{f['count']} (first at line "
            f"{f['first_line']}): `{evidence}`"
        )
    for e in data["events"]["notable"]:
        detail = e.get("msg") or e.get("signal") or ""
        lines.append(f"- {e.get('kind')}: {e.get('source', '')} {detail}".rstrip())
    return ["## Health findings and events", "", *lines, ""] if lines else []


def _charts_section(frames: SessionFrames) -> list[str]:
    lines = []
    for title, chart in (("VRAM", charts.vram_chart(frames)), ("Loss", charts.loss_chart(frames))):
        if chart:
            lines += [f"### {title}", "", "```text", chart, "```", ""]
    return ["## Charts", "", *lines] if lines else []


def _stats_section(data: dict[str, Any]) -> list[str]:
    if not data["stats"]:
        return []
    lines = [
        "## Statistics",
        "",
        "| key | count | mean | min | max | p95 |",
        "|---|---|---|---|---|---|",
    ]
    for s in data["stats"]:
        lines.append(
            f"| {s['key']} | {s['count']} | {fmt_num(s['mean'])} | {fmt_num(s['min'])}"
            f" | {fmt_num(s['max'])} | {fmt_num(s['p95'])} |"
        )
    return lines + [""]


def render_markdown(summary: Summary, frames: SessionFrames) -> str:
    """The whole `summary.md`."""
    data = summary.data
    lines = _header(data) + _gpu_section(data) + _container_section(data) + _task_section(data)
    lines += _findings_section(data)
    lines += [visible(line) for line in slurm_lines(data)]
    # Each line quotes what a session holds (task names, log lines, container and command
    # names): shown, one line each, whether printed (--md) or read with `cat summary.md`.
    lines = [visible(line) for line in lines] + [
        visible_lines(line) for line in _charts_section(frames)
    ]
    lines += [visible(line) for line in _stats_section(data)]
    if data["warnings"]:
        lines += ["## Reader notes", "", *[visible(f"- {w}") for w in data["warnings"]], ""]
    return "\n".join(lines)


def render_json(summary: Summary) -> str:
    """The whole `summary.json` (strict JSON: non-finite numbers are written as strings)."""
    return json.dumps(summary.data, indent=2, allow_nan=False) + "\n"


def render_short(summary: Summary) -> str:
    """A few lines for the terminal at the end of `--record` and from `gpuherd summarize`."""
    data = summary.data
    s = data["session"]
    lines = [f"session {s['directory']}: {fmt_duration(s['duration_s'])}" + _ending(s, ", ")]
    for g in data["gpus"]:
        lines.append(
            f"  GPU {g['index']} {g['name']}: peak {fmt_size(g['peak_mem_bytes'])} "
            f"({fmt_pct(g['peak_mem_pct'])}), util mean {fmt_pct(g['util_mean_pct'])}"
            f" p95 {fmt_pct(g['util_p95_pct'])}"
        )
    for peak in s["run_peaks"]:
        lines.append(
            f"  command peak on GPU {peak.get('gpu')}: {fmt_size(peak.get('peak_bytes'))}"
            f" ({peak.get('method')})"
        )
    for c in data.get("containers") or []:
        lines.append(
            f"  container {c['name']}: peak GPU memory {fmt_size(c['gpu_mem_peak_bytes'])}"
            f", CPU mean {fmt_pct(c['cpu_mean_pct'])} max {fmt_pct(c['cpu_max_pct'])}"
        )
    for task in data["tasks"]:
        trend = [
            f"{name} {fmt_num(m['first'])} -> {fmt_num(m['last'])}"
            for name, m in task["metrics"].items()
            if name in SUMMARY_METRICS
        ]
        lines.append(
            f"  task {task['task']}: " + ("; ".join(trend) or f"{len(task['metrics'])} metrics")
        )
    if data["findings"]["total"]:
        kinds = ", ".join(f"{f['finding']} x{f['count']}" for f in data["findings"]["by_kind"])
        lines.append(f"  health findings: {kinds}")
    for warning in data["warnings"]:
        lines.append(f"  note: {warning}")
    return "\n".join(visible(line) for line in lines)  # one shown line each


def write_summary(directory: str | os.PathLike[str], opened: Directory | None = None) -> Summary:
    """Summarize `directory` and write `summary.json` and `summary.md` into it, atomically.

    With `opened` (the recorder's own descriptor of it), the files go there, not by path.
    """
    frames = load_frames(directory)
    summary = summarize_frames(frames)
    root = Path(directory)
    write_atomic(root / SUMMARY_JSON_FILE, render_json(summary), opened=opened)
    write_atomic(root / SUMMARY_MD_FILE, render_markdown(summary, frames), opened=opened)
    return summary
