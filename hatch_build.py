"""Wheel build step: compile the log parsers (`parsers/`) with mypyc, or leave them pure Python.

Every log line a task writes goes through `parsers`; compiled, they read about a third more lines
per second of one core (`benchmarks/bench_parse.py`). The same build compiles the tracker
readers' byte-level work (`COMPILED_SOURCES`: cutting record logs, reading W&B rows and
TensorBoard events in place, MLflow's rows), through which every point of a tracker's store
goes (`benchmarks/bench_trackers.py`). Compiling needs a C compiler and the Python headers.
Where either is missing, or `GPUHERD_PURE_PYTHON=1` is set, the wheel keeps all of them pure
Python, which behave the same: the build warns and goes on. Editable installs (`pip install
-e`) stay pure Python, so that an edited parser takes effect without a rebuild. The `.py` files
ship either way; Python imports a module's compiled file before its source.

This module is also the project's build backend (pyproject's `build-backend`): hatchling's, with
one change. A wheel's build needs mypy and setuptools (`COMPILER_TOOLS`), which the hook asks the
installer for; an editable install never compiles, so it does not ask for them. Hatchling alone
asks for the same tools either way, and installing mypy into the throw-away build environment
took 4.7 of the 8.5 s an editable install of this project spends on building itself.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hatchling.build import *  # noqa: F403 - every PEP 517 and 660 hook, as hatchling has it
from hatchling.build import get_requires_for_build_editable as _hatchling_editable_requires
from hatchling.builders.hooks.plugin.interface import BuildHookInterface

COMPILED_PACKAGE = "parsers"
"""The group's name: its shared library is `parsers__mypyc` at the wheel's top."""
COMPILED_SOURCES = (
    "parsers/*.py",
    "collectors/trackers/framing.py",
    "collectors/trackers/wire.py",
    "collectors/trackers/wandb_wire.py",
    "collectors/trackers/tensorboard_events.py",
    "collectors/trackers/mlflow_rows.py",
)
"""What is compiled, as globs from the project's root: the log parsers, and the tracker
readers' byte-level work (cutting records, reading W&B rows in place, TensorBoard's events)."""
SKIP_VARIABLE = "GPUHERD_PURE_PYTHON"
COMPILER_TOOLS = ["mypy>=1.10", "setuptools>=68"]
"""What compiling needs in the build environment (mypyc comes with mypy; setuptools builds the
extensions)."""
OPT_LEVEL = os.environ.get("GPUHERD_MYPYC_OPT_LEVEL", "3")
"""mypyc's optimisation level (the C compiler's -O): 3 for what users install; the test that
builds a wheel uses 0, which builds in about 60 % of the time from the same translation
(docs/parsers.md says what that test then does not check)."""


class CompileParsersHook(BuildHookInterface):  # type: ignore[misc]
    """Hatchling's hook for `[tool.hatch.build.targets.wheel.hooks.custom]` in pyproject.toml."""

    PLUGIN_NAME = "custom"

    def dependencies(self) -> list[str]:
        """The compiler's tools, installed before a wheel's build (not an editable one's)."""
        return list(COMPILER_TOOLS)

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Compile the parsers into a temporary folder and put the results in the wheel."""
        if self.target_name != "wheel" or version == "editable":
            return
        if os.environ.get(SKIP_VARIABLE, "") not in ("", "0"):
            warn(f"{SKIP_VARIABLE} is set")
            return
        self._work = tempfile.mkdtemp(prefix="gpuherd-mypyc-")
        built = compile_parsers(Path(self.root), Path(self._work))
        if not built:
            return
        build_data["pure_python"] = False
        build_data["infer_tag"] = True  # the compiled files fit this interpreter and platform
        for path, in_wheel in built.items():
            build_data["force_include"][str(path)] = in_wheel

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        """Remove the temporary folder once the wheel holds its files."""
        work = getattr(self, "_work", None)
        if work:
            shutil.rmtree(work, ignore_errors=True)


def get_requires_for_build_editable(config_settings: dict[str, Any] | None = None) -> list[str]:
    """PEP 660's hook: what hatchling asks for an editable install, less `COMPILER_TOOLS`."""
    return [
        requirement
        for requirement in _hatchling_editable_requires(config_settings)
        if requirement not in COMPILER_TOOLS
    ]


def compile_parsers(root: Path, work: Path) -> dict[Path, str]:
    """Compile `COMPILED_SOURCES` under `root` into extension modules under `work`.

    Returns:
        Each compiled file and its path inside the wheel (`parsers/text.cpython-311-....so`, and
        the shared `parsers__mypyc...so` at the top); empty, after a warning, when compiling is
        not possible here.
    """
    try:
        import setuptools  # noqa: F401 - the builds below run its build_ext
        from mypyc.build import mypycify
    except ImportError as error:
        warn(f"mypyc or setuptools is missing ({error})")
        return {}
    sources = sorted(
        {str(path.relative_to(root)) for pattern in COMPILED_SOURCES for path in root.glob(pattern)}
    )
    try:
        # A tiny extension first: mypyc's translation takes about 20 s before the compiler runs,
        # and a missing or broken compiler or header should cost a second, not that.
        _build_extensions([_probe_extension(work)], work / "probe")
        with _working_directory(root):
            extensions = mypycify(
                sources,
                opt_level=OPT_LEVEL,
                group_name=COMPILED_PACKAGE,
                target_dir=str(work / "c"),
            )
            outputs = _build_extensions(extensions, work / "lib")
    # mypyc exits (SystemExit) on a type error; setuptools raises its own errors when the
    # compiler or the headers are missing. Either way the pure-Python parsers still work.
    except (Exception, SystemExit) as error:
        lines = str(error).strip().splitlines()
        warn(f"compiling them failed: {lines[-1] if lines else type(error).__name__}")
        return {}
    lib = work / "lib"
    return {path: path.relative_to(lib).as_posix() for path in outputs}


def _probe_extension(work: Path) -> Any:
    from setuptools import Extension

    source = work / "probe" / "gpuherd_probe.c"
    source.parent.mkdir(parents=True, exist_ok=True)
    source.write_text(
        "#include <Python.h>\n"
        'static struct PyModuleDef probe = {PyModuleDef_HEAD_INIT, "gpuherd_probe"};\n'
        "PyMODINIT_FUNC PyInit_gpuherd_probe(void) { return PyModule_Create(&probe); }\n"
    )
    return Extension("gpuherd_probe", [str(source)])


def _build_extensions(extensions: list[Any], lib: Path) -> list[Path]:
    """Compile and link `extensions` with setuptools' `build_ext` into `lib`; their files."""
    from setuptools import Distribution

    dist = Distribution(
        {"name": "gpuherd-parsers", "ext_modules": extensions, "script_name": "hatch_build.py"}
    )
    build_ext = dist.get_command_obj("build_ext")
    build_ext.build_lib = str(lib)
    build_ext.build_temp = str(lib.with_name(lib.name + "-tmp"))
    build_ext.parallel = os.cpu_count() or 1
    dist.run_command("build_ext")
    return [Path(path) for path in build_ext.get_outputs()]


def warn(reason: str) -> None:
    """Say on stderr (shown by `pip install -v`) why the parsers stay pure Python."""
    print(
        f"gpuherd: the log parsers stay pure Python: {reason.rstrip('.')}. They read logs more "
        "slowly but find the same values.",
        file=sys.stderr,
    )


@contextlib.contextmanager
def _working_directory(path: Path) -> Iterator[None]:
    # mypyc names modules and writes its C files relative to the working directory
    before = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)
