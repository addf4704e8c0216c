"""A modal shown when a collector worker dies of a bug, so the error is never lost."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from gpuherd.present.format import visible


class ErrorScreen(ModalScreen[None]):
    """Shows what crashed and the traceback; the rest of the dashboard keeps running."""

    BINDINGS = [Binding("escape", "dismiss", "Close"), Binding("enter", "dismiss", "Close")]

    def __init__(self, title: str, details: str) -> None:
        super().__init__()
        self.title_text = title
        self.details = details

    def compose(self) -> ComposeResult:
        """The title line, then the details."""
        with VerticalScroll(id="error-body"):
            yield Static(Text(visible(self.title_text), style="bold red"))
            # A traceback quotes exceptions' messages, which may quote paths: line by line.
            yield Static(
                Text("\n".join(visible(line) for line in self.details.splitlines())),
                id="error-details",
            )

    def on_mount(self) -> None:
        """Frame titles."""
        body = self.query_one("#error-body")
        body.border_title = "Internal error"
        body.border_subtitle = "Esc closes; please report this with the text above"

    async def action_dismiss(self, result: None = None) -> None:
        """Close the modal."""
        self.dismiss(result)
