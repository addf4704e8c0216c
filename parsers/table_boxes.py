"""Boxed tables in logs: `| a | b |` and Rich's `│ a │ b │` rows, rules, and name/value tables."""

from __future__ import annotations

from parsers.model import LogMetric
from parsers.table_header import is_number
from parsers.table_names import anchor_of, cell_value, column_name
from parsers.text import STANDARD_NAMES, parse_number
from parsers.values import to_epoch, to_step

BORDERS = frozenset("|┃│║")
"""What a boxed row opens and closes with: ASCII and markdown pipes, Rich's heavy and light
bars."""
_RULE_CHARS = "-=+:|─━═┏┓┗┛┡┩└┘├┤┬┴┼╇╈┳┻╋┃│║╭╮╰╯╞╡╪╘╛╒╕ \t"
_RULE_LINES = frozenset("-=─━═")
BOX_STARTS: frozenset[str] = BORDERS | frozenset(_RULE_CHARS)
"""First characters of the lines a boxed table is drawn with (its rows and its rules)."""
_SPLITS = {
    "train": "train",
    "training": "train",
    "eval": "val",
    "val": "val",
    "valid": "val",
    "validation": "val",
    "validate": "val",
    "test": "test",
}
"""Section names (`train/`, `eval/`) and header words (`Test metric`) that give a split."""


def box_cells(stripped: str) -> list[str] | None:
    """The stripped cells of a boxed row (`| a | b |`, `│ a │ b │`); None for any other line."""
    border = stripped[:1]
    if border not in BORDERS or stripped[-1:] != border or len(stripped) < 3:
        return None
    return [cell.strip() for cell in stripped[1:-1].split(border)]


def is_rule(stripped: str) -> bool:
    """Whether a line is a table's rule: `-----`, `+---+---+`, `|:---:|`, `└───┴───┘`."""
    return (
        len(stripped) >= 3
        and any(char in _RULE_LINES for char in stripped[:3])
        and not stripped.strip(_RULE_CHARS)
    )


def split_of(text: str) -> str | None:
    """The split a section (`eval/`) or a header (`Test metric`) names, if any."""
    words = text.lower().replace("/", " ").replace("_", " ").split()
    return next((_SPLITS[word] for word in words if word in _SPLITS), None)


class NameValueRows:
    """A vertical table: a name and a value a row, under optional `section/` rows.

    Stable-Baselines3's `| rollout/ |  |` then `|    ep_rew_mean | 1.5 |`, Rich's `│ test_acc │
    0.9 │` under `┃ Test metric ┃ DataLoader 0 ┃`. The table becomes one metric when it ends
    (its closing rule), at the step its anchor row names (`total_timesteps`).
    """

    __slots__ = ("_section", "rows", "split")

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str]] = []
        """(section, name, value as printed) of each row so far."""
        self._section = ""
        self.split = "train"
        """The split a row names none of belongs to (a header's `Test metric` says test)."""

    def add(self, cells: list[str]) -> bool:
        """Add a row of two cells; False when it is no name/value row (nor a section)."""
        if len(cells) == 1:  # `| time/ |`: a section alone
            cells = [cells[0], ""]
        if len(cells) != 2 or not cells[0] or not cells[0][0].isalpha():
            return False
        name, text = cells
        if not text:
            if not name.endswith("/") or " " in name:
                return False
            self._section = name
            return True
        if not self.rows and not is_number(text):
            return False  # a value that is no number continues a table, never opens one
        self.rows.append((self._section, name, text))
        return True

    def take(self) -> LogMetric | None:
        """The table's metric (None: no value in it), and forget the table."""
        rows, default = self.rows, self.split
        self.rows, self._section, self.split = [], "", "train"
        values: list[tuple[str, float]] = []
        step: int | None = None
        epoch: float | None = None
        for section, key, text in rows:
            anchor = anchor_of(key.lower())
            try:
                if anchor == "step" and step is None:
                    step = to_step(parse_number(text))
                elif anchor == "epoch" and epoch is None:
                    epoch = to_epoch(parse_number(text))
                name = None if anchor else _row_name(section, key, default)
                if name is not None:
                    values.append(cell_value(text, name))
            except ValueError:
                continue  # a word where a value goes (an env id, a truncated `...`)
        return LogMetric(tuple(values), step, epoch) if values else None


def _row_name(section: str, key: str, default: str) -> str | None:
    """A row's metric: its standard name, or `section/key` as printed (`rollout/ep_len_mean`)."""
    split = split_of(section) if section else default
    name = column_name(key, split or "train")
    if name is None or not section or name in STANDARD_NAMES:
        return name
    return name if split is not None and "/" in name else f"{section}{key}"
