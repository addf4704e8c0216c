"""Hugging Face Trainer: the dicts it prints on the console and its `trainer_state.json`."""

from __future__ import annotations

import re

from parsers import safe_json
from parsers.json_records import record_to_metric
from parsers.keyvalue import pairs_to_metric
from parsers.model import LogMetric
from parsers.text import normalise_line
from parsers.tqdm_bar import TqdmParser, parse_tqdm_line
from parsers.values import check_metric
from parsers.vocabulary import TRAIN_LOSS, TRAIN_LOSS_RUN_MEAN

# transformers 5 quotes every value ('loss': '6.193'); 4.x printed bare numbers and nan
_ITEM = re.compile(r"'([^']+)': '?([^',}]*)'?")
# where a tqdm bar runs into a dict that a redraw cut short: `'epoch': 3.77 60%|██  | 600/1000`
_BAR_START = re.compile(r"\s*\d{1,3}%\|")
_RUN_MEAN_KEY = TRAIN_LOSS_RUN_MEAN
"""`train_loss` of the end-of-run record, renamed in that dict alone: redraws run together
can put step dicts, whose `loss` is the step's, on the same line."""
_EPISODES_KEY, _EPISODES_NAME = "eps", "throughput/samples_s"
"""TRL's PPO and RLOO dicts open with `eps`, episodes (prompts) a second printed as an int:
samples a second, and `0` is a rounding of a slow run, not a stall."""
_LIST_STARTS = ("[", "array(")
_METRICS_BLOCK = re.compile(r"^\*{5} (\w+) metrics \*{5}$")
_BLOCK_ITEM = re.compile(r"^\s+(\w+)\s+=\s+(\S+)$")


def parse_hf_trainer_line(line: str) -> LogMetric | None:
    """Parse a printed log dict such as `{'loss': '6.193', 'epoch': '1.016'}`, or a tqdm bar.

    This reads one line alone; `HfTrainerParser` also tells the training bar from the
    evaluation bars.

    Raises:
        ValueError: a value in the dict is not a number.
    """
    line = normalise_line(line)
    start = _dict_start(line)
    if start < 0:
        return parse_tqdm_line(line) if line.endswith("]") or "][" in line else None
    return _dicts_to_metric(line, start)


class HfTrainerParser:
    """The Trainer's console: its log dicts, and its training bar told from the others.

    Bars are read by a `TqdmParser` (the largest total is the training bar), so an
    evaluation bar finishing at `2/2` never reports an ETA of 0 or step 2 for the run.
    """

    def __init__(self) -> None:
        self.bars = TqdmParser()
        self.block: str | None = None
        """`train` or `eval` inside a `***** train metrics *****` block, else `None`."""

    def feed(self, line: str) -> LogMetric | None:
        """Parse a log dict line or a bar line.

        Raises:
            ValueError: a value in a dict is not a number, or a bar does not parse.
        """
        line = normalise_line(line)
        start = _dict_start(line)
        if start < 0:
            if self.block is not None:
                item = _BLOCK_ITEM.match(line)
                if item is not None:
                    return self._block_item(item[1], item[2])
                self.block = None
            block = _METRICS_BLOCK.match(line.strip()) if line[:5] == "*****" else None
            if block is not None:
                self.block = block[1]
                return None
            return self.bars.feed(line) if line[-1:] == "]" or "][" in line else None
        self.block = None
        return _dicts_to_metric(line, start)

    def _block_item(self, key: str, text: str) -> LogMetric | None:
        """One `  key = value` line of a `***** train metrics *****` block (`log_metrics`).

        Those blocks repeat the run's summary: the train block's `train_loss` is the run
        average (`TRAIN_LOSS_RUN_MEAN`), never the last step's loss; `0:02:38.43` durations
        and other words are left to the plain-line reader, which skips them.
        """
        if self.block == "train" and key == "train_loss":
            key = _RUN_MEAN_KEY
        return pairs_to_metric([(key, text)])

    def reset(self) -> None:
        """Forget the training bar."""
        self.bars.reset()
        self.block = None


def _dict_start(line: str) -> int:
    """Where the line's first log dict opens, or -1.

    A dict after a colon is a value quoted in a sentence (transformers' ``generation_config`
    default values have been modified to match model-specific defaults: {'bos_token_id':
    50256, ...}``), not a log dict.
    """
    if "{'" not in line:  # most lines: an `in` test is cheaper than `find`'s call
        return -1
    start = line.find("{'")
    if start > 0 and line[:start].rstrip().endswith(":"):
        return -1
    return start


def _dicts_to_metric(line: str, start: int) -> LogMetric | None:
    r"""The values of every dict on a line, at the step and epoch of the last one.

    Redraws run together (a file whose `\r` were dropped) put bars and dicts on one line,
    and a redraw can cut a dict short before its `}`: such a dict ends where the next bar
    or dict starts, and its values so far are kept.
    """
    pairs: list[tuple[str, str]] = []
    while start >= 0:
        following = line.find("{'", start + 2)
        close = line.find("}", start, following if following >= 0 else len(line))
        if close >= 0:
            found = _ITEM.findall(line, start, close + 1)
            if line.find("'train_runtime'", start, close) >= 0:  # the end-of-run record only
                found = [(_RUN_MEAN_KEY if key == "train_loss" else key, text)
                         for key, text in found]
            pairs.extend(found)
        else:
            bar = _BAR_START.search(line, start, following if following >= 0 else len(line))
            end = bar.start() if bar else (following if following >= 0 else len(line))
            pairs.extend((key, text) for key, text in _ITEM.findall(line, start, end)
                         if text.strip())
        start = following
    # a per-class list (`'eval_per_category_iou': [nan, 0.61]`, or a numpy `array([...])`) is
    # no single value: left out, the dict's other values kept
    pairs = [(key, text) for key, text in pairs if not text.startswith(_LIST_STARTS)]
    if pairs and pairs[0][0] == _EPISODES_KEY:  # a TRL online trainer's dict (PPO, RLOO)
        pairs[0:1] = [] if pairs[0][1].strip() == "0" else [(_EPISODES_NAME, pairs[0][1])]
    return pairs_to_metric(pairs) if pairs else None


def run_summary(metric: LogMetric) -> LogMetric:
    """The Trainer's end-of-run record with its `train_loss` as `TRAIN_LOSS_RUN_MEAN`.

    That record (`train_runtime`, `train_samples_per_second`, ..., `train_loss`) reports the
    loss averaged over the whole run; read as `train/loss`, it became the run's last loss
    (a summary saying 1.85 -> 0.812 where the last step logged 0.405).
    """
    values = tuple((TRAIN_LOSS_RUN_MEAN if name == TRAIN_LOSS else name, value)
                   for name, value in metric.values)
    return LogMetric(values, metric.step, metric.epoch, metric.taken_at,
                     metric.unparsed_values)


def parse_trainer_state(text: str) -> list[LogMetric]:
    """Parse a whole `trainer_state.json` document into one metric per `log_history` entry.

    The Trainer rewrites this file at every save, so it is parsed as a document, not as lines.
    Entries that `read_trainer_state` counts as unparsed are left out.

    Raises:
        ValueError: the text is not JSON or has no `log_history` list.
    """
    return read_trainer_state(text)[0]


def read_trainer_state(text: str) -> tuple[list[LogMetric], list[tuple[int, str]]]:
    """The metrics of a `trainer_state.json` document, and its unparsed entries.

    Returns:
        The metrics, oldest first, and (1-based index in `log_history`, reason) per unparsed
        entry.

    An entry is unparsed when its step or epoch is no count or none of its values is usable
    (see `parsers.values.check_metric`); an entry without numbers is no metric, not unparsed.

    Raises:
        ValueError: the text is not JSON (or nests deeper than `safe_json.MAX_DEPTH`) or has
            no `log_history` list.
    """
    state = safe_json.loads(text)
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise ValueError("trainer_state.json without a log_history list")
    metrics = []
    unparsed = []
    for number, entry in enumerate(history, 1):
        if isinstance(entry, dict):
            try:
                metric = record_to_metric(entry)
                if metric is not None and "train_runtime" in entry:
                    metric = run_summary(metric)
                if metric is not None:
                    metrics.append(check_metric(metric))
            except ValueError as error:
                unparsed.append((number, str(error)))
    return metrics, unparsed
