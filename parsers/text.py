"""Line clean-up, number parsing and metric-name normalisation shared by every parser."""

from __future__ import annotations

import re
import time

MAX_LINE_CHARS = 10_000
"""Lines are cut to this length before any regex runs (a 50 MB line stays cheap)."""

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]")
_THOUSANDS = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?(?:[eE][+-]?\d+)?")
_SPECIAL = {
    "nan": float("nan"),
    "+nan": float("nan"),
    "-nan": float("nan"),
    "inf": float("inf"),
    "+inf": float("inf"),
    "-inf": float("-inf"),
    "infinity": float("inf"),
    "+infinity": float("inf"),
    "-infinity": float("-inf"),
}


def normalise_line(line: str) -> str:
    r"""Return the text a person would see for one physical log line.

    Keeps only the last non-blank carriage-return segment (a tqdm bar redraws itself with `\\r`),
    caps the length at `MAX_LINE_CHARS`, strips ANSI escapes and backspaces, and drops the line
    ending. Lines with none of these features come back unchanged, which keeps the common case
    fast.
    """
    if "\r" in line:
        return _normalise_redrawn(line)
    if len(line) > MAX_LINE_CHARS:
        line = line[:MAX_LINE_CHARS]
    if "\x1b" in line:
        line = _ANSI.sub("", line)
    if "\b" in line:
        line = line.replace("\b", "")
    if "\n" in line:  # a test in C, where `endswith` parses its arguments first
        line = line.rstrip("\n")
    return line


_last_redrawn: tuple[str | None, str] = (None, "")
"""The last `\r` line normalised, and its result: the parser and the findings scan both
normalise each line, and a redrawn bar is the costly kind. One tuple, replaced whole, so
threads never see half of it; the result depends on the line alone."""


def _normalise_redrawn(line: str) -> str:
    global _last_redrawn
    memo = _last_redrawn
    if memo[0] is line:
        return memo[1]
    clean = normalise_line(_last_segment(line))
    _last_redrawn = (line, clean)
    return clean


def _last_segment(line: str) -> str:
    end = len(line.rstrip("\r\n"))
    while end > 0:
        start = line.rfind("\r", 0, end) + 1
        segment = line[start:end]
        visible = _ANSI.sub("", segment[:MAX_LINE_CHARS]) if "\x1b" in segment else segment
        if visible.strip():
            return visible  # capped and without escapes already: no second pass over it
        end = start - 1
    return ""


class _SecondsCache:
    """Unix seconds per `YYYY-MM-DD hh:mm:ss` already converted, for the current time zone.

    `time.mktime` costs 3 to 20 us (glibc looks at `/etc/localtime` on each call), and a log
    writes many lines within one second. The cache is cleared when `time.tzset()` changes the
    zone and when it is full, so it never grows with the log.
    """

    MAX_ENTRIES = 1024

    def __init__(self) -> None:
        self.seconds: dict[str, float | None] = {}
        """By the stamp: the date, `T` or a blank, the clock."""
        self.zone: object = time.tzname

    def get(self, stamp: str) -> float | None:
        if time.tzname is self.zone:
            try:
                return self.seconds[stamp]
            except KeyError:
                pass
        else:
            self.seconds, self.zone = {}, time.tzname
        if len(self.seconds) >= self.MAX_ENTRIES:
            self.seconds = {}
        value = self.seconds[stamp] = _mktime(stamp[:10], stamp[11:])
        return value


def _mktime(date: str, clock: str) -> float | None:
    try:
        year, month, day = int(date[0:4]), int(date[5:7]), int(date[8:10])
        hour, minute, second = int(clock[0:2]), int(clock[3:5]), int(clock[6:8])
    except ValueError:
        return None
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 62):
        return None
    return time.mktime((year, month, day, hour, minute, second, 0, 0, -1))


_SECONDS = _SecondsCache()


def local_timestamp(date: str, clock: str) -> float | None:
    """Unix seconds for `YYYY-MM-DD` (or `/`) and `hh:mm:ss` read as local time; None if invalid.

    Cheaper than `time.strptime`, which matters on every line of a timestamped log; lines of
    the same second share one conversion. Both texts have those exact widths (10 and 8).
    """
    return _SECONDS.get(f"{date} {clock}")


local_stamp = _SECONDS.get
"""`local_timestamp` of `YYYY-MM-DD hh:mm:ss` as one string (`T` or a blank in between): one
slice of a line and one call, for the lines of a timestamped log."""


def parse_number(text: str) -> float:
    """Parse a number as logs write it: `1e-5`, `-inf`, `nan`, `1,234.5`, `'0.25'`, `12%`.

    Raises:
        ValueError: the text is not a number.
    """
    try:
        return float(text)  # the common case; float() also skips surrounding whitespace
    except ValueError:
        pass
    text = text.strip().strip("'\"")
    if text.endswith("%"):
        text = text[:-1]
    try:
        return float(text)
    except ValueError:
        pass
    special = _SPECIAL.get(text.lower())
    if special is not None:
        return special
    if "," in text and _THOUSANDS.fullmatch(text):
        return float(text.replace(",", ""))
    raise ValueError(f"not a number: {text[:40]!r}")


def parse_duration(text: str) -> float:
    """Seconds in `1 day, 2:57:46`, `0:00:03`, `00:03`, `1.5s`, `12ms` or `2h`.

    Raises:
        ValueError: the text is not a duration.
    """
    text = text.strip()
    days = 0.0
    if "day" in text:
        head, _, text = text.partition(",")
        days = float(head.split(maxsplit=1)[0] if head.strip() else head)
        text = text.strip()
    if ":" in text:
        total = 0.0
        for part in text.split(":"):
            total = total * 60 + float(part)
        return days * 86400 + total
    for suffix, scale in (("ms", 0.001), ("s", 1.0), ("m", 60.0), ("h", 3600.0)):
        if text.endswith(suffix):
            return days * 86400 + float(text[: -len(suffix)]) * scale
    raise ValueError(f"not a duration: {text[:40]!r}")


_SPLITS = (
    ("train/", "train"),
    ("train_", "train"),
    ("training_", "train"),
    ("val/", "val"),
    ("val_", "val"),
    ("valid_", "val"),
    ("validation_", "val"),
    ("eval/", "val"),
    ("eval_", "val"),
    ("test/", "test"),
    ("test_", "test"),
    ("metrics/", "val"),
    ("coco/", "val"),
    ("bbox/", "val"),
)
_BASES = {
    "loss": "loss",
    "total_loss": "loss",
    "acc": "acc",
    "accuracy": "acc",
    "acc1": "acc",
    "top1": "acc",
    "acc@1": "acc",
    "prec@1": "acc",
    "acc5": "acc_top5",
    "top5": "acc_top5",
    "acc@5": "acc_top5",
    "prec@5": "acc_top5",
    "accuracy/top1": "acc",
    "accuracy/top5": "acc_top5",
    "top1_acc": "acc",
    "top5_acc": "acc_top5",
    "map": "map",
    "bbox_map": "map",
    "map50-95(b)": "map",
    "ap": "map",
    "map_50": "map_50",
    "map50": "map_50",
    "bbox_map_50": "map_50",
    "map50(b)": "map_50",
    "ap50": "map_50",
    "miou": "miou",
    "meaniu": "miou",
    "mean_iu": "miou",
    "meaniou": "miou",
    "mean_iou": "miou",
    "aacc": "pixel_acc",
    "pixel_acc": "pixel_acc",
    "pix_acc": "pixel_acc",
    "ppl": "ppl",
    "perplexity": "ppl",
}
# detection and segmentation scores only exist on a validation pass
_VAL_ONLY = frozenset({"map", "map_50", "miou", "pixel_acc"})
_PLAIN = {
    "lr": "lr",
    "learning_rate": "lr",
    "grad_norm": "grad_norm",
    "it/s": "throughput/it_s",
    "img/s": "throughput/samples_s",
    "samples/s": "throughput/samples_s",
    "samples_per_second": "throughput/samples_s",
    "train_samples_per_second": "throughput/samples_s",
    "train_steps_per_second": "throughput/it_s",
    "tokens/s": "throughput/tokens_s",
    "tok/s": "throughput/tokens_s",
    "tokens_per_second": "throughput/tokens_s",
    "eta_seconds": "eta_s",
}
_TRL_FAMILIES = ("rewards/", "logps/", "logits/")
"""TRL preference trainers' (DPO, KTO, ORPO) metric families: `rewards/margins` on the training
side, `eval_rewards/margins` on the evaluation side, which becomes `val/rewards/margins`."""
_cache: dict[str, dict[str, str]] = {"train": {}, "val": {}, "test": {}}
STANDARD_NAMES: frozenset[str] = frozenset(
    {f"{split}/{base}" for split in ("train", "val", "test") for base in _BASES.values()}
    | set(_PLAIN.values())
    | {"epoch", "step"}
)
"""The normalised names `metric_name` gives the keys it knows (`train/loss`, `lr`, ...)."""


def metric_name(key: str, split: str = "train") -> str:
    """The normalised name for a key as a log writes it; unknown keys keep their own name.

    Args:
        key: the key as written, e.g. `val_acc`, `eval_loss`, `Acc@1`, `metrics/mAP50(B)`.
        split: the split a bare key belongs to (`train` in a training line, `val` in an
            evaluation block).
    """
    cache = _cache.get(split)
    if cache is None:
        return _normalise_name(key, split)
    name = cache.get(key)
    if name is None:
        name = _normalise_name(key, split)
        if len(cache) < 4096:  # keys come from logs: keep the cache bounded
            cache[key] = name
    return name


def _normalise_name(key: str, split: str) -> str:
    if not key.isprintable():
        # control characters and lone surrogates (a JSON `"\\udc80"` key) cannot be written
        # to a terminal or a UTF-8 file
        key = "".join(
            char if char.isprintable() else " " if char.isspace() else "?" for char in key
        )
    if not key.strip():
        return ""  # `check_metric` leaves unnamed values out
    low = key.strip().lower()
    plain = _PLAIN.get(low)
    if plain is not None:
        return plain
    if low.startswith("lr-") or low == "lr/pg0":  # Lightning LearningRateMonitor, YOLO group 0
        return "lr"
    for suffix in ("_step", "_epoch"):  # Lightning's on_step / on_epoch variants
        if low.endswith(suffix) and low != suffix[1:]:
            low = low[: -len(suffix)]
            break
    for prefix, prefix_split in _SPLITS:
        if low.startswith(prefix):
            rest = low[len(prefix) :]
            base = _BASES.get(rest)
            if base is None and rest.startswith(_TRL_FAMILIES):
                return f"{prefix_split}/{key.strip()[len(prefix) :]}"  # eval_rewards/margins
            return key if base is None else f"{prefix_split}/{base}"
    base = _BASES.get(low)
    if base is None:
        return key
    if base in _VAL_ONLY and split == "train":
        split = "val"
    return f"{split}/{base}"
