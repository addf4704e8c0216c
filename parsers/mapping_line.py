"""Printed mappings: a Python dict or a JSON object on a log line, read without `eval`."""

from __future__ import annotations

import json
import re

from parsers.json_records import record_to_metric
from parsers.model import LogMetric
from parsers.text import STANDARD_NAMES, metric_name, parse_number
from parsers.vocabulary import TRAIN_LOSS, TRAIN_LOSS_RUN_MEAN
from parsers.vocabulary_short import METRIC_WORDS

MAX_DEPTH = 8
"""Deepest nesting read: a metric dict is one to three levels deep; below this the mapping
counts as cut short there."""
MAX_ITEMS = 1024
"""Items read from one mapping (or list) before it counts as cut short."""
MAX_PROSE_WORDS = 4
"""Words a prefix ending in `: ` may hold before its mapping is a value quoted in a sentence."""

# A token, blanks before it skipped. Strings never backtrack (possessive); an unterminated
# string matches nothing, and the mapping counts as cut short there.
_TOKEN = re.compile(
    r"""\s*+(?:('(?:[^'\\]|\\.)*+'|"(?:[^"\\]|\\.)*+")"""
    r"|([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?"
    r"|nan|NaN|inf|Infinity))(?![\w.])"
    r"|([{}\[\](),:=])"
    r"|([A-Za-z_][\w.]*+))",
    re.DOTALL,
)
_STRING, _NUMBER, _PUNCT, _NAME = 1, 2, 3, 4
_CONSTANTS: dict[str, object] = {
    "True": True,
    "False": False,
    "None": None,
    "true": True,
    "false": False,
    "null": None,
}
# `np.float64(0.93)` (numpy 2's repr), `tensor(0.52, device='cuda:0')`, `float32(1.5)`
_NUMBER_WRAPPER = re.compile(r"(?:(?:np|numpy|torch)\.)?(?:float|int|uint)\d*|tensor")
_ESCAPE = re.compile(r"\\(.)")
_PYTHON_WORDS = re.compile(r"\b(?:nan|inf|True|False|None)\b")
_JSON_WORDS = {"nan": "NaN", "inf": "Infinity", "True": "true", "False": "false", "None": "null"}
_JSON_DECODE = json.JSONDecoder().raw_decode
"""(value, end) of the JSON value at an index; `NaN` and `Infinity` accepted."""
_PROSE_WORD = re.compile(r"[A-Za-z]{2,}")
_EPISODES_KEY, _EPISODES_NAME = "eps", "throughput/samples_s"
"""TRL's PPO and RLOO dicts open with `eps`, episodes (prompts) a second printed as an int:
samples a second, and `0` is a rounding of a slow run, not a stall."""
_RUN_SUMMARY_KEY = "train_runtime"
"""The key of the Trainer's end-of-run record, whose `train_loss` is the run's mean loss."""


class _Cut(Exception):
    """The text ended, or held something no mapping holds, before the value was complete."""


def find_mapping(line: str, start: int = 0) -> int:
    """Where the first printed mapping at or after `start` opens, or -1.

    A mapping after `: ` that ends a sentence (`... defaults: {'bos_token_id': 50256}`) is a
    value quoted in prose, not a record: a prefix of more than `MAX_PROSE_WORDS` words that
    ends in a colon and a blank.
    """
    # the common line has neither: two `in` tests in C before any `find`
    if "{'" not in line and '{"' not in line:
        return -1
    single, double = line.find("{'", start), line.find('{"', start)
    at = min(single, double) if single >= 0 and double >= 0 else max(single, double)
    if at > 0:
        prefix = line[start:at].rstrip()
        if (
            prefix.endswith(":")
            and line[at - 1 : at].isspace()
            and len(_PROSE_WORD.findall(prefix)) > MAX_PROSE_WORDS
        ):
            return -1
    return at


def read_mappings(line: str, start: int) -> list[dict[str, object]]:
    """Every mapping from `start` on: one after another, as redraws run together put them.

    A mapping cut short (a terminal redraw, a bar written over its end) keeps the items it
    has; the next one is looked for after the point where it was cut.
    """
    mappings = []
    while start >= 0:
        mapping, end = _decode_whole(line, start)
        if mapping is None:
            reader = _Reader(line, start + 1)
            mapping = {}
            try:
                reader.mapping_items(mapping, 1)
            except _Cut:
                pass
            end = reader.at
        if mapping:
            mappings.append(mapping)
        start = find_mapping(line, max(end, start + 1))
    return mappings


def _decode_whole(line: str, start: int) -> tuple[dict[str, object] | None, int]:
    """(the mapping, where it ends) by the C JSON decoder, or (None, -1) to read it token by token.

    The common mapping is whole: a JSON object, or a flat Python dict whose quotes become
    JSON's (`{'loss': 0.5, 'epoch': 1.0}`: no `"`, backslash, call or nesting inside), read
    at C speed; anything else (cut short, nested Python, `np.float64(...)`) is left to the
    tokenizer.
    """
    if line.startswith('{"', start):
        try:
            value, end = _JSON_DECODE(line, start)
        except (ValueError, RecursionError):  # cut short, or nested deeper than a stack
            return None, -1
        return (value, end) if type(value) is dict and _depth_ok(value) else (None, -1)
    close = line.find("}", start)
    if close < 0:
        return None, -1
    text = line[start : close + 1]
    if '"' in text or "\\" in text or "(" in text or "{" in text[1:] or "[" in text:
        return None, -1
    text = text.replace("'", '"')
    # `in` tests in C first: most dicts hold none of Python's own words
    if "nan" in text or "inf" in text or "True" in text or "False" in text or "None" in text:
        text = _PYTHON_WORDS.sub(_json_word, text)
    try:
        value = _JSON_DECODE(text, 0)[0]
    except ValueError:
        return None, -1
    return (value, close + 1) if type(value) is dict else (None, -1)


def _depth_ok(mapping: dict[str, object], depth: int = 1) -> bool:
    """Whether nested mappings stay within `MAX_DEPTH` levels, as the tokenizer reads them."""
    return depth <= MAX_DEPTH and all(
        _depth_ok(value, depth + 1) for value in mapping.values() if type(value) is dict
    )


def _json_word(match: re.Match[str]) -> str:
    return _JSON_WORDS[match[0]]


def parse_mapping_line(line: str) -> LogMetric | None:
    """The metric of the mappings printed on a normalised line, or None.

    Values that are no numbers are left out; the step and epoch are the last mapping's.

    Raises:
        ValueError: a step or epoch that is no count.
    """
    start = find_mapping(line)
    if start < 0:
        return None
    metrics = [
        metric
        for metric in map(mapping_to_metric, read_mappings(line, start))
        if metric is not None
    ]
    if not metrics:
        return None
    if len(metrics) == 1:
        return metrics[0]
    values = tuple(pair for metric in metrics for pair in metric.values)
    step = next((m.step for m in reversed(metrics) if m.step is not None), None)
    epoch = next((m.epoch for m in reversed(metrics) if m.epoch is not None), None)
    taken_at = next((m.taken_at for m in reversed(metrics) if m.taken_at is not None), None)
    return LogMetric(values, step, epoch, taken_at)


def mapping_to_metric(mapping: dict[str, object]) -> LogMetric | None:
    """The metric of one decoded mapping, or None when it holds only settings.

    A mapping with no step or epoch whose names are all settings (`{'lr': 0.001, 'epochs':
    10}`, a configuration printed as a dict) is no metric. TRL's online dicts open with
    `eps`; the Trainer's end-of-run record reports its `train_loss` as the run's mean.

    Raises:
        ValueError: a step or epoch that is no count, or a known metric's quoted value that
            is no number.
    """
    online = next(iter(mapping), None) == _EPISODES_KEY  # a TRL online trainer's record
    if online:
        mapping = dict(mapping)
        episodes = mapping.pop(_EPISODES_KEY)
        if episodes not in (0, "0"):
            mapping = {_EPISODES_NAME: episodes, **mapping}
    _check_quoted_values(mapping)
    metric = record_to_metric(mapping)
    if metric is None:
        return None
    if _RUN_SUMMARY_KEY in mapping:
        metric = run_summary(metric)
    if (
        not online
        and metric.step is None
        and metric.epoch is None
        and all(_is_setting(name) for name, _ in metric.values)
    ):
        return None
    return metric


def run_summary(metric: LogMetric) -> LogMetric:
    """The Trainer's end-of-run record with its `train_loss` as `TRAIN_LOSS_RUN_MEAN`.

    That record (`train_runtime`, `train_samples_per_second`, ..., `train_loss`) reports the
    loss averaged over the whole run; read as `train/loss`, it became the run's last loss
    (a summary saying 1.85 -> 0.812 where the last step logged 0.405).
    """
    values = tuple(
        (TRAIN_LOSS_RUN_MEAN if name == TRAIN_LOSS else name, value)
        for name, value in metric.values
    )
    return LogMetric(values, metric.step, metric.epoch, metric.taken_at, metric.unparsed_values)


def _check_quoted_values(mapping: dict[str, object]) -> None:
    """Raise `ValueError` for a known metric whose quoted value is no number (`'loss': 'abc'`).

    transformers 5 quotes every value; other quoted words (`'eos_token': '<|endoftext|>'`)
    are no metric and are left out, but a loss that is not a number is a line gone wrong.
    """
    for key, value in mapping.items():
        if type(value) is str and metric_name(key) in STANDARD_NAMES:
            parse_number(value)


def _is_setting(name: str) -> bool:
    """A name of a setting rather than a measured value (`lr`, `epochs`, `bos_token_id`)."""
    return name == "lr" or (
        name not in STANDARD_NAMES and not any(word in name.lower() for word in METRIC_WORDS)
    )


class _Reader:
    """A cursor over one line that decodes a Python or JSON literal, token by token."""

    __slots__ = ("at", "line")

    def __init__(self, line: str, at: int) -> None:
        self.line = line
        self.at = at
        """Where the next token starts: after a cut, where reading stopped."""

    def token(self) -> tuple[int, str]:
        """(kind, text) of the next token, moving past it; `_Cut` at the end or on garbage."""
        match = _TOKEN.match(self.line, self.at)
        if match is None:
            raise _Cut
        self.at = match.end()
        kind = match.lastindex or 0
        return kind, match[kind]

    def mapping_items(self, into: dict[str, object], depth: int) -> None:
        """Read `key: value, ...}` into `into`, the opening brace already read."""
        for _ in range(MAX_ITEMS):
            kind, text = self.token()
            if text == "}" and kind == _PUNCT:
                return
            if kind != _STRING:
                raise _Cut
            if self.token() != (_PUNCT, ":"):
                raise _Cut
            key = _unquote(text)
            at = self.at
            if self.token() == (_PUNCT, "{") and depth < MAX_DEPTH:
                # filled in place: a nested mapping cut short keeps what it has read
                nested: dict[str, object] = {}
                into[key] = nested
                self.mapping_items(nested, depth + 1)
            else:
                self.at = at
                into[key] = self.value(depth)
            kind, text = self.token()
            if kind != _PUNCT or text not in ",}":
                raise _Cut
            if text == "}":
                return
        raise _Cut

    def value(self, depth: int) -> object:
        """The next value: a number, a string, a constant, a list, or a nested mapping."""
        kind, text = self.token()
        if kind == _NUMBER:
            return float(text)
        if kind == _STRING:
            return _unquote(text)
        if kind == _PUNCT and depth < MAX_DEPTH:
            if text == "{":
                inner: dict[str, object] = {}
                self.mapping_items(inner, depth + 1)
                return inner
            if text in "[(":
                self.sequence("]" if text == "[" else ")", depth + 1)
                return None  # lists hold no metric of their own
        if kind == _NAME:
            if text in _CONSTANTS:
                return _CONSTANTS[text]
            if not self.line.startswith("(", self.at):
                return None  # a name (`int` in `defaultdict(int, ...)`): no value
            self.at += 1
            first = self.sequence(")", depth + 1)
            return first if _NUMBER_WRAPPER.fullmatch(text) else None
        raise _Cut

    def sequence(self, close: str, depth: int) -> object:
        """Read the items of a list, tuple or call up to `close`; the first item comes back.

        A call's keyword arguments (`device='cuda:0'`) are read and dropped.
        """
        first: object = None
        for number in range(MAX_ITEMS):
            at = self.at
            kind, text = self.token()
            if kind == _PUNCT and text == close:
                return first
            if kind == _NAME and self.token() == (_PUNCT, "="):
                item = self.value(depth)
            else:
                self.at = at
                item = self.value(depth)
                if number == 0:
                    first = item
            kind, text = self.token()
            if kind != _PUNCT or text not in (",", close):
                raise _Cut
            if text == close:
                return first
        raise _Cut


def _unquote(text: str) -> str:
    """The text of a quoted string (escapes reduced to the character they escape)."""
    body = text[1:-1]
    return _ESCAPE.sub(r"\1", body) if "\\" in body else body
