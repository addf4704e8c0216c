"""docs/session-format.md and collectors/session/session_format.py: the same files, columns."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from collectors.session import session_format as fmt

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "session-format.md").read_text(encoding="utf-8")


def section(title: str, doc: str = DOC) -> str:
    """The text under the heading `title` (any level), up to the next heading."""
    match = re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^#+ |\Z)", doc, re.M | re.S)
    assert match, f"docs/session-format.md has no heading {title!r}"
    return match.group(1)


def table(text: str) -> list[dict[str, str]]:
    """The first Markdown table of `text`, one dict per row, keyed by the header cells."""
    lines = [ln for ln in text.splitlines() if ln.startswith("|")]
    assert len(lines) >= 3, "no table"
    split = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in lines]
    header = split[0]
    return [dict(zip(header, cells, strict=True)) for cells in split[2:]]


def names(cell: str) -> list[str]:
    """The backticked names of a table cell: "`a`, `b`" -> ["a", "b"]."""
    return re.findall(r"`([^`]+)`", cell)


def flat(rows: list[dict[str, str]], key: str) -> list[tuple[str, str]]:
    """(name, rest of the row's `key` cell) for every name of every row, in order."""
    first = next(iter(rows[0]))
    return [(name, row[key]) for row in rows for name in names(row[first])]


def test_the_files_table_lists_every_file_of_the_module_in_order() -> None:
    rows = flat(table(section("Files")), "required")
    assert [name for name, _ in rows] == list(fmt.SESSION_FILES)
    assert tuple(name for name, required in rows if required == "yes") == fmt.REQUIRED_FILES


CSV_SECTIONS = [
    (fmt.GPU_FILE, "`gpu.csv`"),
    (fmt.PROCESSES_FILE, "`processes.csv`"),
    (fmt.HOST_FILE, "`host.csv`"),
    (fmt.CONTAINERS_FILE, "`containers.csv`"),
    (fmt.METRICS_FILE, "`metrics.csv`"),
    (fmt.PEAK_TRACE_FILE, "`peak_trace.csv`"),
]


@pytest.mark.parametrize(("file_name", "title"), CSV_SECTIONS)
def test_each_csv_table_lists_the_module_columns_and_which_are_required(
    file_name: str, title: str
) -> None:
    rows = table(section(title))
    how = "written" if "written" in rows[0] else "required"
    columns = flat(rows, how)
    assert tuple(name for name, _ in columns) == fmt.COLUMNS[file_name]
    # "required"/"yes": a file without it is refused; "always": every recorder writes it.
    required = tuple(name for name, word in columns if word in ("required", "yes"))
    assert required == fmt.REQUIRED_COLUMNS.get(file_name, fmt.COLUMNS[file_name])
    if file_name in fmt.WRITTEN_COLUMNS:
        written = tuple(name for name, word in columns if word in ("required", "yes", "always"))
        assert written == fmt.WRITTEN_COLUMNS[file_name]


def test_every_csv_file_of_the_module_has_a_columns_table() -> None:
    assert {name for name, _ in CSV_SECTIONS} == set(fmt.COLUMNS)
    assert set(fmt.CSV_FILES) <= set(fmt.COLUMNS)


def test_the_meta_keys_table_lists_the_module_keys_and_the_required_ones() -> None:
    rows = flat(table(section("`meta.json`")), "required")
    assert [name for name, _ in rows] == list(fmt.names(fmt.META))
    assert tuple(name for name, required in rows if required == "yes") == fmt.REQUIRED_META


def test_the_meta_example_uses_known_keys_and_the_current_schema() -> None:
    example = re.search(r"```json\n(.*?)```", section("`meta.json`"), re.S)
    assert example
    meta = json.loads(example.group(1))
    assert set(meta) <= set(fmt.names(fmt.META))
    assert meta[fmt.META.schema] == fmt.SCHEMA_VERSION
    assert f"currently `{fmt.SCHEMA_VERSION}`" in section("`meta.json`")


def test_the_event_tables_list_exactly_the_module_event_kinds() -> None:
    kinds = [
        name
        for title in ("`events.jsonl`", "`events.jsonl` kinds added by recording")
        for name, _ in flat(table(section(title)), "fields")
    ]
    assert len(kinds) == len(set(kinds))
    assert set(kinds) == set(fmt.names(fmt.EVENT))


def test_the_module_names_are_their_own_attribute_names() -> None:
    # `META.started_at` is "started_at": a key is spelled once, by its attribute.
    for keys in (fmt.META, fmt.EVENT):
        assert fmt.names(keys) == tuple(keys.__dataclass_fields__)


def test_the_module_imports_only_the_standard_library() -> None:
    tree = ast.parse((REPO / "collectors" / "session" / "session_format.py").read_text())
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    }
    imported |= {
        node.module.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module
    }
    assert imported <= set(sys.stdlib_module_names)
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; before = set(sys.modules); "
            "import collectors.session.session_format; "
            "print(sorted(m for m in set(sys.modules) - before "
            "if m.split('.')[0] not in sys.stdlib_module_names))",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == (
        "['collectors', 'collectors.session', 'collectors.session.session_format']"
    )
