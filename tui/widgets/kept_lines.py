"""A widget that hands back its last rendered lines while nothing has repainted it."""

from __future__ import annotations

from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Footer


class KeptLines(Widget):
    """Hands back the strips of its last render while Textual's line cache still holds them.

    Textual redraws, in one frame, every widget that overlaps the box around all the frame's
    changes, and asks each for all its lines: the header's clock at the top and the process
    table below put every panel of the dashboard in that box every second. A panel that did
    not change still walked its lines, its borders and the line filters (about a tenth of a
    millisecond each). Whatever changes a widget's look marks lines of its line cache dirty
    or clears it (`refresh`, a new size, a style, class or theme change, and DataTable's own
    clearing when its rows change); while neither happened, the last lines are still right.
    """

    _kept: tuple[Region, list[Strip]] | None = None

    def render_lines(self, crop: Region) -> list[Strip]:
        """The lines of the last render when the line cache is untouched and the crop the same."""
        kept = self._kept
        if kept is not None and kept[0] == crop and _untouched(self):
            return kept[1]
        strips = super().render_lines(crop)
        self._kept = (crop, strips)
        return strips


def _untouched(widget: Widget) -> bool:
    """Whether the widget's line cache holds lines and none is marked dirty.

    Only a render fills the cache, and every repaint marks it dirty or empties it. Should a
    Textual release rename these attributes, nothing is kept.
    """
    cache = getattr(widget, "_styles_cache", None)
    lines = getattr(cache, "_cache", None)
    dirty = getattr(cache, "_dirty_lines", None)
    return bool(lines) and dirty is not None and not dirty


class KeptFooter(Footer, KeptLines):
    """Textual's footer, keeping its drawn lines (it is in every frame's box, under the table)."""
