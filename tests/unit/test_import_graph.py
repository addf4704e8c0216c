"""The product's import graph, drawn from the source: no cycles, one driver of sources.

Every import counts, also those inside functions and under `TYPE_CHECKING`: a cycle through a
function-level import still ties two modules into one, and shows a layer pointing back.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("collectors", "parsers", "gpuherd", "tui")


def module_name(path: Path) -> str:
    """`gpuherd/record/recorder.py` -> `gpuherd.record.recorder` (a package is its `__init__`)."""
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def product_modules() -> dict[str, Path]:
    """Every module of the product packages, by dotted name."""
    return {
        module_name(path): path
        for package in PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
    }


def imported(
    tree: ast.AST, name: str, is_package: bool, known: Mapping[str, Path]
) -> Iterator[str]:
    """The product modules a module's code imports, wherever the import statement stands."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if is_package else name.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, *([base] if base else [])])
            for alias in node.names:
                child = f"{base}.{alias.name}"
                yield child if child in known else base


def import_graph() -> dict[str, set[str]]:
    """Module -> the product modules it imports (itself left out)."""
    known = product_modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        targets = imported(tree, name, path.name == "__init__.py", known)
        graph[name] = {t for t in targets if t in known and t != name}
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each as a cycle path."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_path_through(group, graph) for group in groups]


def _path_through(group: list[str], graph: Mapping[str, set[str]]) -> list[str]:
    """One cycle inside a strongly connected `group`, as `a -> b -> ... -> a`."""
    members, start = set(group), group[0]
    path, seen = [start], {start}
    while True:
        step = sorted(t for t in graph[path[-1]] if t in members)
        back = [t for t in step if t == start]
        if back and len(path) > 1:
            return [*path, start]
        fresh = [t for t in step if t not in seen]
        if not fresh:
            return [*path, next(t for t in step if t in seen)]
        path.append(fresh[0])
        seen.add(fresh[0])


def importers_of(name: str, graph: Mapping[str, set[str]]) -> set[str]:
    """The product modules that import `name`."""
    return {module for module, targets in graph.items() if name in targets}


def test_no_import_cycle_in_the_product_packages() -> None:
    found = cycles(import_graph())
    assert found == [], "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_cycle_finder_names_a_function_level_cycle(tmp_path: Path) -> None:
    """The finder itself can fail: a cycle through an import inside a function is named."""
    graph = {"a": set(), "b": set(), "c": set()}
    sources = {"a": "import b\n", "b": "def f():\n    from c import x\n", "c": "import a\n"}
    for name, text in sources.items():
        graph[name] = {
            t for t in imported(ast.parse(text), name, False, graph) if t in graph and t != name
        }
    assert cycles(graph) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_relative_imports_resolve_to_the_module_they_name() -> None:
    known = {"p": Path(), "p.q": Path(), "p.r": Path()}
    tree = ast.parse("from . import r\nfrom .q import thing\n")
    assert set(imported(tree, "p.q", False, known)) == {"p.r", "p.q"}


def test_run_collector_is_used_by_the_engine_alone() -> None:
    """One driver of sources: every sink runs its sources through `gpuherd.engine.threads`."""
    users = {
        module
        for module, path in product_modules().items()
        if module != "collectors.loop" and _names(path, "run_collector")
    }
    assert users == {"gpuherd.engine.threads"}


def test_live_sources_are_built_in_one_place() -> None:
    """`LiveSources(` is written once in the product: `gpuherd.sources.live_sources`."""
    places = [
        f"{module}:{line_no}"
        for module, path in product_modules().items()
        for line_no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if "LiveSources(" in line and not line.lstrip().startswith(("class ", "#"))
    ]
    assert len(places) == 1 and places[0].startswith("gpuherd.sources:"), places


def test_the_engine_imports_no_textual_and_nothing_above_it() -> None:
    graph = import_graph()
    engine = [m for m in graph if m == "gpuherd.engine" or m.startswith("gpuherd.engine.")]
    assert engine
    for module in engine:
        assert not any(t.startswith("tui") for t in graph[module]), module
        text = product_modules()[module].read_text(encoding="utf-8")
        assert "textual" not in {
            alias.name.split(".")[0]
            for node in ast.walk(ast.parse(text))
            if isinstance(node, ast.Import)
            for alias in node.names
        }


def _names(path: Path, name: str) -> bool:
    """Whether the module's code names `name` (imported, called or reached as an attribute)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and any(a.name == name for a in node.names):
            return True
        if (isinstance(node, ast.Name) and node.id == name) or (
            isinstance(node, ast.Attribute) and node.attr == name
        ):
            return True
    return False


@pytest.mark.parametrize(
    "module", ["gpuherd.dashboard.monitor", "gpuherd.dashboard.monitor_record"]
)
def test_the_command_line_side_of_the_dashboard_imports_no_tui_module_at_the_top(
    module: str,
) -> None:
    """The dashboard's running set lives below `tui/`: monitor imports `tui` only lazily."""
    tree = ast.parse(product_modules()[module].read_text(encoding="utf-8"))
    top = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    names = [getattr(node, "module", None) or node.names[0].name for node in top]
    assert not [n for n in names if n and n.split(".")[0] == "tui"]
