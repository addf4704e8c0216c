"""Hugging Face Trainer: the dicts it prints on the console and its `trainer_state.json`."""

from __future__ import annotations

import re

from parsers import safe_json
from parsers.keyvalue import pairs_to_metric
from parsers.mapping_line import find_mapping, mapping_to_metric, parse_mapping_line
from parsers.model import LogMetric
from parsers.text import normalise_line
from parsers.tqdm_bar import TqdmParser, parse_tqdm_line
from parsers.values import check_metric
from parsers.vocabulary import TRAIN_LOSS_RUN_MEAN

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
    if find_mapping(line) < 0:
        return parse_tqdm_line(line) if line.endswith("]") or "][" in line else None
    return parse_mapping_line(line)


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
        if find_mapping(line) < 0:
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
        return parse_mapping_line(line)

    def _block_item(self, key: str, text: str) -> LogMetric | None:
        """One `  key = value` line of a `***** train metrics *****` block (`log_metrics`).

        Those blocks repeat the run's summary: the train block's `train_loss` is the run
        average (`TRAIN_LOSS_RUN_MEAN`), never the last step's loss; `0:02:38.43` durations
        and other words are left to the plain-line reader, which skips them.
        """
        if self.block == "train" and key == "train_loss":
            key = TRAIN_LOSS_RUN_MEAN
        return pairs_to_metric([(key, text)])

    def reset(self) -> None:
        """Forget the training bar."""
        self.bars.reset()
        self.block = None


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
                metric = mapping_to_metric(entry)
                if metric is not None:
                    metrics.append(check_metric(metric))
            except ValueError as error:
                unparsed.append((number, str(error)))
    return metrics, unparsed
