"""The line-API tables' cells: cut or padded to their column, one blank cell either side."""

from __future__ import annotations

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style

from tui.widgets.strip_cells import fit, last_column_width, padded, text_cell

RED = Style.parse("red")


def text(cell: list[Segment]) -> str:
    return "".join(segment.text for segment in cell)


def test_a_short_cell_is_padded_on_the_side_away_from_its_alignment() -> None:
    assert text(fit(text_cell("42"), 5)) == "42   "
    assert text(fit(text_cell("42"), 5, right=True)) == "   42"
    assert text(fit(text_cell("12345"), 5)) == "12345"


def test_a_long_cell_ends_in_an_ellipsis_styled_as_the_text_it_cuts() -> None:
    cell = [Segment("[box] ", RED), Segment("python train.py")]
    cut = fit(cell, 10)
    assert text(cut) == "[box] pyt…"
    assert cut[-1] == Segment("…", None)
    cut = fit(cell, 4)
    assert text(cut) == "[bo…" and cut[-1] == Segment("…", RED)
    cut = fit(cell, 7)  # the styled run fits exactly: the ellipsis stands for the next one
    assert text(cut) == "[box] …" and cut[-1] == Segment("…", None)


def test_wide_characters_count_two_cells_and_never_overflow() -> None:
    for width in range(1, 9):
        assert cell_len(text(fit(text_cell("训练训练训练"), width))) == width


def test_a_line_is_each_cell_with_one_blank_either_side() -> None:
    line = padded([(text_cell("a"), False), (text_cell("7"), True)], [3, 4])
    assert text(line) == " a       7 "
    assert len(text(line)) == (3 + 2) + (4 + 2)


def test_the_last_column_takes_what_the_others_and_the_blank_end_leave() -> None:
    # 3 and 7 cells, each padded by one on either side (14), one blank at the end: 100 - 17
    assert last_column_width([3, 7], 8, 100) == 83
    line = padded(
        [(text_cell("a"), False), (text_cell("b"), True), (text_cell("c"), False)], [3, 7, 83]
    )
    assert sum(len(s.text) for s in line) == 99  # the line and its one blank cell: 100
    assert last_column_width([3, 7], 8, 25) == 8  # the least it gets, cut by the terminal
    assert last_column_width([], 8, 40) == 37
