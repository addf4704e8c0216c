"""Set keys of one top-level mapping in a YAML file, changing no other byte of the file.

A full ruamel.yaml load-and-dump keeps comments and key order but may still re-indent sequences,
re-wrap long strings or respace flow lists. Instead, ruamel.yaml parses the text, the parser's
marks say exactly where each key and value sits, and only those spans are replaced or inserted;
the result is parsed again and compared with what was intended before anything is written.

The text is bounded before any of that: at most `MAX_TEXT_CHARS` characters, nesting at most
`MAX_DEPTH` deep, and at most `MAX_NODES` nodes with every alias expanded, counted in one pass
over the parser's events. A 474-byte "billion laughs" file (aliases of aliases of lists of
aliases) would otherwise make the comparison walk a billion nodes.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml import events as ev
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, SingleQuotedScalarString

from collectors.base import GpuherdError

NULL_TEXTS = ("", "~", "null", "Null", "NULL")
MAX_TEXT_CHARS = 1 << 20
"""Example files are a few KB; ruamel.yaml needs seconds and hundreds of MB per few MB."""
MAX_DEPTH = 100
MAX_NODES = 100_000
"""Nodes of the document with every alias expanded (a real example file has hundreds)."""


class YamlEditError(GpuherdError):
    """The file cannot be edited safely; it is left untouched."""


@dataclass
class _Node:
    """A parsed node with the character span the parser gave it."""

    kind: str  # "scalar", "map", "seq", "alias"
    start: int
    end: int
    value: str | None = None
    style: str | None = None
    tag: str | None = None
    flow: bool = False
    items: list[tuple[_Node, _Node]] = field(default_factory=list)


def _read_node(stream: Iterator[Any], first: Any) -> _Node:
    if isinstance(first, ev.ScalarEvent):
        return _Node(
            "scalar",
            first.start_mark.index,
            first.end_mark.index,
            first.value,
            first.style,
            first.tag,
        )
    if isinstance(first, ev.AliasEvent):
        return _Node("alias", first.start_mark.index, first.end_mark.index)
    if isinstance(first, (ev.MappingStartEvent, ev.SequenceStartEvent)):
        is_map = isinstance(first, ev.MappingStartEvent)
        node = _Node(
            "map" if is_map else "seq",
            first.start_mark.index,
            first.end_mark.index,
            flow=bool(first.flow_style),
        )
        end_type = ev.MappingEndEvent if is_map else ev.SequenceEndEvent
        while True:
            item = next(stream)
            if isinstance(item, end_type):
                node.end = item.start_mark.index
                return node
            child = _read_node(stream, item)
            if is_map:
                node.items.append((child, _read_node(stream, next(stream))))
        # unreachable
    raise YamlEditError(f"unexpected YAML event {type(first).__name__}")


def _problem(error: YAMLError) -> YamlEditError:
    """One line for a YAML error: what is wrong and where."""
    if isinstance(error, MarkedYAMLError):
        mark = error.problem_mark or error.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        return YamlEditError(f"not valid YAML: {error.problem or error.context}{where}")
    return YamlEditError(f"not valid YAML: {error}")


def check_size(text: str) -> None:
    """Refuse a text too large, too deep or with aliases expanding to too many nodes.

    One pass over the parser's events (no document is built): each anchored node's expanded
    size is remembered, and an alias adds the size of what it names.
    """
    if len(text) > MAX_TEXT_CHARS:
        raise YamlEditError(
            f"{len(text):,} characters; gpuherd edits YAML files of up to "
            f"{MAX_TEXT_CHARS:,} (1 MiB)"
        )
    sizes: dict[str, int] = {}
    open_nodes: list[list[Any]] = []  # [anchor, expanded size so far] per open collection
    total = 0
    try:
        for event in YAML(typ="rt").parse(text):
            if isinstance(event, (ev.MappingStartEvent, ev.SequenceStartEvent)):
                if len(open_nodes) >= MAX_DEPTH:
                    raise YamlEditError(f"nested deeper than {MAX_DEPTH} levels")
                open_nodes.append([event.anchor, 1])
                continue
            if isinstance(event, (ev.MappingEndEvent, ev.SequenceEndEvent)):
                anchor, size = open_nodes.pop()
            elif isinstance(event, ev.ScalarEvent):
                anchor, size = event.anchor, 1
            elif isinstance(event, ev.AliasEvent):
                anchor, size = None, sizes.get(event.anchor, 1)
            else:
                continue
            if anchor is not None:
                sizes[anchor] = size
            if open_nodes:
                open_nodes[-1][1] += size
            else:
                total += size
            if size > MAX_NODES or total > MAX_NODES:
                raise YamlEditError(
                    f"its aliases expand to more than {MAX_NODES:,} nodes; "
                    "gpuherd does not edit such files"
                )
    except YAMLError as error:
        raise _problem(error) from None
    except RecursionError:
        raise YamlEditError(f"nested deeper than {MAX_DEPTH} levels") from None


def _root(text: str) -> _Node:
    documents: list[_Node] = []
    stream = iter(YAML(typ="rt").parse(text))
    for event in stream:
        if isinstance(event, ev.DocumentStartEvent):
            content = next(stream)
            if isinstance(content, ev.DocumentEndEvent):
                raise YamlEditError("the file is empty; expected a mapping at the top")
            documents.append(_read_node(stream, content))
    if len(documents) != 1:
        raise YamlEditError(f"expected one YAML document, found {len(documents)}")
    root = documents[0]
    if root.kind != "map":
        what = {"seq": "a list", "scalar": "a single value", "alias": "an alias"}[root.kind]
        raise YamlEditError(f"the top level is {what}; expected a mapping")
    return root


def load(text: str) -> Any:
    """Parse `text` (round-trip types); raises `YamlEditError` with the line on bad YAML."""
    try:
        return YAML(typ="rt").load(text)
    except YAMLError as error:
        raise _problem(error) from None
    except RecursionError:
        raise YamlEditError(f"nested deeper than {MAX_DEPTH} levels") from None


def scalar_text(value: Any, quote: str | None = '"') -> str:
    """One YAML scalar as it would follow `key: `, on one line; strings are quoted."""
    if isinstance(value, str):
        value = SingleQuotedScalarString(value) if quote == "'" else DoubleQuotedScalarString(value)
    yaml = YAML(typ="rt")
    yaml.width = 1 << 20
    out = io.StringIO()
    yaml.dump({"k": value}, out)
    return out.getvalue()[len("k: ") :].rstrip("\n")


@dataclass(frozen=True)
class _Edit:
    start: int
    end: int
    text: str


def _line_end(text: str, index: int) -> int:
    end = text.find("\n", index)
    return len(text) if end < 0 else (end - 1 if end > 0 and text[end - 1] == "\r" else end)


def _column(text: str, index: int) -> int:
    return index - (text.rfind("\n", 0, index) + 1)


def _indent_unit(root: _Node, text: str) -> int:
    for _, value in root.items:
        if value.kind == "map" and not value.flow and value.items:
            return max(1, _column(text, value.items[0][0].start) - _column(text, root.start))
    return 2


class _Splicer:
    """Builds the edits that set `values` under `block` in the root mapping."""

    def __init__(self, text: str, root: _Node, block: str, values: Mapping[str, Any]) -> None:
        self.text, self.root, self.block, self.values = text, root, block, values
        self.nl = "\r\n" if "\r\n" in text else "\n"
        self.unit = _indent_unit(root, text)

    def edits(self) -> list[_Edit]:
        found = [(k, v) for k, v in self.root.items if k.kind == "scalar" and k.value == self.block]
        if not found:
            return [self._new_block()]
        key, value = found[0]
        # `!!str ~` is the string "~", and `!!null ~` would keep its tag on the mapping: only an
        # untagged empty value or null word is filled.
        if (
            value.kind == "scalar"
            and value.style is None
            and value.tag is None
            and value.value in NULL_TEXTS
        ):
            return self._fill_null(key, value)
        if value.kind != "map":
            what = {"seq": "a list", "scalar": "a single value", "alias": "an alias"}[value.kind]
            raise YamlEditError(f"`{self.block}:` is {what}; expected a mapping (fix it by hand)")
        return self._update(value)

    def _pairs(self, quote_of: Mapping[str, str | None] | None = None) -> list[tuple[str, str]]:
        quote_of = quote_of or {}
        return [(k, scalar_text(v, quote_of.get(k, '"'))) for k, v in self.values.items()]

    def _block_lines(self, column: int) -> str:
        pad = " " * column
        return "".join(f"{self.nl}{pad}{k}: {v}" for k, v in self._pairs())

    def _new_block(self) -> _Edit:
        if self.root.flow:
            inner = ", ".join(f"{k}: {v}" for k, v in self._pairs())
            sep = ", " if self.root.items else ""
            return _Edit(self.root.end, self.root.end, f"{sep}{self.block}: {{{inner}}}")
        at = self.root.end
        column = _column(self.text, self.root.start)
        lead = "" if at == 0 or self.text[at - 1] == "\n" else self.nl
        body = f"{' ' * column}{self.block}:{self._block_lines(column + self.unit)}{self.nl}"
        return _Edit(at, at, lead + body)

    def _fill_null(self, key: _Node, value: _Node) -> list[_Edit]:
        edits = []
        if value.end > value.start:
            # Drop an explicit `~` / `null`, with the spaces before it, and keep any comment.
            start = value.start
            while start > key.end and self.text[start - 1] in " \t":
                start -= 1
            edits.append(_Edit(start, value.end, ""))
        at = _line_end(self.text, key.end)
        column = _column(self.text, key.start)
        edits.append(_Edit(at, at, self._block_lines(column + self.unit)))
        return edits

    def _update(self, mapping: _Node) -> list[_Edit]:
        present = {k.value: v for k, v in mapping.items if k.kind == "scalar"}
        edits, missing = [], []
        for name, new in self.values.items():
            old = present.get(name)
            if old is None:
                missing.append(name)
                continue
            if old.kind != "scalar":
                raise YamlEditError(f"`{self.block}.{name}` is not a single value; fix it by hand")
            quote = old.style if old.style in ("'", '"') else '"'
            replacement = scalar_text(new, quote)
            if self.text[old.start : old.end].endswith("\n"):
                replacement += self.nl  # a block scalar owned its line break
            edits.append(_Edit(old.start, old.end, replacement))
        if missing:
            edits.append(self._insert(mapping, missing))
        return edits

    def _insert(self, mapping: _Node, names: list[str]) -> _Edit:
        pairs = [(k, scalar_text(self.values[k])) for k in names]
        if mapping.flow:
            sep = ", " if mapping.items else ""
            return _Edit(mapping.end, mapping.end, sep + ", ".join(f"{k}: {v}" for k, v in pairs))
        last = mapping.items[-1][1]
        pad = " " * _column(self.text, mapping.items[0][0].start)
        lines = "".join(f"{self.nl}{pad}{k}: {v}" for k, v in pairs)
        if self.text[last.start : last.end].endswith("\n"):
            return _Edit(last.end, last.end, lines[len(self.nl) :] + self.nl)
        at = _line_end(self.text, last.end)
        return _Edit(at, at, lines)


def set_block(text: str, block: str, values: Mapping[str, Any]) -> str:
    """Return `text` with `block:` in the top-level mapping holding `values`.

    Other keys of the block and every other byte of the file are kept. Raises `YamlEditError`
    when the text is not YAML, too large or deep (`check_size`), the top level is not a
    mapping, or `block:` is not a mapping.
    """
    check_size(text)
    before = load(text)
    if before is None:
        raise YamlEditError("no mapping at the top: the file is empty or holds only comments")
    root = _root(text)
    new = text
    for edit in sorted(_Splicer(text, root, block, values).edits(), key=lambda e: -e.start):
        new = new[: edit.start] + edit.text + new[edit.end :]
    _check(before, load(new), block, values)
    return new


def _check(before: Any, after: Any, block: str, values: Mapping[str, Any]) -> None:
    # The splice is a text operation: prove it changed exactly what was asked.
    rest_before = {k: v for k, v in before.items() if k != block}
    rest_after = {k: v for k, v in after.items() if k != block}
    old_block = before.get(block) or {}
    new_block = after.get(block) or {}
    kept_before = {k: v for k, v in old_block.items() if k not in values}
    kept_after = {k: v for k, v in new_block.items() if k not in values}
    wanted = {k: new_block.get(k) for k in values}
    if rest_before != rest_after or kept_before != kept_after or wanted != dict(values):
        raise YamlEditError(
            "internal error: the edit would change more than the "
            f"`{block}:` keys; the file is left untouched"
        )
