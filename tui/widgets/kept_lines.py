"""A widget that hands back its last rendered lines while nothing has repainted it."""

from __future__ import annotations

from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Footer


class KeptLines(Widget):
    """Keeps the strips of its last render until it is marked dirty.

    Textual redraws, in one frame, every widget that overlaps the box around all the frame's
    changes, and asks each for all its lines: the header's clock at the top and the process
    table below put every panel of the dashboard in that box every second. A panel that did
    not change still walked its lines, its borders and the line filters (about a tenth of a
    millisecond each). Every way a widget's look changes (`refresh`, a new size, a style,
    class or theme change) reaches it through `_set_dirty`, which Textual's own line cache
    relies on as well; it drops the kept lines here.
    """

    _kept: tuple[Region, list[Strip]] | None = None

    def _set_dirty(self, *regions: Region) -> None:
        self._kept = None
        super()._set_dirty(*regions)

    def render_lines(self, crop: Region) -> list[Strip]:
        """The lines of the last render when nothing repainted since and the crop is the same."""
        kept = self._kept
        if kept is not None and kept[0] == crop:
            return kept[1]
        strips = super().render_lines(crop)
        self._kept = (crop, strips)
        return strips


class KeptFooter(Footer, KeptLines):
    """Textual's footer, keeping its drawn lines (it is in every frame's box, under the table)."""
