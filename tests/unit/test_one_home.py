"""Each shared rule has one home: units, formatting, process liveness, the queue's SQL and
defaults, `command.exit.json`, `metrics.csv` lines, and typed options past the command line.

Each check reads the product's source as syntax trees and names the module and line that
breaks the rule. Each check is also run on a small bad snippet, so it is known to catch what
it is for (a check that can never fail guards nothing).
"""

from __future__ import annotations

import ast
import csv
import functools
import io
from collections.abc import Callable, Collection, Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collectors.session.rows import QuotedCells, cell, metric_lines

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("gpuherd", "collectors", "tui", "parsers")

pytestmark = pytest.mark.xdist_group("one-home")  # one worker parses the modules, not each

Check = Callable[[ast.Module], Iterator[int]]
"""Yields the line numbers of a module's offences."""


@functools.cache
def modules() -> dict[str, ast.Module]:
    """The product's modules as syntax trees, parsed at the first check (about 1 s of CPU):
    at import, every worker of the suite would parse them while collecting."""
    found = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            found[relative] = ast.parse(path.read_text(encoding="utf-8"), relative)
    return found


def offences(check: Check, allowed: Collection[str] = ()) -> list[str]:
    """`module:line` of every offence outside the `allowed` modules."""
    return [
        f"{name}:{line}"
        for name, tree in modules().items()
        if name not in allowed
        for line in check(tree)
    ]


def caught(check: Check, source: str) -> bool:
    """Whether `check` flags `source`."""
    return any(check(ast.parse(source)))


def _calls(tree: ast.AST) -> Iterator[ast.Call]:
    return (node for node in ast.walk(tree) if isinstance(node, ast.Call))


def _name_of(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else ""


# Byte units.

UNIT_NAMES = {"gib", "mib", "kib", "_gib", "_mib", "_kib"}
GIB_SPELT = {("<<", 1, 30), ("**", 2, 30), ("**", 1024, 3)}
"""A GiB written out. A cap of `1 << 20` bytes or characters is a size, not a unit, and stays."""


def unit_definitions(tree: ast.Module) -> Iterator[int]:
    """`GIB = ...` (any case, MiB and KiB too), or a GiB spelt out: `1 << 30`, `2 ** 30`."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(_name_of(t).lower() in UNIT_NAMES for t in targets):
                yield node.lineno
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.left, ast.Constant)
            and isinstance(node.right, ast.Constant)
        ):
            operator = (
                "<<"
                if isinstance(node.op, ast.LShift)
                else "**"
                if isinstance(node.op, ast.Pow)
                else ""
            )
            if (operator, node.left.value, node.right.value) in GIB_SPELT:
                yield node.lineno


def test_byte_units_are_defined_in_gpuherd_format_alone() -> None:
    assert offences(unit_definitions, {"gpuherd/present/format.py"}) == []
    assert offences(unit_definitions) != [], "the home itself defines them"


@pytest.mark.parametrize(
    "source",
    ["GIB = 1", "GiB = 2", "x = 5 * 1024 ** 3", "_MIB = 1", "margin: int = 1 << 30", "y = 2 ** 30"],
)
def test_a_second_unit_definition_is_caught(source: str) -> None:
    assert caught(unit_definitions, source)


# Turning values into text.


def formatter_definitions(tree: ast.Module) -> Iterator[int]:
    """A function named like a value formatter (`fmt_*`, `format_size`)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
            node.name.startswith(("fmt_", "_fmt_")) or node.name == "format_size"
        ):
            yield node.lineno


def test_value_formatters_live_in_gpuherd_format_alone() -> None:
    assert offences(formatter_definitions, {"gpuherd/present/format.py"}) == []


def test_a_second_formatter_is_caught() -> None:
    assert caught(formatter_definitions, "def fmt_uptime(s):\n    return f'{s}s'\n")


# Process liveness.


def liveness_probes(tree: ast.Module) -> Iterator[int]:
    """`os.kill(pid, 0)`, a process's start time (`create_time`), or a read of `/proc/PID/stat`."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and _name_of(node.func) == "kill"
            and len(node.args) == 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value == 0
        ):
            yield node.lineno
        if isinstance(node, ast.Attribute) and node.attr == "create_time":
            yield node.lineno
        if isinstance(node, ast.JoinedStr) and any(
            isinstance(part, ast.Constant) and str(part.value).endswith("/stat")
            for part in node.values
        ):
            yield node.lineno


LIVENESS_HOME = "collectors/machine/process_alive.py"
SHOWS_START_TIME = "collectors/machine/host.py"
"""The host collector shows when each GPU process started (a column), and asks nothing of it."""


def test_only_the_liveness_home_asks_whether_a_process_runs() -> None:
    assert offences(liveness_probes, {LIVENESS_HOME, SHOWS_START_TIME}) == []
    assert offences(liveness_probes, {SHOWS_START_TIME}) != [], "the home itself asks"


@pytest.mark.parametrize(
    "source",
    [
        "import os\nos.kill(pid, 0)",
        "import psutil\nstarted = psutil.Process(pid).create_time()",
        "open(f'/proc/{pid}/stat')",
    ],
)
def test_a_second_liveness_probe_is_caught(source: str) -> None:
    assert caught(liveness_probes, source)


# The queue's SQL.

SQL_WORDS = ("SELECT ", "UPDATE ", "INSERT ", "DELETE ", "PRAGMA ", "CREATE TABLE")


def sql_text(tree: ast.Module) -> Iterator[int]:
    """A string that holds SQL."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and node.value.lstrip().startswith(SQL_WORDS)
        ):
            yield node.lineno


QUEUE_SQL = {
    "gpuherd/queue/store.py",
    "gpuherd/queue/store_rows.py",
    # MLflow's own database, read as a tracker's store: not the queue's
    "collectors/trackers/mlflow_sqlite.py",
}


def test_the_queue_sql_is_written_in_the_store_alone() -> None:
    assert offences(sql_text, QUEUE_SQL) == []


def test_a_second_query_is_caught() -> None:
    assert caught(sql_text, "rows = db.execute('SELECT value FROM settings').fetchall()")
    assert caught(sql_text, "db.execute(f'SELECT {COLUMNS} FROM jobs')")


def test_the_watch_and_the_store_read_the_queue_with_the_same_functions() -> None:
    for module in ("gpuherd/queue/store.py", "gpuherd/queue/watch.py"):
        called = {_name_of(call.func) for call in _calls(modules()[module])}
        assert {"select_jobs", "select_paused"} <= called, module


# command.exit.json.


def exit_file_parsers(tree: ast.Module) -> Iterator[int]:
    """A function that names `COMMAND_EXIT_FILE` and parses JSON."""
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        names = {_name_of(n) for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))}
        parses = any(_name_of(call.func) in {"loads", "load"} for call in _calls(node))
        if "COMMAND_EXIT_FILE" in names and parses:
            yield node.lineno


def test_command_exit_json_has_one_reader() -> None:
    assert offences(exit_file_parsers, {"collectors/session/session_meta.py"}) == []
    assert offences(exit_file_parsers) != [], "the reader itself parses it"


def test_a_second_exit_file_reader_is_caught() -> None:
    assert caught(
        exit_file_parsers,
        "def end(d):\n    return json.loads((d / COMMAND_EXIT_FILE).read_text())\n",
    )


# metrics.csv lines.


def hand_built_csv_lines(tree: ast.Module) -> Iterator[int]:
    """An f-string that ends a CSV line by hand (`...,{value!r}\\n`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.JoinedStr) and node.values:
            last = node.values[-1]
            if (
                isinstance(last, ast.Constant)
                and str(last.value).endswith("\n")
                and any(
                    isinstance(part, ast.Constant) and "," in str(part.value)
                    for part in node.values
                )
            ):
                yield node.lineno


def test_the_recorder_builds_no_metrics_row_by_hand() -> None:
    assert list(hand_built_csv_lines(modules()["gpuherd/record/logsink.py"])) == []
    assert list(hand_built_csv_lines(modules()["collectors/session/rows.py"])) != []


def test_a_hand_built_row_is_caught() -> None:
    assert caught(hand_built_csv_lines, "row = f'{t},{task},{line},{value!r}\\n'")


names = st.text(min_size=1, max_size=12)
numbers = st.floats(allow_nan=False) | st.integers(-(10**6), 10**6)


@given(
    t=st.floats(0, 2e9),
    task=names,
    line=st.integers(0, 10**9),
    values=st.lists(st.tuples(names, numbers), min_size=1, max_size=4),
    step=st.none() | st.integers(0, 10**9),
    epoch=st.none() | st.floats(0, 1e4),
)
def test_metric_lines_are_what_the_csv_module_writes(
    t: float,
    task: str,
    line: int,
    values: list[tuple[str, float]],
    step: int | None,
    epoch: float | None,
) -> None:
    quoted = QuotedCells()
    got = "".join(metric_lines(repr(t), quoted[task], line, values, step, epoch, quoted))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    for name, value in values:
        writer.writerow([cell(t), task, line, name, repr(value), cell(step), cell(epoch)])
    assert got == buffer.getvalue()


# The queue's defaults.

DEFAULTED = {
    "settle",
    "settle_s",
    "margin",
    "margin_bytes",
    "grace",
    "grace_s",
    "max_util",
    "max_util_pct",
}
QUEUE_FLAGS = {"--settle", "--margin", "--grace", "--max-util"}


def literal_queue_defaults(tree: ast.Module) -> Iterator[int]:
    """A queue default written as a literal: a parameter, a field or a flag's default or help."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args
            positional = [*arguments.posonlyargs, *arguments.args]
            pairs = [
                *zip(
                    positional[len(positional) - len(arguments.defaults) :],
                    arguments.defaults,
                    strict=True,
                ),
                *zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True),
            ]
            for argument, default in pairs:
                if argument.arg in DEFAULTED and _literal(default):
                    yield node.lineno
        if (
            isinstance(node, ast.AnnAssign)
            and _name_of(node.target) in DEFAULTED
            and _literal(node.value)
        ):
            yield node.lineno
        if (
            isinstance(node, ast.Call)
            and _name_of(node.func) == "add_argument"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value in QUEUE_FLAGS
        ):
            for keyword in node.keywords:
                if keyword.arg == "default" and _literal(keyword.value):
                    yield node.lineno
                if keyword.arg == "help" and "(default 1" in ast.unparse(keyword.value):
                    yield node.lineno


def _literal(node: ast.AST | None) -> bool:
    if isinstance(node, ast.Constant):
        return node.value is not None and not isinstance(node.value, bool)
    return isinstance(node, ast.BinOp) and _literal(node.left) and _literal(node.right)


def test_the_queue_defaults_are_written_once() -> None:
    assert offences(literal_queue_defaults) == []


@pytest.mark.parametrize(
    "source",
    [
        "def run(*, settle_s: float = 10.0): ...",
        "def run(margin_bytes=1 << 30): ...",
        "class Spec:\n    max_util_pct: float = 10.0",
        "p.add_argument('--grace', default=120.0)",
        "p.add_argument('--margin', default=None, help='memory kept free (default 1GiB)')",
    ],
)
def test_a_literal_queue_default_is_caught(source: str) -> None:
    assert caught(literal_queue_defaults, source)


# Typed options past the command line.

EDGE = ("gpuherd/commands/", "gpuherd/cli.py")
OWN_COMMAND_LINES = {"gpuherd/common/argcheck.py", "gpuherd/proc/supervisor.py"}
"""`argcheck` holds argparse `type=` functions; the supervisor is a program of its own whose
`_parse` turns its command line into a typed `Invocation`."""


def namespace_uses(tree: ast.Module) -> Iterator[int]:
    """A parameter typed as argparse's `Namespace`, or one called `args` with no type at all."""
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        arguments = node.args
        for argument in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
            annotation = ast.unparse(argument.annotation) if argument.annotation else None
            if annotation is not None and "Namespace" in annotation:
                yield node.lineno
            elif annotation is None and argument.arg == "args" and _reads_attributes(node):
                yield node.lineno
        if (
            isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.returns
            and "Namespace" in ast.unparse(node.returns)
        ):
            yield node.lineno


def _reads_attributes(function: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "args"
        for n in ast.walk(function)
    )


def argparse_imports(tree: ast.Module) -> Iterator[int]:
    """`import argparse` or `from argparse import ...`."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names):
            yield node.lineno
        if isinstance(node, ast.ImportFrom) and node.module == "argparse":
            yield node.lineno


def _engine() -> set[str]:
    return {name for name in modules() if name.startswith(EDGE)}


def test_no_engine_module_takes_an_argparse_namespace() -> None:
    assert offences(namespace_uses, _engine()) == []
    assert offences(namespace_uses) != [], "the commands themselves take one"


def test_no_engine_module_imports_argparse() -> None:
    assert offences(argparse_imports, _engine() | OWN_COMMAND_LINES) == []


@pytest.mark.parametrize(
    "source",
    [
        "import argparse\ndef run(args: argparse.Namespace) -> int:\n    return args.interval",
        "from argparse import Namespace\ndef run(opts: Namespace): ...",
        "def run(args):\n    return args.json",
        "def _parse(argv) -> 'argparse.Namespace': ...",
    ],
)
def test_a_namespace_past_the_edge_is_caught(source: str) -> None:
    assert caught(namespace_uses, source)


def test_typed_options_are_let_through() -> None:
    assert not caught(
        namespace_uses, "def run(args: MonitorOptions) -> int:\n    return args.interval\n"
    )
    assert caught(argparse_imports, "import argparse")
