"""Replaying the generic parser's decisions on lines of a shape it has already parsed."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from operator import itemgetter

from parsers.model import LogMetric
from parsers.text import local_stamp, parse_duration, parse_number
from parsers.values import to_epoch, to_step

PLAN_CACHE_SIZE = 1024
"""Line shapes remembered (seen once, or with a plan); a log prints a few dozen."""

DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
"""For `bytes.translate`: the shape of a line's UTF-8 bytes (two lines of one shape differ in
their digits 0-9 only; any other character is the same, at the same place)."""

VALUE, NUMBER, STEP, EPOCH, DURATION = range(5)
"""What a plan does with one pair's text: a value read by `float`, a value that needs
`parse_number` (quotes, `%`, thousands), the step, the epoch, an `eta` duration."""

Action = tuple[int, str]
"""(what to do with the text, the metric name it gives)."""
Pair = tuple[str, slice, str, slice]
"""A pair the regex found: its key, where the key is, its value text, where the text is."""
KeyInfo = tuple[bool, bool, "str | None", str]
"""What the parser takes a key for: (a config key, a known metric or counter, the counter it
is or None, the normalised metric name)."""
Stamp = tuple[slice, "slice | None"]
"""Where `YYYY-MM-DD hh:mm:ss` and the fraction of a second after it are in the line."""
_NOTHING = slice(0, 0)


class LinePlan:
    r"""Where the numbers of one line shape are, and what each of them is.

    The generic parser's decisions on a line, apart from the numbers themselves, depend only
    on its shape: every regex and test it runs treats the digits 0-9 alike (`\d`, `\w`,
    `[A-Za-z]`, substrings without digits), with one exception, key names (`acc1` is top-1
    accuracy, `acc5` top-5). So a plan made from one line holds for every line of its shape
    whose keys with digits are the same; `replay` checks those keys and converts the numbers
    at the places the plan names, with the same functions the parser calls.
    """

    __slots__ = (
        "_actions",
        "_count",
        "_epoch",
        "_key_texts",
        "_keys",
        "_names",
        "_stamp",
        "_step",
        "_texts",
        "_words",
    )

    def __init__(
        self,
        actions: list[tuple[Action, slice]],
        keys: list[tuple[str, slice]],
        stamp: Stamp | None,
        words: Callable[[str], tuple[int | None, float | None]] | None,
        float_counts: bool = False,
    ) -> None:
        """Make a plan.

        Args:
            actions: per pair that gives something, in line order, what to do with its text
                and where the text is.
            keys: the keys that contain a digit and where they are.
            stamp: where the line's timestamp is, when it has one.
            words: the step and epoch a line names outside its pairs (`Epoch 3 | ...`,
                `Epoch [1/3], Step [100/600], ...`), when the line has `poch` or `[` in it.
            float_counts: the step and epoch texts are numbers as `float` reads them, so
                `float` can stand for `parse_number` (which tries it first): `float` takes
                the texts of one shape alike.
        """
        kinds = [kind for (kind, _), _ in actions]
        counters = [(kind, where) for (kind, _), where in actions if kind in (STEP, EPOCH)]
        simple = (
            NUMBER not in kinds
            and DURATION not in kinds
            and kinds.count(STEP) <= 1
            and kinds.count(EPOCH) <= 1
        )
        if simple:  # values read by `float` alone, at most one step and one epoch
            actions = [item for item in actions if item[0][0] == VALUE]
        self._actions = None if simple else tuple(action for action, _ in actions)
        self._names = tuple(name for (_, name), _ in actions)
        # `itemgetter` hands back a tuple of all the texts in one call in C; the empty slice
        # at the end keeps it a tuple when there is a single text
        self._texts = itemgetter(*[where for _, where in actions], _NOTHING)
        self._step = next((where for kind, where in counters if kind == STEP), None)
        self._epoch = next((where for kind, where in counters if kind == EPOCH), None)
        self._count: Callable[[str], float] = float if float_counts else read_count
        self._keys = itemgetter(*[where for _, where in keys], _NOTHING) if keys else None
        self._key_texts = tuple(key for key, _ in keys) + ("",)
        self._stamp = stamp
        self._words = words

    def replay(self, line: str) -> LogMetric | None:
        """The metric of a line of this plan's shape; None when its keys differ from the plan's.

        Raises:
            ValueError: a number that is no number or no count; the caller parses the line
                again the long way, which raises the parser's own error.
        """
        if self._keys is not None and self._keys(line) != self._key_texts:
            return None
        step: int | None = None
        epoch: float | None = None
        if self._actions is None:
            # the common case: every value built in C (`zip` stops before the empty text)
            values = tuple(zip(self._names, map(float, self._texts(line)), strict=False))
            if self._step is not None:
                step = to_step(self._count(line[self._step]))
            if self._epoch is not None:
                epoch = to_epoch(self._count(line[self._epoch]))
        else:
            values, step, epoch = self._read_values(line)
        if self._words is not None and (step is None or epoch is None):
            in_words = self._words(line)
            step = in_words[0] if step is None else step
            epoch = in_words[1] if epoch is None else epoch
        taken_at: float | None = None
        if self._stamp is not None:
            stamp, fraction = self._stamp
            taken_at = local_stamp(line[stamp])
            if taken_at is not None and fraction is not None:
                taken_at += float("0." + line[fraction])
        return LogMetric(values, step, epoch, taken_at)

    def _read_values(
        self, line: str
    ) -> tuple[tuple[tuple[str, float], ...], int | None, float | None]:
        """Values, step and epoch pair by pair, as `_parse_pairs` reads them."""
        assert self._actions is not None
        values: list[tuple[str, float]] = []
        step: int | None = None
        epoch: float | None = None
        for (kind, name), text in zip(self._actions, self._texts(line), strict=False):
            if kind == VALUE:
                values.append((name, float(text)))
            elif kind == STEP:
                step = to_step(read_count(text))
            elif kind == EPOCH:
                epoch = to_epoch(read_count(text))
            elif kind == NUMBER:
                values.append((name, read_number(text)))
            else:
                values.append((name, parse_duration(text)))
        return tuple(values), step, epoch


def make_plan(
    line: str,
    metric: LogMetric,
    pairs: list[Pair],
    key_info: Mapping[str, KeyInfo],
    stamp: Stamp | None,
    words: Callable[[str], tuple[int | None, float | None]] | None,
) -> LinePlan | None:
    """A plan for the lines of `line`'s shape; None unless it reads `line` as `metric`.

    It takes the pairs as the generic parser's value loop takes them: config keys and
    clock-like texts (`12:30`) give nothing, an `eta` clock text is a duration, `step` and
    `epoch` counters are the step and epoch, the rest are values.

    Args:
        line: a normalised line the parser read as `metric`.
        metric: what the parser gave for it.
        pairs: the pairs the parser's regex found in `line`, in order.
        key_info: what the parser takes each key for.
        stamp: where the line's timestamp is, when it has one.
        words: as for `LinePlan`.
    """
    actions: list[tuple[Action, slice]] = []
    keys: list[tuple[str, slice]] = []
    float_counts = True
    for key, key_at, text, text_at in pairs:
        if any(map(str.isdigit, key)):  # `acc1` and `acc5`: one shape, two metrics
            keys.append((key, key_at))
        config, _, counter, name = key_info[key]
        if config:
            continue
        if counter is None:
            if ":" in text:
                continue
            kind = VALUE if is_float(text) else NUMBER
        elif ":" in text:
            if counter != "eta":
                continue
            kind, name = DURATION, "eta_s"
        else:
            kind = {"step": STEP, "epoch": EPOCH}.get(counter, NUMBER)
            float_counts = float_counts and is_float(text)
        actions.append(((kind, name), text_at))
    if not actions:
        return None
    plan = LinePlan(actions, keys, stamp, words, float_counts)
    try:
        same = repr(plan.replay(line)) == repr(metric)  # repr: NaN equals NaN
    except (ValueError, ArithmeticError):
        same = False
    return plan if same else None


def read_number(text: str) -> float:
    """A value as `parse_number` reads it, or a count of a total (`9820/10000`) as a fraction.

    Raises:
        ValueError: the text is not a number, or a count of a total of 0.
    """
    if "/" not in text:
        return parse_number(text)
    count, _, total = text.partition("/")
    if float(total) == 0:
        raise ValueError(f"a count of a total of 0: {text[:40]!r}")
    return float(count) / float(total)


def read_count(text: str) -> float:
    """A step or epoch as `parse_number` reads it; of `1/3` (the first of 3), the 1.

    Raises:
        ValueError: the text is not a number.
    """
    return parse_number(text.partition("/")[0] if "/" in text else text)


def is_float(text: str) -> bool:
    """Whether `float()` reads `text`."""
    try:
        float(text)
    except ValueError:
        return False
    return True


class LinePlans:
    """Plans by line shape, made the second time a shape gives a metric.

    The first sighting only notes the shape, so lines that never repeat it (prose, or
    numbers printed at full precision in varying widths) cost a dict entry, not a plan.
    Bounded: emptied when full.
    """

    def __init__(self) -> None:
        self.plans: dict[bytes, LinePlan | None] = {}
        """A plan per shape, or None for a shape seen once."""
        self.ready: dict[bytes, LinePlan] = {}
        """Shapes whose lines are read by their plan alone: see `keep_ready`."""

    def keep_ready(self, shape: bytes) -> None:
        """Keep a shape whose line its plan has just read, and no other reading changed.

        The caller checked the rest: the record reading kept the plan's metric as it was
        (`parsers.records.read_better` decides that per shape). What is checked here: the shape
        holds no `{` and its first key does not come back in it, so no line of that shape is a
        printed mapping or records run together (`parsers.keyvalue.last_redraw`). Its next
        lines skip those readings, which cannot change what they give. Bounded: emptied when
        full.
        """
        plan = self.plans.get(shape)
        if plan is None or shape in self.ready or b"{" in shape:
            return
        colon = shape.find(b":")  # a first key with digits: zeros in the shape, as in its copy
        if colon > 0 and shape.find(b" " + shape[: colon + 1], colon) > 0:
            return
        if len(self.ready) >= PLAN_CACHE_SIZE:
            self.ready = {}
        self.ready[shape] = plan

    def learn(self, shape: bytes, make: Callable[[], LinePlan | None]) -> None:
        """Note a shape that gave a metric; make its plan when it is seen the second time."""
        plans = self.plans
        if shape in plans:
            if plans[shape] is None:  # a plan made already stays (keys with other digits)
                plans[shape] = make()
            return
        if len(plans) >= PLAN_CACHE_SIZE:
            self.plans = plans = {}
        plans[shape] = None
