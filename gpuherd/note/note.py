"""The verification note of an example: composed from a run summary, written into example.yaml."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from collectors.session.session_format import EVENT
from gpuherd.note.gpus import card_size_gb, gpu_sentences
from gpuherd.note.yaml_edit import YamlEditError
from gpuherd.present.format import fmt_num
from gpuherd.summary.summary import Summary
from parsers.vocabulary import LOSS_NAMES, SUMMARY_METRICS

__all__ = ["BLOCK", "Note", "NoteError", "card_size_gb", "compose"]

BLOCK = "verification"
MAX_TREND = 4
FINDING_TEXT = {
    "oom": "CUDA out of memory",
    "nan": "NaN loss",
    "inf": "Inf loss",
    "traceback": "a traceback in the log",
    "stalled": "loss not falling",
    "download": "downloads on this run (cache miss)",
}
SOURCE_TEXT = {
    "nvml": "no GPU readings (the NVIDIA driver could not be used)",
    "nvml-memory": "no fast VRAM peak readings (peaks are those of the 1 s GPU readings)",
    "host": "no host readings (CPU, memory)",
    "docker": "no container readings (the Docker engine could not be reached)",
    "writers": "no search for the processes that write the logs",
    "discovery": "no search for new logs (--log globs and --watch directories)",
}
"""What a missing source costs the note, in the words of its reader (sources by name)."""
TOTAL_EPOCH_METRICS = ("total_epochs", "max_epochs", "num_epochs", "num_train_epochs", "epochs")
"""Metrics that state how many epochs the run was asked for."""
TOTAL_EPOCH_FLAG = re.compile(
    r"^-{0,2}(?:trainer\.)?(?:max|num|n|total)?[_-]?(?:train[_-])?epochs$"
)
"""Command-line options that ask for a number of epochs: `--epochs 4`, `--max_epochs=4`,
`--num-train-epochs 4`, `trainer.max_epochs=4` (Hydra, LightningCLI)."""


class NoteError(YamlEditError):
    """The note cannot be written; the example file is left untouched."""


@dataclass(frozen=True)
class Note:
    """What goes under `verification:`."""

    last_verified: dt.date | None
    """The run's date; `None` for a failed run, which leaves the file's date as it was."""
    text: str
    unverified_because: str = "the run failed"
    """Why `last_verified` is `None`, in a few words."""

    def values(self) -> dict[str, Any]:
        """The keys and values to set (a failed run sets only the note)."""
        values: dict[str, Any] = {}
        if self.last_verified is not None:
            values["last_verified"] = self.last_verified
        values["last_verification_note"] = self.text
        return values


def _main_task(data: dict[str, Any]) -> dict[str, Any] | None:
    tasks = data["tasks"]
    for task in tasks:
        if task["task"] == "command":
            return task
    return max(tasks, key=lambda t: sum(m["count"] for m in t["metrics"].values()), default=None)


def total_epochs(task: dict[str, Any], command: Sequence[str] | None) -> int | None:
    """How many epochs the run was asked for; `None` when nothing says.

    A logged `max_epochs`-like metric, else the command line's `--epochs N` (or a spelling
    like it).
    """
    for name in TOTAL_EPOCH_METRICS:
        value = task["metrics"].get(name, {}).get("last")
        if isinstance(value, int) and value > 0:
            return value
    args = [str(a) for a in command or ()]
    for i, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        if not eq and i + 1 < len(args):
            value = args[i + 1]
        if TOTAL_EPOCH_FLAG.match(flag) and (eq or flag.startswith("-")) and value.isdigit():
            return int(value) or None
    return None


def _extent(task: dict[str, Any], stopped: bool, total: int | None) -> str:
    """`Trained 3 epochs (1,200 steps)`, or where a failed run stopped.

    `Stopped in epoch 3 of 4 (2 epochs completed, 1,200 steps)`: epochs count from what the
    log shows. A log whose first epoch is 0 counts from 0 (Lightning), else from 1 (Keras); a
    run that failed did not finish the epoch it was in.
    """
    first_epoch, last_epoch = task["epochs"]["first"], task["epochs"]["last"]
    last_step = task["steps"]["last"]
    steps = f"{fmt_num(last_step, 3)} steps" if isinstance(last_step, (int, float)) else ""
    of = f" of {total}" if total else ""
    if not isinstance(last_epoch, (int, float)):
        return f"Trained {steps}" if steps else ""
    if not isinstance(last_epoch, int):  # fractional (Hugging Face): how far it got
        head = (
            f"Stopped at epoch {fmt_num(last_epoch, 3)}{of}"
            if stopped
            else f"Trained {fmt_num(last_epoch, 3)}{of} epochs"
        )
        return f"{head} ({steps})" if steps else head
    current = last_epoch + 1 if first_epoch == 0 else last_epoch
    if stopped:
        done = current - 1
        parts = [f"{done} epoch{'' if done == 1 else 's'} completed", steps]
        detail = ", ".join(p for p in parts if p)
        return f"Stopped in epoch {current}{of} ({detail})"
    of = "" if total == current else of  # "3 of 3 epochs" says no more than "3 epochs"
    head = f"Trained {current}{of} epoch{'' if current == 1 and not of else 's'}"
    return f"{head} ({steps})" if steps else head


def _trend(task: dict[str, Any]) -> str:
    metrics = task["metrics"]
    names = [n for n in SUMMARY_METRICS if n in metrics][:MAX_TREND]
    losses = [n for n in names if n in LOSS_NAMES]
    out = []
    for name in names:
        label = "loss" if name in losses and len(losses) == 1 else name
        first, last = metrics[name]["first"], metrics[name]["last"]
        out.append(f"{label} {fmt_num(first, 3)} -> {fmt_num(last, 3)}")
    return ", ".join(out)


def _limitations(data: dict[str, Any]) -> list[str]:
    out = []
    for found in data["findings"]["by_kind"]:
        text = FINDING_TEXT.get(found["finding"], found["finding"])
        line = f" at line {found['first_line']}" if found.get("first_line") else ""
        out.append(f"{text} ({found['task']}{line})")
    session = data["session"]
    code = session["exit_code"]
    if session.get("stopped_at_duration"):
        out.append("the command was stopped at the --duration limit")
    elif isinstance(code, int) and code != 0:
        out.append(f"the command exited with code {code}")
    for event in data["events"]["notable"]:
        if event.get("kind") == EVENT.collector_unavailable and not _no_engine(event):
            out.append(_missing_source(str(event.get("source") or "")))
        elif event.get("kind") == EVENT.disk_full:
            out.append("the recording stopped early: disk full")
    if not session["complete"]:
        out.append("the recording did not end cleanly")
    return list(dict.fromkeys(out))


def _no_engine(event: dict[str, Any]) -> bool:
    """A host without a container engine: nothing was missed (`containers.NoEngine`)."""
    return event.get("source") == "docker" and str(event.get("msg", "")).startswith(
        "no container engine"
    )


def _missing_source(source: str) -> str:
    if source in SOURCE_TEXT:
        return SOURCE_TEXT[source]
    if source.startswith("log:"):
        return f"the log {source[4:]} could not be read"
    return "one source of readings could not be used"  # its name means nothing to a reader


def compose(summary: Summary) -> Note:
    """The note for a summarized run, in the shape of the project's example notes."""
    data = summary.data
    started = data["session"]["started_at"]
    if not isinstance(started, (int, float)):
        raise NoteError("the session has no start time (meta.json `started_at`)")
    if not data["session"].get("readings", 1):
        # Nothing was measured: a note must not call the run verified.
        return Note(
            None,
            "The session holds no readings (no GPU rows and no metrics): nothing "
            "was verified (last_verified keeps the date of the last run that "
            "passed).",
            "the session holds no readings",
        )
    where, usage = gpu_sentences(data)
    task = _main_task(data)
    code = data["session"]["exit_code"]
    limited = bool(data["session"].get("stopped_at_duration"))
    failed = isinstance(code, int) and code != 0 and not limited  # a limit reached: no failure
    kind = "training run" if task and task["metrics"] else "run"
    on = f" on {where}" if where else ""
    date = dt.datetime.fromtimestamp(started).date()
    # A failed run verifies nothing: the date of the last run that passed stays in the file.
    sentences = [
        f"Training run{on} failed on {date.isoformat()} (last_verified keeps the date "
        "of the last run that passed)"
        if failed
        else f"Verified {kind}{on}"
    ]
    if usage:
        sentences.append(usage)
    if task:
        total = total_epochs(task, data["session"]["command"])
        training = "; ".join(
            p for p in (_extent(task, failed or limited, total), _trend(task)) if p
        )
        if training:
            sentences.append(training)
    limits = _limitations(data)
    if limits:
        sentences.append("Known limitations: " + "; ".join(limits))
    return Note(None if failed else date, ". ".join(sentences) + ".")
