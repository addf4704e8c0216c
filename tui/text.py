"""Small Rich text helpers shared by the panels: level colours and block bars."""

from __future__ import annotations

from rich.text import Text


def level_style(pct: float | None, warn: float = 60.0, high: float = 85.0) -> str:
    """Green, yellow or red for a percentage; dim when unknown."""
    if pct is None:
        return "dim"
    if pct >= high:
        return "bold red"
    if pct >= warn:
        return "yellow"
    return "green"


def bar(pct: float | None, width: int, style: str | None = None) -> Text:
    """A `[████░░░░]` bar `width` cells wide (brackets included); empty when unknown."""
    inner = max(1, width - 2)
    if pct is None:
        return Text.assemble("[", ("?" * inner, "dim"), "]")
    filled = round(inner * min(max(pct, 0.0), 100.0) / 100.0)
    return Text.assemble(
        "[",
        ("█" * filled, style or level_style(pct)),
        ("░" * (inner - filled), "dim"),
        "]",
    )


def fit(segments: list[Text], width: int, separator: str = "  ") -> Text:
    """Join segments in order, stopping before the first one that would overflow `width`."""
    line = Text(no_wrap=True, overflow="crop")
    for segment in segments:
        extra = segment.cell_len + (len(separator) if line.cell_len else 0)
        if line.cell_len + extra > width:
            break
        if line.cell_len:
            line.append(separator)
        line.append_text(segment)
    return line


def same_text(a: Text, b: Text) -> bool:
    """Whether two cells would draw the same.

    `Text.__eq__` compares only the characters and the spans; a base style given as
    `Text(..., style=...)` (a task's label turning red with its first error) is not among them.
    """
    return (
        a.plain == b.plain and a.style == b.style and a.spans == b.spans and a.justify == b.justify
    )
