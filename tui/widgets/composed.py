"""Find a widget of a panel or screen once: the dashboard composes its widgets and keeps them."""

from __future__ import annotations

from typing import TypeVar

from textual.dom import DOMNode
from textual.widget import Widget

W = TypeVar("W", bound=Widget)

_FOUND = "_composed_widgets"


def composed(node: DOMNode, kind: type[W], selector: str | None = None) -> W:
    """`node.query_one(selector or kind, kind)`, remembered on `node`.

    A query walks the node's subtree; the screen and its panels asked for the same few
    widgets on every sample, some 30 visits a second of CPU for the same answers. A widget
    that has left the tree (its parent is gone) is looked up again.
    """
    found: dict[tuple[type[Widget], str | None], Widget] = node.__dict__.setdefault(_FOUND, {})
    widget = found.get((kind, selector))
    if widget is None or widget.parent is None:
        widget = node.query_one(selector, kind) if selector else node.query_one(kind)
        found[(kind, selector)] = widget
    assert isinstance(widget, kind)
    return widget
