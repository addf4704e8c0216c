"""tqdm progress bars, including Lightning's TQDM bar and the bars Hugging Face prints."""

from __future__ import annotations

import re

from parsers.model import LogMetric
from parsers.text import STANDARD_NAMES, metric_name, normalise_line, parse_duration, parse_number
from parsers.values import to_epoch, to_step

_TAIL = re.compile(
    r"(?:(?P<pct>\d{1,3})%\|[^|]*\| ?)?(?P<n>[\d.]+[kMGT]?)(?:/(?P<total>[\d.?]+[kMGT]?))?"
    r"(?P<nunit>[^\s\[]*) ?\[(?P<elapsed>[\d:]+)(?:<(?P<remaining>[\d:?]+))?"
    r"(?:, *(?P<rate>[\d.?]+[kMGT]?)(?P<unit>[^\s,\]]*))?(?:, *(?P<postfix>[^\]]*))?\]\s*$"
)
_EPOCH = re.compile(r"epoch[\s:\[]*(\d+)(?:\s*/\s*(\d+))?")  # in the lower-cased description
_PAIR = re.compile(r"([^\s=,]+)=([^,\s]+)")
_EVAL_WORDS = ("val", "eval", "test", "predict", "sanity")
# bars that load, save or fetch something are not training progress (the first four words
# also count anywhere in the description)
_CHORE_WORDS = (
    "writing",
    "loading",
    "saving",
    "download",
    "fetching",
    "uploading",
    "map",
    "filter",
    "generating",
    "tokeniz",
    "resolving",
    "extracting",
    "shard",
)
# datasets' `map`, `filter` and tokenizing bars count examples (`examples/s`; batches, `ba/s`,
# in datasets 1.x): dataset preparation, however it is described (`Running tokenizer on ...`)
_DATASET_UNITS = frozenset({"examples/s", "s/examples", "ba/s", "s/ba"})
_DATASET_RATES = (" examples/s", " s/examples")  # tqdm's `unit=" examples"` puts a space first
_SAMPLE_UNITS = frozenset({"img", "imgs", "image", "images", "sample", "samples", "ex"})
_TOKEN_UNITS = frozenset({"tok", "tokens", "token"})
_SKIP_KEYS = frozenset({"v_num"})  # Lightning's logger version, not a metric


def parse_tqdm_line(line: str) -> LogMetric | None:
    """Parse one tqdm bar line: throughput, ETA, epoch from the description, postfix metrics.

    Bars counting bytes (downloads) give no metrics; the findings scanner reports them. This
    reads one line alone; a log with several bars needs `TqdmParser`, which tells its
    training bar from the others.

    Raises:
        ValueError: a bar whose numbers do not parse.
    """
    bar = read_bar(line)
    return None if bar is None else bar.metric(bar.is_eval)


class Bar:
    """One tqdm bar line, read but not yet turned into a metric."""

    __slots__ = (
        "count",
        "desc",
        "desc_as_printed",
        "is_eval",
        "postfix",
        "rate",
        "remaining",
        "total",
        "unit",
    )

    def __init__(
        self, match: re.Match[str], desc: str, is_eval: bool, desc_as_printed: str = ""
    ) -> None:
        # all groups in one call: a lookup by name per field costs more than the rest
        _, count, total, _, _, remaining, rate, unit, postfix = match.groups()
        self.count: str = count
        """The bar's count as printed (`10` of `10/256`, `2.5k`)."""
        self.remaining: str | None = remaining
        self.rate: str | None = rate
        self.unit: str = unit or ""
        self.postfix: str | None = postfix
        self.desc = desc
        """The description, lower-cased."""
        self.desc_as_printed = desc_as_printed
        """The description as printed (pairs in it keep their case)."""
        self.is_eval = is_eval
        """The description names an evaluation (`val`, `eval`, `test`, ...)."""
        self.total = _scaled(total) if total and "?" not in total else None
        """The bar's total (`256` of `10/256`), `None` when it has none."""

    def metric(self, is_eval: bool) -> LogMetric | None:
        """The metric of this bar, read as an evaluation bar or as the training bar."""
        values: list[tuple[str, float]] = []
        rate = self.rate
        if rate and "?" not in rate:
            throughput = _throughput(_scaled(rate), self.unit, is_eval)
            if throughput[1] != _NO_RATE:
                values.append(throughput)
        low_desc = self.desc
        epoch_match = _EPOCH.search(low_desc) if "epoch" in low_desc else None
        remaining = self.remaining
        # A bar of one epoch's batches (`Epoch 1: 50%|...`) ends with the epoch, not the run:
        # its remaining time is the run's ETA only in the last epoch (`Epoch 8/8`).
        run_bar = epoch_match is None or epoch_match[1] == epoch_match[2]
        if remaining and "?" not in remaining and not is_eval and run_bar:
            values.append(("eta_s", parse_duration(remaining)))
        if self.postfix:
            values.extend(_postfix(self.postfix, "val" if is_eval else "train"))
        if "=" in self.desc_as_printed:  # `set_description(f"Loss={loss} Accuracy={acc}")`
            # its loss only: such loops print the accuracy there in percent and the test set's
            # as a count of a total (a fraction), and the two scales must not meet in one task
            values.extend(
                item
                for item in _postfix(self.desc_as_printed, "val" if is_eval else "train")
                if item[0] in STANDARD_NAMES and "loss" in item[0]
            )
        if not values:
            return None
        epoch = to_epoch(float(epoch_match.group(1))) if epoch_match else None
        step = None if epoch is not None or is_eval else to_step(_scaled(self.count))
        return LogMetric(values=tuple(values), step=step, epoch=epoch)


def read_bar(line: str) -> Bar | None:
    """The tqdm bar at the end of a line, or None (no bar, or a chore or byte-count bar).

    Raises:
        ValueError: a bar whose numbers do not parse.
    """
    line = normalise_line(line)
    if line[-1:] != "]" and line.rstrip()[-1:] != "]":
        line = bar_before_record(line)
        if not line:
            return None
    bracket = line.rfind("[", 0, line.rfind("]"))
    if bracket < 0:
        return None
    # The counts start after the bar `NN%|███| `: search from its opening `|` when there is
    # one, which tries far fewer positions than a fixed window.
    bar_end = line.rfind("|", 0, bracket)
    bar_start = line.rfind("|", max(0, bracket - 200), bar_end) if bar_end > 0 else -1
    if bar_start >= 4:
        start = bar_start - 4
        if (
            line[bar_start - 1] != "%"
            and line[bar_end - 1] != "%"
            and line[bar_end + 1 : bar_end + 2] == " "
            and line[bar_end + 2 : bar_end + 3] != "["
        ):
            # No percentage at the bar (`Validation: |      | 0/? [...]`) and a blank after it:
            # no match can start inside the bar (a count's unit holds no blank), so the search
            # starts after it instead of trying every position of a wide empty bar.
            start = bar_end + 1
    else:  # no bar, a bar at the line's start, or one wider than the 200 characters looked at
        start = _start_without_bar(line, bracket, bar_end)
    match = _TAIL.search(line, start)
    if match is None:
        return None
    desc = line[: match.start()].rstrip().rstrip(":").strip()
    unit = match["unit"] or ""
    if "B" in unit and (unit.endswith("B/s") or unit[:2] == "s/" and unit[-1:] == "B"):
        return None
    low_desc = desc.lower()
    if (
        low_desc.startswith(_CHORE_WORDS)
        or (
            "writing" in low_desc
            or "loading" in low_desc
            or "saving" in low_desc
            or "download" in low_desc
            or "tokeniz" in low_desc  # anywhere in the description
        )
        or unit in _DATASET_UNITS
        or _counts_examples(match["postfix"])
    ):
        return None
    return Bar(match, low_desc, low_desc.startswith(_EVAL_WORDS), desc)


def _counts_examples(postfix: str | None) -> bool:
    # a substring test first, four times cheaper than `endswith` and its argument parsing
    return postfix is not None and "examples" in postfix and postfix.endswith(_DATASET_RATES)


def _start_without_bar(line: str, bracket: int, bar_end: int) -> int:
    # A bar's opening `|` beyond the window (a terminal over 200 columns wide) is looked for
    # again: a search that starts inside the bar would leave `NN%|███|` in the description,
    # and `Epoch: 100%|...` would read as epoch 100.
    bar_start = line.rfind("|", 0, bar_end) if bar_end > 0 else -1
    return max(0, bar_start - 4) if bar_start >= 0 else max(0, bracket - 60)


_LEVELS = ("DEBUG|", "INFO|", "WARNING|", "ERROR|", "CRITICAL|")
"""How a `[LEVEL|file.py:line] ...` logging record opens (transformers' format in
LLaMA-Factory and TRL scripts), after its `[`."""


def bar_before_record(line: str) -> str:
    """The bar of a line whose bar ran on into a logging record, or `""`.

    A bar redrawn without its newline before a logging record leaves both on one line
    (`100%|███| 170/170 [17:45<00:00,  5.91s/it][INFO|trainer.py:4309] ... Saving model
    checkpoint to ...`): the bar is the line up to its `]`, and the record is nobody's metric.
    """
    cut = line.find("][")
    while cut >= 0:
        if line.startswith(_LEVELS, cut + 2):
            return line[: cut + 1]
        cut = line.find("][", cut + 2)
    return ""


class TqdmParser:
    """tqdm bars of one log, where training, evaluation and chore bars take turns.

    The training bar is the bar with the largest total seen so far; a bar with a smaller
    total is an evaluation bar (the Trainer's evaluation and prediction bars have no
    description), read as an evaluation-named one is: `eval/throughput/...`, no ETA, no
    step. So a finished evaluation bar (`2/2 [00:00<00:00]`) never reports an ETA of 0 or
    step 2 for the run. Bars without a total, and a log's first bars, count as training
    until a larger total shows up.
    """

    def __init__(self) -> None:
        self.train_total: float | None = None
        """The largest bar total seen so far: the training bar's."""

    def feed(self, line: str) -> LogMetric | None:
        """Parse one line; see `parse_tqdm_line`.

        Raises:
            ValueError: a bar whose numbers do not parse.
        """
        bar = read_bar(line)
        if bar is None:
            return None
        return bar.metric(self.is_eval(bar))

    def is_eval(self, bar: Bar) -> bool:
        """Whether a bar is read as an evaluation bar; notes the training bar's total."""
        if bar.is_eval:
            return True
        total = bar.total
        if total is None:
            return False
        if self.train_total is None or total >= self.train_total:
            self.train_total = total
            return False
        return True

    def reset(self) -> None:
        """Forget the training bar."""
        self.train_total = None


def _postfix(text: str, split: str) -> list[tuple[str, float]]:
    # set_postfix(loss=...) pairs; a postfix may also hold words (`mode=train`), skipped
    values = []
    for key, value in _PAIR.findall(text):
        if key not in _SKIP_KEYS:
            number = _maybe_number(value)
            if number is not None:
                values.append((metric_name(key, split), number))
    return values


def _throughput(rate: float, unit: str, is_eval: bool) -> tuple[str, float]:
    if unit[:2] == "s/":
        thing, rate = unit[2:], (1.0 / rate if rate else _NO_RATE)
    else:
        thing = unit[:-2] if unit[-2:] == "/s" else unit
    if thing in _SAMPLE_UNITS:
        name = "throughput/samples_s"
    elif thing in _TOKEN_UNITS:
        name = "throughput/tokens_s"
    else:
        name = "throughput/it_s"
    return ("eval/" + name if is_eval else name), rate


_NO_RATE = float("inf")
"""The rate of a `0.00s/it` bar: too fast to show, so no rate is reported."""
_SCALES = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def _scaled(text: str) -> float:
    scale = _SCALES.get(text[-1])
    return float(text[:-1]) * scale if scale else float(text)


def _maybe_number(text: str) -> float | None:
    try:
        return parse_number(text)
    except ValueError:
        return None
