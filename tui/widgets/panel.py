"""A dashboard panel to its screen: the roles it shows, the failures it marks, its titles."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual.css.scalar import Scalar
from textual.message import Message
from textual.widget import Widget

from gpuherd.present.format import visible
from tui.widgets.kept_lines import KeptLines

if TYPE_CHECKING:
    from tui.state import MonitorState


class Panel(KeptLines):
    """A bordered panel that draws itself from the state when a role it subscribes to moved.

    The screen only composes panels and hands each state change to the panels whose `ROLES`
    hold the role that moved (every panel on a full refresh, `changed=None`); a new panel is a
    new subclass placed in the screen's `compose`, with no edit of the screen's dispatch.

    Name it as the second base (`class QueuePanel(Vertical, Panel)`): Textual takes a widget's
    default CSS and component classes from the chain of first bases only. A panel keeps its
    drawn lines while nothing repaints it (`KeptLines`).
    """

    ROLES: ClassVar[frozenset[str]] = frozenset()
    """Roles whose samples redraw the panel (`collectors.roles`)."""
    HEALTH_ROLE: ClassVar[str | None] = None
    """The role whose failing sources the panel marks (class `-error`, reasons as subtitle);
    the failures of a role that no panel marks go on the banner."""

    class Mounted(Message):
        """A panel joined its screen, which makes its list of panels again."""

    def __init__(self, *children: Widget, **kwargs: Any) -> None:
        super().__init__(*children, **kwargs)
        self._titles: dict[str, str | None] = {}

    def on_mount(self) -> None:
        """Tell the screen (Textual calls this beside a subclass's own `on_mount`)."""
        self.post_message(self.Mounted())

    def show_state(self, state: MonitorState, changed: str | None) -> None:
        """Draw what moved; `changed` is the role of the new sample, `None` for everything."""

    def banner_lines(self) -> tuple[str, ...]:
        """Findings of the panel's own that belong on the banner (a job holding an idle GPU)."""
        return ()

    def show_health(self, state: MonitorState) -> None:
        """Mark the panel while sources of its `HEALTH_ROLE` fail, with their reasons."""
        if self.HEALTH_ROLE is None:
            return
        problems = state.problems(self.HEALTH_ROLE)
        if bool(problems) != self.has_class("-error"):  # set_class checks the name each time
            self.set_class(bool(problems), "-error")
        self.set_subtitle("; ".join(problems) if problems else None)

    def set_title(self, text: str) -> None:
        """The border title, shown as written (never markup)."""
        # Assigning a border title repaints the panel even when the text is the same.
        if self._titles.get("title") != text:
            self._titles["title"] = text
            self.border_title = Text(visible(text))

    def set_subtitle(self, text: str | None) -> None:
        """The border subtitle, shown as written: reasons and filters quote what others wrote."""
        if self._titles.get("subtitle", "") != text:
            self._titles["subtitle"] = text
            self.border_subtitle = None if text is None else Text(visible(text))


class SidePanel(Panel):
    """A panel as tall as its rows (up to `MOST` lines), shown only while it has something.

    The screen gives the side panels their lines before it sizes the GPUs, the chart and the
    processes (`tui.screens.main.arrangement`) and sets each one's height (`fit`). Left to
    `height: auto`, a panel whose table had not yet measured its new rows when the layout ran
    either took the process table's lines or got none.
    """

    MOST: ClassVar[int] = 12
    """Lines at most, borders included, when the screen has room."""

    def body_lines(self) -> int:
        """Lines of content the panel would show whole: its header, rows and notes."""
        return 0

    def lines_wanted(self) -> int:
        """Lines the panel takes when there is room, borders included; 0 while hidden."""
        if not self.has_class("-shown"):
            return 0
        return min(self.MOST, 2 + self.body_lines())

    def fit(self, lines: int) -> None:
        """Take `lines` lines: what it wants, or less on a crowded screen (0: hidden, kept)."""
        if lines and self.styles.height != Scalar.from_number(lines):
            self.styles.height = lines
