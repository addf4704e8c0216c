"""Logs of the OpenMMLab runner (mmengine, mmdetection, mmsegmentation) and of detectron2."""

from __future__ import annotations

import re

from parsers import safe_json
from parsers.json_records import ITER_TIME_KEYS, SKIP_KEYS, record_to_metric
from parsers.model import LogMetric
from parsers.table_lines import TableLines
from parsers.text import (
    local_timestamp,
    metric_name,
    normalise_line,
    parse_duration,
    parse_number,
)

# mmengine: `2024/05/02 10:00:00 - mmengine - INFO - Epoch(train) [2][15/20]  lr: ...`
# mmcv 1.x: `2024-05-02 10:00:00,189 - mmseg - INFO - Epoch [3][4/8]\tlr: 5.000e-02, eta: ...`
_MM_LINE = re.compile(
    r"(?:(?P<date>\d{4}[/-]\d\d[/-]\d\d) (?P<clock>\d\d:\d\d:\d\d)|\d\d/\d\d \d\d:\d\d:\d\d)"
    r"(?:,\d+)? - \S+ - \w+ - (?P<kind>Epoch|Iter)(?:\((?P<mode>\w+)\))?\s*"
    r"\[\s*(?P<a>\d+)(?:/\d+)?\](?:\[\s*(?P<b>\d+)(?:/\d+)?\])?\s+(?P<rest>.*)"
)
_PAIR = re.compile(r"(\S+): ([^\s,]+)")


def parse_mmengine_line(line: str) -> LogMetric | None:
    """Parse an mmengine `LoggerHook` line such as `Epoch(train) [2][15/20]  lr: ...  loss: ...`.

    Also reads the mmcv 1.x text log of mmdetection 2 / mmsegmentation 0.x
    (`Epoch [3][4/8]<TAB>lr: ..., loss: ...`). A full date stamp (the log file) becomes `taken_at`,
    read as local time; the mmengine console's `MM/DD hh:mm:ss` has no year and gives none.

    Raises:
        ValueError: a value that is not a number.
    """
    line = normalise_line(line)
    if " - " not in line or ("Epoch" not in line and "Iter" not in line):
        return None
    match = _MM_LINE.search(line)
    if match is None:
        return None
    split = "train" if match["mode"] in ("train", None) else "val"
    values = _pairs(match["rest"], split)
    if not values:
        return None
    epoch = step = None
    if match["kind"] == "Epoch":
        epoch = float(match["a"])
    else:
        step = int(match["a"])
    taken_at = None
    if match["date"]:
        taken_at = local_timestamp(match["date"], match["clock"])
    return LogMetric(values=tuple(values), step=step, epoch=epoch, taken_at=taken_at)


def _pairs(rest: str, split: str) -> list[tuple[str, float]]:
    values: list[tuple[str, float]] = []
    for key, text in _PAIR.findall(rest):
        low = key.lower()
        if low == "eta":
            values.append(("eta_s", parse_duration(text)))
        elif low in ITER_TIME_KEYS:
            seconds = parse_number(text)
            if seconds > 0 and split == "train":
                values.append(("throughput/it_s", 1.0 / seconds))
        elif low == "max_mem":
            values.append(("max_mem_mb", parse_number(text.rstrip("M"))))
        elif low not in SKIP_KEYS:
            values.append((metric_name(key, split), parse_number(text)))
    return values


class MmengineJsonParser:
    """mmengine `vis_data/scalars.json` and the older mmcv `.log.json` (one object a line).

    Validation records of an epoch-based run carry the epoch in `step`; they are reported
    with that epoch and the last training step.
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget the last training record."""
        self.last_step: int | None = None
        self.by_epoch = False

    def feed(self, line: str) -> LogMetric | None:
        """Parse one JSON record.

        Raises:
            ValueError: the line starts like an object but is not valid JSON.
        """
        line = normalise_line(line).strip()
        if not line.startswith("{"):
            return None
        record = safe_json.loads(line)
        if not isinstance(record, dict) or "env_info" in record:
            return None
        mode = record.pop("mode", None)
        is_train = mode == "train" if mode is not None else "lr" in record
        if mode is not None and "epoch" in record:
            record.pop("iter", None)  # mmcv 1.x epoch runners count `iter` within the epoch
        metric = record_to_metric(record, "train" if is_train else "val", iter_time=True)
        if metric is None:
            return None
        if is_train:
            self.by_epoch = self.by_epoch or metric.epoch is not None
            self.last_step = metric.step
            return metric
        if self.by_epoch and metric.epoch is None and metric.step is not None:
            return LogMetric(values=metric.values, step=self.last_step, epoch=float(metric.step))
        return metric


_D2_EVENTS = re.compile(r"d2\.utils\.events[^:]*:\s+(.*)")


class Detectron2Parser:
    """detectron2 console: `CommonMetricPrinter` lines and the evaluation `copypaste:` block."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Forget the evaluation block and the last iteration."""
        self.tables = TableLines()
        """The `copypaste:` lines, a comma table under its task."""
        self.step: int | None = None

    def feed(self, line: str) -> LogMetric | None:
        """Parse one console line.

        Raises:
            ValueError: a value that is not a number.
        """
        line = normalise_line(line)
        if "copypaste: " in line:
            return self._copypaste(line)
        if "d2.utils.events" not in line:
            return None
        match = _D2_EVENTS.search(line)
        if match is None:
            return None
        rest = match[1]
        iteration = re.search(r"\biter: (\d+)", rest)
        if iteration is not None:
            self.step = int(iteration[1])
        values = [pair for pair in _pairs(rest, "train") if pair[0] != "iter"]
        if not values:
            return None
        return LogMetric(values=tuple(values), step=self.step)

    def _copypaste(self, line: str) -> LogMetric | None:
        """An evaluation row of the `copypaste:` block, read as any comma table in a log.

        `copypaste: Task: bbox` names the block, `copypaste: AP,AP50,...` its columns and
        the next `copypaste:` line their values (`parsers.table_lines`): `bbox/AP` is
        `val/map`, `bbox/APs` keeps its name.
        """
        metric = self.tables.read(line)[1]
        return None if metric is None else LogMetric(metric.values, step=self.step)


def parse_detectron2_json_line(line: str) -> LogMetric | None:
    """Parse one record of detectron2's `metrics.json` (`iteration` is the step).

    Raises:
        ValueError: the line starts like an object but is not valid JSON.
    """
    line = normalise_line(line).strip()
    if not line.startswith("{"):
        return None
    record = safe_json.loads(line)
    return record_to_metric(record, iter_time=True) if isinstance(record, dict) else None
