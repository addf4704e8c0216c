"""Health findings that one log line (or one parsed metric) supports on its own."""

from __future__ import annotations

import math
import re

from parsers.model import LogFinding, LogMetric
from parsers.text import normalise_line
from parsers.vocabulary import is_loss

# Case-sensitive on purpose: IGNORECASE makes the regex engine try every position slowly.
# Each kind comes with words one of which its pattern cannot match without: a pattern is
# searched only when one of them is in the line (`USE_NCCL=OFF` in a 1,500-character build
# summary then costs one search, not six of up to 50 us each).
_KINDS = (
    ("oom", ("emory",), re.compile(r"[Oo]ut of memory|OutOfMemoryError|can't allocate memory")),
    ("traceback", ("Traceback",), re.compile(r"Traceback \(most recent call last\)")),
    (
        "nccl",
        ("NCCL", "Watchdog"),
        re.compile(r"NCCL (?:[Ee]rror|WARN)|Watchdog caught collective"),
    ),
    ("cuda_error", ("CUDA error: ",), re.compile(r"CUDA error: ")),
    ("killed", ("Killed", "Segmentation fault"), re.compile(r"(?:^|\s)Killed$|Segmentation fault")),
    (
        "download",
        ("ownload", "Fetching", "B/s"),
        re.compile(
            r"[Dd]ownloading|Fetching \d+ files|"
            r"\.(?:safetensors|bin|pt|pth|ckpt|zip|gz|tar|onnx|gguf)\b.*\d%\|.*B/s"
        ),
    ),
)
_EVIDENCE_CHARS = 300
_RAW_SCAN_CHARS = 512
_SCAN_CHARS = 2000
"""Error messages open their line; the rest of a very long line is not searched."""


def scan_line(line: str) -> LogFinding | None:
    """The finding a single line shows: CUDA OOM, a traceback, NCCL trouble, a download, ...

    Download activity (`Downloading ...`, a hub progress bar for a `.safetensors` file,
    torchvision's `Downloading: "https://..."`) on a rerun means a cache miss.
    """
    if len(line) > _RAW_SCAN_CHARS:  # a redrawn bar or a huge line: look at what shows
        line = normalise_line(line)[:_SCAN_CHARS]
    # Plain substring tests run at C speed and rule out almost every line before any regex.
    # Each keyword is tested only when one of its rarer letters is in the line: a one-letter
    # test is a memchr, several times cheaper than a word search, and most lines lack it.
    # Every word `_KINDS` lists must be tested here (tests/unit/test_findings_pinned.py).
    if not (
        ("y" in line and "emory" in line)
        or ("T" in line and "Traceback" in line)
        or ("w" in line and "ownload" in line)
        or ("F" in line and "Fetching" in line)
        or ("C" in line and ("NCCL" in line or "CUDA error" in line))
        or ("W" in line and "Watchdog" in line)
        or ("K" in line and "Killed" in line)
        or ("S" in line and "Segmentation" in line)
        or ("B" in line and "B/s" in line)
    ):
        return None
    line = normalise_line(line)
    for kind, words, pattern in _KINDS:
        if any(word in line for word in words) and pattern.search(line):
            return LogFinding(kind=kind, evidence=line.strip()[:_EVIDENCE_CHARS])
    return None


def findings_from_metric(metric: LogMetric) -> list[LogFinding]:
    """`nan` / `inf` findings for a metric whose loss (any `*loss*` value) is not finite."""
    found: list[LogFinding] = []
    for name, value in metric.values:
        if not math.isfinite(value) and is_loss(name):
            kind = "nan" if math.isnan(value) else "inf"
            where = f" at step {metric.step}" if metric.step is not None else ""
            if metric.epoch is not None:
                where += f" in epoch {metric.epoch:g}"
            found.append(LogFinding(kind=kind, evidence=f"{name} = {value}{where}"))
    return found


# What frameworks print once a run has ended: the Trainer, Lightning, Ultralytics/YOLOv5,
# detectron2, fairseq, Megatron, MONAI's tutorials (anywhere in the line: no run prints them
# before its end), and torchvision's references, nnU-Net, PyTorch's tutorials (words common
# enough that they count only as the whole message, after a logging prefix).
_END_OF_RUN = re.compile(
    r"Training completed\. Do not forget to share your model"
    r"|^\{'train_runtime': "
    r"|`Trainer\.fit` stopped: `max_(?:epochs|steps|time)"
    r"|\d+ epochs completed in [\d.]+ hours\."
    r"|Total training time: \d"
    r"|done training in [\d.]+ seconds"
    r"|\[after training is done\]"
    r"|train completed, best_metric: "
    r"|(?:^|[\]|>-]\s+|\.\d+: )(?:Training time \d+:\d\d:\d\d|Training done\.|Done!"
    r"|(?:Finished [Tt]raining|Training (?:finished|complete|completed))[.!]?)\s*$"
)


def ends_run(line: str) -> bool:
    """Whether the line says the training run has ended.

    `Training completed. Do not forget ...`, `` `Trainer.fit` stopped: `max_epochs=6` ``,
    `100 epochs completed in 1.2 hours.`, `Total training time: ...`, `Training done.`, ...

    A run that ended is never `stalled`: its flat loss at the end is a finished run's, and a
    process still alive after it is saving, evaluating or uploading (`gpuherd.tasks`).
    """
    # Called for every line: substring tests at C speed turn away almost all before the regex
    # (`rain` is in `Training`, `Trainer.fit`, `train_runtime`, `train completed`).
    if len(line) > _RAW_SCAN_CHARS:  # a redrawn bar ending in Lightning's last line
        line = normalise_line(line)[:_SCAN_CHARS]
    if "rain" in line:
        if not (
            "raining" in line
            or "Trainer.fit" in line
            or "train_runtime" in line
            or "train completed" in line
        ):
            return False
    elif not ("Done!" in line or "ompleted in" in line):
        return False
    return _END_OF_RUN.search(normalise_line(line)) is not None
