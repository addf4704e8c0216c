"""Hugging Face Trainer: the dicts it prints on the console and its `trainer_state.json`."""

from __future__ import annotations

import json
import re

from parsers.keyvalue import pairs_to_metric, record_to_metric
from parsers.model import LogMetric
from parsers.text import normalise_line
from parsers.tqdm_bar import parse_tqdm_line

# transformers 5 quotes every value ('loss': '6.193'); 4.x printed bare numbers and nan
_ITEM = re.compile(r"'([^']+)': '?([^',}]*)'?")


def parse_hf_trainer_line(line: str) -> LogMetric | None:
    """Parse a printed log dict such as `{'loss': '6.193', 'epoch': '1.016'}`, or a tqdm bar.

    Raises:
        ValueError: a value in the dict is not a number.
    """
    line = normalise_line(line)
    start = line.find("{'")
    if start < 0:
        return parse_tqdm_line(line) if line.endswith("]") else None
    end = line.rfind("}")
    if end < start:
        return None
    return pairs_to_metric(_ITEM.findall(line, start, end + 1))


def parse_trainer_state(text: str) -> list[LogMetric]:
    """Parse a whole `trainer_state.json` document into one metric per `log_history` entry.

    The Trainer rewrites this file at every save, so it is parsed as a document, not as lines.

    Raises:
        ValueError: the text is not JSON or has no `log_history` list.
    """
    state = json.loads(text)
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise ValueError("trainer_state.json without a log_history list")
    metrics = []
    for entry in history:
        if isinstance(entry, dict):
            metric = record_to_metric(entry)
            if metric is not None:
                metrics.append(metric)
    return metrics
