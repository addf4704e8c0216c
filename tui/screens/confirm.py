"""A yes/no question before something that cannot be undone (stopping the recorded command)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static


class ConfirmScreen(ModalScreen[bool]):
    """`y` (or Enter) answers yes, `n` (or Esc) no; the answer is the screen's result."""

    DEFAULT_CSS = """
    ConfirmScreen {
        align: center middle;
    }
    #confirm-body {
        width: auto;
        max-width: 80%;
        height: auto;
        border: round $warning;
        background: $surface;
        padding: 0 1;
    }
    /* a Static takes its parent's width by default; in a box as wide as its content, that
       left both lines 0 columns wide (an empty frame, no question, no keys) */
    #confirm-body > Static {
        width: auto;
        max-width: 100%;
    }
    """

    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("enter", "answer(True)", "Yes", show=False),
        Binding("n", "answer(False)", "No"),
        Binding("escape", "answer(False)", "No", show=False),
    ]

    def __init__(self, title: str, question: str) -> None:
        super().__init__()
        self.title_text = title
        self.question = question

    def compose(self) -> ComposeResult:
        """The question, then the keys that answer it."""
        with Vertical(id="confirm-body"):
            yield Static(Text(self.question))
            yield Static(
                Text.assemble(
                    ("y", "bold cyan"),
                    " yes   ",
                    ("n", "bold cyan"),
                    " / ",
                    ("Esc", "bold cyan"),
                    " no",
                )
            )

    def on_mount(self) -> None:
        """The title on the frame."""
        self.query_one("#confirm-body").border_title = self.title_text

    def action_answer(self, yes: bool) -> None:
        """Close with the answer."""
        self.dismiss(yes)
