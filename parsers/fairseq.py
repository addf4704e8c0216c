"""fairseq's `simple` and `tqdm` log formats: epoch summaries, validation lines, progress lines."""

from __future__ import annotations

import re
from collections.abc import Iterable

from parsers.model import LogMetric
from parsers.text import local_stamp, metric_name, normalise_line, parse_number
from parsers.values import to_epoch, to_step

# `| epoch 005 | loss 0.158 | ...` (fairseq 0.9), `epoch 001 | loss 2.313 | ...` (tqdm format),
# `2023-06-13 17:32:41 | INFO | valid | epoch 143 | valid on 'valid' subset | loss ...`, and
# ` | valid on 'test' subset | loss ...` from fairseq-validate
_SUMMARY = re.compile(
    r"(?:^|\| )(?:epoch (\d+) \| )?valid on '([^']*)' subset \||"
    r"(?:^|\| )epoch (\d+) \| (?=\w+ [-+\d.])"
)
# `| epoch 001:   10 / 2051 loss=12.86, ...`, `... | train_inner | epoch 143:  185 / 282 loss=`
_PROGRESS = re.compile(r"(?:^|\| )epoch (\d+):\s+\d+ / \d+ (?=\w+=)")
_STAMP = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) \| ")
_NAMES = {
    "ppl": "ppl",
    "wps": "throughput/tokens_s",  # target words (tokens) per second
    "ups": "throughput/it_s",  # updates per second
    "gnorm": "grad_norm",
}
# counters, sizes and clocks, not metrics; `best_*` repeats an earlier value
_SKIP = frozenset(
    {
        "wpb",
        "bsz",
        "clip",
        "oom",
        "loss_scale",
        "wall",
        "train_wall",
        "gb_free",
        "cuda_gb_free",
        "num_updates",
    }
)


def parse_fairseq_line(line: str) -> LogMetric | None:
    """Parse a fairseq training, validation or progress line.

    `loss`, `nll_loss` and `ppl` (`perplexity`) are training or validation values by the
    line's kind, `wps` is `throughput/tokens_s`, `ups` `throughput/it_s`, `gnorm`
    `grad_norm`; `num_updates` is the step and the epoch is the line's.

    Raises:
        ValueError: a value that is not a number.
    """
    line = normalise_line(line)
    if "epoch " not in line and "subset |" not in line:
        return None
    match = _SUMMARY.search(line)
    if match is not None:
        validation = match[2] is not None
        epoch = match[1] if validation else match[3]
        pairs = [field.strip().rpartition(" ") for field in line[match.end() :].split("|")]
        return _metric(
            ((key, text) for key, _, text in pairs), epoch, "val" if validation else "train", line
        )
    match = _PROGRESS.search(line)
    if match is not None:
        items = [item.strip().partition("=") for item in line[match.end() :].split(",")]
        return _metric(((key, text) for key, _, text in items), match[1], "train", line)
    return None


def _metric(
    pairs: Iterable[tuple[str, str]], epoch: str | None, split: str, line: str
) -> LogMetric | None:
    values: list[tuple[str, float]] = []
    step = None
    for key, text in pairs:
        if not key or not text:
            continue
        if key == "num_updates":
            step = to_step(parse_number(text))
        elif key not in _SKIP and not key.startswith("best_"):
            name, value = _name(key, split), parse_number(text)
            if value != 0 or "throughput/" not in name:  # `ups 0`: rounded, not stopped
                values.append((name, value))
    if not values:
        return None
    stamp = _STAMP.match(line) if line[:1].isdigit() else None
    return LogMetric(
        values=tuple(values),
        step=step,
        epoch=to_epoch(float(epoch)) if epoch is not None else None,
        taken_at=local_stamp(stamp[1]) if stamp else None,
    )


def _name(key: str, split: str) -> str:
    name = _NAMES.get(key, key)
    if name.startswith("throughput/"):
        return name if split == "train" else f"eval/{name}"
    if name in ("lr", "grad_norm"):
        return name
    known = metric_name(name, split)
    return known if "/" in known else f"{split}/{name}"
