"""Banner lines for sources that cannot run here (no NVIDIA driver, ...)."""

from __future__ import annotations

from rich.text import Text
from textual.app import RenderResult
from textual.reactive import reactive
from textual.widget import Widget

from gpuherd.present.format import visible


class Banner(Widget):
    """One line per unavailable source; hidden while there is nothing to say."""

    DEFAULT_CSS = """
    Banner {
        height: auto;
        width: 1fr;
        padding: 0 1;
        background: $warning 30%;
        color: $text;
        display: none;
    }
    Banner.-shown {
        display: block;
    }
    """

    lines: reactive[tuple[str, ...]] = reactive((), layout=True)
    """The messages to show, most important first."""

    def watch_lines(self, lines: tuple[str, ...]) -> None:
        """Show the banner only while it has lines."""
        self.set_class(bool(lines), "-shown")

    def render(self) -> RenderResult:
        """Each message on its own line."""
        return Text("\n".join(visible(line) for line in self.lines), style="bold")
