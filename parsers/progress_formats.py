"""Stateful console formats: Keras `fit`, Lightning's Rich bar and Ultralytics YOLO."""

from __future__ import annotations

import re

from parsers.model import LogMetric
from parsers.table_lines import TableLines
from parsers.text import metric_name, normalise_line, parse_duration, parse_number
from parsers.values import to_epoch

_KERAS_EPOCH = re.compile(r"Epoch (\d+)/(\d+)\s*$")
_KERAS_STEP = re.compile(
    r"\s*(\d+)/(\d+)\s+(?:[━─═>.\[\]=\s]*\s)?(?:- )?(\d+(?:\.\d+)?(?:ms|s|m|h|us|µs)?) "
    r"(?:- )?(\d+(?:\.\d+)?)(ms|s|us|µs)/(step|sample)(.*)"
)
# Keras 2 callbacks print the rate they set: `Epoch 00001: LearningRateScheduler setting
# learning rate to 0.003.` (the epoch counted from 1, as `Epoch 1/20` is)
_KERAS_LR = re.compile(
    r"Epoch (\d+): (?:LearningRateScheduler setting|ReduceLROnPlateau reducing) learning rate"
    r" to (\S+?)\.?\s*$"
)
_KERAS_PAIR = re.compile(r"(\w+): (\S+)")
_STEP_SCALE = {"ms": 1e-3, "s": 1.0, "us": 1e-6, "µs": 1e-6}


class KerasParser:
    """Keras `fit` output: `Epoch 1/3` then `12/12 ━━━ 0s 5ms/step - loss: ... - val_loss: ...`.

    Keras 3 draws `━━━`, Keras 2 `[====]`. The epoch comes from the last `Epoch N/M` line, as
    Keras prints it (counting from 1). Keras 2 fed with arrays counts samples, not batches
    (`Train on 60000 samples`, then `60000/60000 [===] - 12s 195us/step`, or `us/sample` in
    TensorFlow 2.0 and 2.1): its rate is `throughput/samples_s`. The step bar counts one
    epoch's batches: its remaining time is the run's ETA only in the last epoch (`Epoch 8/8`).
    """

    def __init__(self) -> None:
        self.epoch: float | None = None
        self.last_epoch = False
        """The bar under way belongs to the run's last epoch (`Epoch M/M`)."""
        self.counts_samples = False
        """A `Train on N samples` line was seen: the counts and times are per sample."""

    def feed(self, line: str) -> LogMetric | None:
        """Parse one line; `Epoch N/M` lines set the epoch and return None.

        Raises:
            ValueError: a value that is not a number, or an epoch that is no count (the
                epoch is then unknown until the next `Epoch N/M` line).
        """
        line = normalise_line(line)
        if line.startswith("Epoch "):
            match = _KERAS_EPOCH.match(line)
            if match is not None:
                self.epoch = None  # stays unknown if the new epoch is no count
                self.last_epoch = match[1] == match[2]
                self.epoch = to_epoch(float(match[1]))
                return None
            lr = _KERAS_LR.match(line)
            if lr is None:
                return None
            return LogMetric(values=(("lr", parse_number(lr[2])),), epoch=to_epoch(float(lr[1])))
        if line.startswith("Train on ") and " samples" in line:
            self.counts_samples = True
            return None
        if "/step" not in line and "/sample" not in line:
            return None
        match = _KERAS_STEP.match(line)
        if match is None:
            return None
        step_s = float(match[4]) * _STEP_SCALE[match[5]]
        per_sample = self.counts_samples or match[6] == "sample"
        rate_name = "throughput/samples_s" if per_sample else "throughput/it_s"
        values = [(rate_name, 1.0 / step_s)] if step_s > 0 else []
        if match[1] != match[2] and self.last_epoch:  # mid-epoch the time column is the ETA
            values.append(("eta_s", parse_duration(match[3])))
        for key, text in _KERAS_PAIR.findall(match[7]):
            values.append((metric_name(key), parse_number(text)))
        return LogMetric(values=tuple(values), epoch=self.epoch)

    def reset(self) -> None:
        """Forget the epoch and what the counts count."""
        self.epoch = None
        self.last_epoch = False
        self.counts_samples = False


# On a narrow non-terminal Rich moves the remaining time to the next line (`0:00:05 •
# 30.44it/s v_num: 0.000`, then `0:00:00  train_loss: 0.066`), so it is optional here.
_RICH_HEAD = re.compile(
    r"(?P<desc>\S.*?)\s+[━╸╺╾╼─\s]*?(?P<n>\d+)/(?P<total>\d+|\?)\s+(?P<elapsed>[\d:]+)\s+•\s+"
    r"(?:(?P<remaining>-:--:--|\d+(?::\d\d)+)\s*)?(?:(?P<rate>[\d.]+)(?P<unit>it/s|s/it))?"
    r"\s*(?P<rest>.*)"
)
_RICH_EPOCH = re.compile(r"Epoch (\d+)(?:/(\d+))?")
_RICH_WRAPPED_ETA = re.compile(r"\s+(\d+(?::\d\d)+)(?=\s|$)")
# the next print can land right after the last value: `0.758`Trainer.fit` stopped: ...`; but
# `nan` or `inf` that a lowercase letter goes on from is a word (`nanoGPT`, `info`), no NaN.
_LEADING_NUMBER = re.compile(
    r"[-+]?(?:\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?|(?:nan|inf(?:inity)?)(?!(?-i:[a-z])))", re.IGNORECASE
)


class RichBarParser:
    """Lightning's `RichProgressBar`, on a terminal or redirected to a file.

    Rich wraps the metrics column onto indented continuation lines, sometimes splitting a
    `key:` from its value, so the parser carries the pending key across lines and reports each
    line's complete pairs with the epoch of the bar they belong to. An `Epoch N/M` bar counts
    one epoch's batches: its remaining time is the run's ETA only in the last epoch (Lightning
    counts from 0 and prints `max_epochs - 1` as M, so the last is `Epoch M/M`).
    """

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Leave any bar block."""
        self.in_block = False
        self.is_eval = False
        self.epoch: float | None = None
        self.pending_key: str | None = None
        self.eta_wrapped = False
        """The head line had no remaining time: it starts the next line."""

    def feed(self, line: str) -> LogMetric | None:
        """Parse a bar's head line or one of its metric continuation lines."""
        line = normalise_line(line)
        if "•" in line:
            head = _RICH_HEAD.match(line)
            if head is not None:
                return self._head(head)
        if self.in_block and line[:1].isspace() and line.strip():
            values: list[tuple[str, float]] = []
            if self.eta_wrapped:
                self.eta_wrapped = False
                eta = _RICH_WRAPPED_ETA.match(line)
                if eta is not None:
                    values.append(("eta_s", parse_duration(eta[1])))
                    line = line[eta.end() :]
            return self._pairs(line.split(), values)
        self.in_block = False
        self.pending_key = None
        self.eta_wrapped = False
        return None

    def _head(self, head: re.Match[str]) -> LogMetric | None:
        desc = head["desc"]
        self.in_block = True
        self.pending_key = None
        self.is_eval = desc.lower().startswith(("val", "test", "sanity", "predict"))
        epoch = _RICH_EPOCH.match(desc)
        if not self.is_eval:
            self.epoch = None  # stays unknown if the new epoch is no count
            self.epoch = to_epoch(float(epoch[1])) if epoch else None
        values: list[tuple[str, float]] = []
        if head["rate"]:
            rate = float(head["rate"])
            if head["unit"] == "s/it":
                rate = 1.0 / rate if rate else -1.0  # `0.00s/it`: too fast to show, no rate
            if rate >= 0:
                name = "eval/throughput/it_s" if self.is_eval else "throughput/it_s"
                values.append((name, rate))
        remaining = head["remaining"]
        run_bar = not self.is_eval and (epoch is None or epoch[1] == epoch[2])
        self.eta_wrapped = remaining is None and run_bar
        if run_bar and remaining is not None and remaining[0].isdigit():
            values.append(("eta_s", parse_duration(remaining)))
        return self._pairs(head["rest"].split(), values)

    def _pairs(self, words: list[str], values: list[tuple[str, float]]) -> LogMetric | None:
        split = "val" if self.is_eval else "train"
        for word in words:
            if word[-1:] == ":":
                self.pending_key = word[:-1]
            elif self.pending_key is not None:
                number = _LEADING_NUMBER.match(word)
                if number is None:
                    raise ValueError(f"{self.pending_key}: not a number: {word[:40]!r}")
                if self.pending_key != "v_num":
                    values.append((metric_name(self.pending_key, split), parse_number(number[0])))
                self.pending_key = None
                if number.end() < len(word):  # another print ran into the bar: block over
                    self.in_block = False
                    break
        if not values:
            return None
        return LogMetric(values=tuple(values), epoch=self.epoch)


class UltralyticsParser:
    """Ultralytics YOLO training console: the epoch table and the validation `all` row.

    The tables are read as the generic reader reads any table printed in a log
    (`parsers.table_lines`): column names from the header lines (`Epoch GPU_mem box_loss ...`
    and `Class Images Instances Box(P R mAP50 mAP50-95)`), so other tasks' columns work too,
    and so do YOLOv5's and YOLOv7's older headers (`Epoch gpu_mem box obj cls labels
    img_size`, `Class Images Labels P R mAP@.5 mAP@.5:.95`). The epoch is the table's, as
    printed (YOLOv5 counts from 0, Ultralytics 8 from 1). A training row's bar counts one
    epoch's batches: its remaining time is the epoch's, no ETA of the run.
    """

    def __init__(self) -> None:
        self._tables = TableLines()

    def reset(self) -> None:
        """Forget the column headers."""
        self._tables.reset()

    def feed(self, line: str) -> LogMetric | None:
        """Parse a training progress row or a validation `all` row."""
        return self._tables.read(normalise_line(line))[1]
