"""Cells of the line-API tables: columns of fixed width, each cell a run of pre-styled segments.

The fleet table and the process table draw each row once per change as one `Strip` (Textual's
line API) instead of a `DataTable`'s cell-by-cell rendering through Rich; the cutting and
padding of a row's cells to their columns lives here, once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style

Cell = list[Segment]
"""One cell's segments: text with its style (`None` for the line's own)."""
R = TypeVar("R")


@dataclass(frozen=True)
class Column(Generic[R]):
    """One column: key, header, width, alignment and how a row becomes its segments."""

    key: str
    label: str
    width: int
    cell: Callable[[R], Cell]
    right: bool = False


def text_cell(text: str, style: Style | None = None) -> Cell:
    """A cell of one run of text."""
    return [Segment(text, style)]


def cell_width(text: str) -> int:
    """Terminal cells `text` takes."""
    # Hosts, users, pids and figures are ASCII but for the fleet's bar blocks (one cell each):
    # skip Rich's per-character width table for them, the largest cost of a row once it was
    # cached.
    return len(text) if text.isascii() or set(text) <= _BAR else cell_len(text)


_BAR = frozenset("█░")


def fit(cell: Cell, width: int, right: bool = False) -> Cell:
    """`cell` cut or padded to exactly `width` cells.

    A cut ends in an ellipsis styled as the text it cuts (as Rich's `overflow="ellipsis"`).
    """
    length = sum(cell_width(segment.text) for segment in cell)
    if length <= width:
        pad = Segment(" " * (width - length))
        return [pad, *cell] if right else [*cell, pad]
    out: Cell = []
    room = width - 1
    for segment in cell:
        size = cell_width(segment.text)
        if size > room:
            if room > 0:
                out.append(Segment(set_cell_size(segment.text, room), segment.style))
            out.append(Segment("…", segment.style))
            break
        out.append(segment)
        room -= size
    return out


def last_column_width(widths: Sequence[int], least: int, width: int) -> int:
    """What a line `width` cells wide leaves its last column (`least` at the least).

    The columns of `widths` before it and every column's padding (one blank cell on either
    side, as `padded` lays them), and one blank cell left at the line's end, where a terminal
    would otherwise show a cursor or wrap.
    """
    return max(least, width - sum(w + 2 for w in widths) - 3)


def padded(cells: Sequence[tuple[Cell, bool]], widths: Sequence[int]) -> Cell:
    """Each (cell, right-aligned) fitted to its width, with one blank cell on either side.

    The blank cells are a `DataTable`'s cell padding: a line is `sum(width + 2)` cells.
    """
    segments: Cell = [Segment(" ")]
    last = len(widths) - 1
    for i, ((cell, right), width) in enumerate(zip(cells, widths, strict=True)):
        segments += fit(cell, width, right)
        segments.append(Segment(" " if i == last else "  "))
    return segments
