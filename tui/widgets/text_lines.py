"""A base for panels drawn as a list of Rich `Text` lines through Textual's line API."""

from __future__ import annotations

from typing import Any

from rich.segment import Segment
from rich.text import Text
from textual.geometry import Size
from textual.strip import Strip

from tui.widgets.kept_lines import KeptLines


class TextLines(KeptLines):
    """Renders `build_lines(width)` one line at a time, rebuilt only when its inputs change.

    Going through `render()` makes Textual wrap and re-style the whole text on every repaint;
    turning each line into a `Strip` once is about 2.5 times cheaper for the GPU panel of an
    8-GPU machine, which is redrawn every second. Subclasses list their reactives in
    `line_inputs()`; a change of any of them (by identity) or of the width rebuilds the lines.
    """

    DEFAULT_CSS = """
    TextLines {
        height: auto;
        width: 1fr;
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._width = -1
        self._inputs: tuple[Any, ...] | None = None
        self._lines: list[Text] = []
        self._strips: list[Strip | None] = []

    def build_lines(self, width: int) -> list[Text]:
        """The lines to show at `width` cells."""
        raise NotImplementedError

    def line_inputs(self) -> tuple[Any, ...]:
        """The values the lines are built from."""
        raise NotImplementedError

    def _current_lines(self, width: int) -> list[Text]:
        # The inputs are held and compared by identity: holding them keeps a freed sample's id
        # from being reused by a newer one, and no deep compare of samples is done.
        inputs = self.line_inputs()
        same = (
            self._inputs is not None
            and width == self._width
            and len(inputs) == len(self._inputs)
            and all(a is b for a, b in zip(inputs, self._inputs, strict=True))
        )
        if not same:
            self._width, self._inputs = width, inputs
            self._lines = self.build_lines(width)
            self._strips = [None] * len(self._lines)
        return self._lines

    @property
    def plain(self) -> str:
        """The lines as shown now, without styles (for tests and screen readers)."""
        return "\n".join(line.plain for line in self._current_lines(self.size.width))

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """One row per line."""
        return max(1, len(self._current_lines(width)))

    def render_line(self, y: int) -> Strip:
        """Line `y`, as a strip exactly as wide as the widget."""
        width = self.size.width
        lines = self._current_lines(width)
        if y >= len(lines):
            return Strip.blank(width, self.rich_style)
        strip = self._strips[y]
        if strip is None:
            # The widget's own style (theme colours, background) goes under the text's spans,
            # as `render()` would have applied it.
            base = self.rich_style
            segments = Segment.apply_style(lines[y].render(self.app.console, end=""), base)
            strip = Strip(list(segments)).adjust_cell_length(width, base)
            self._strips[y] = strip
        return strip
