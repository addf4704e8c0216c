"""The wheel's compiled parsers (hatch_build.py) find what the pure-Python parsers find.

A real wheel is built from this checkout, as `pip install .` builds it (but at mypyc's opt level
0, which halves the build), and the parser tests run again on the parsers it holds, compiled by
mypyc, and the tracker readers' tests on its compiled tracker modules. Where no C compiler is
there the wheel must still build, with the pure-Python parsers and a warning saying why.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from hatch_build import COMPILED_SOURCES  # noqa: E402

COMPILED_MODULES = sorted(
    {
        path.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".")
        for pattern in COMPILED_SOURCES
        for path in ROOT.glob(pattern)
    }
)
"""The modules a wheel built with a compiler holds compiled (`parsers.text`, ...)."""

PARSER_TESTS = sorted(
    str(path.relative_to(ROOT))
    for pattern in (
        "test_parsers*.py",
        "test_parse_*.py",
        "test_findings*.py",
        "test_health*.py",
        "test_tqdm*.py",
        "test_trl_names.py",
        "test_log_metric_contract.py",
        "test_bench_parse_recall.py",
        # the tracker readers' compiled modules (framing, the in-place W&B and TensorBoard
        # reading); not test_trackers_writers.py nor _record.py, whose time goes to child
        # processes and the recorder, not to reading
        "test_trackers_follow.py",
        "test_trackers_parse.py",
        "test_trackers_wandb_wire.py",
        "test_trackers_tensorboard_wire.py",
    )
    for path in (ROOT / "tests" / "unit").glob(pattern)
)
"""The tests that exercise the compiled modules, run again on the compiled ones."""

ONLY_PURE_PYTHON = [
    # It counts calls by replacing `time.mktime` on the `time` module; the compiled call does
    # not go through that attribute, so the replacement is never called. What it caches, the
    # converted stamps, the other timestamp tests check on both builds.
    "tests/unit/test_parsers.py::test_timestamps_of_one_second_are_converted_once",
    # The same: it records `record_kind`'s calls by replacing it on its module, which the
    # compiled `HistoryReader.read` calls directly. The values read are checked on both builds.
    "tests/unit/test_trackers_wandb_wire.py::test_numbered_records_of_any_length_are_read_without_decoding",
]

SHARES = 1
"""The parser tests run on the compiled parsers in this many parts, each its own test (each
part is a pytest of its own: about 2.5 s of CPU to start and collect, so one part on 2 cores)."""

RUN_ON_COMPILED = """
import importlib, importlib.machinery, sys
sys.path.insert(0, sys.argv[1])
pure = [n for n in sys.argv[4].split(",") if not importlib.import_module(n).__file__.endswith(
    tuple(importlib.machinery.EXTENSION_SUFFIXES))]
if pure:
    sys.exit(f"not compiled: {pure}")
import pytest
share, shares = int(sys.argv[2]), int(sys.argv[3])

class Share:
    # Every `shares`-th test from the `share`-th: the parts together are the whole run.
    def pytest_collection_modifyitems(self, config, items):
        config.hook.pytest_deselected(items=[t for i, t in enumerate(items) if i % shares != share])
        items[:] = items[share::shares]

sys.exit(pytest.main(sys.argv[5:], plugins=[Share()]))
"""


def version_line(wheel: Path, into: Path) -> str:
    """`gpuherd --version` as printed by the wheel's own code, unpacked into `into`."""
    zipfile.ZipFile(wheel).extractall(into)
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); "
            "from gpuherd.cli import main; main(['--version'])",
            str(into),
        ],
        cwd=into,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done.stdout.strip()


def no_compiler_reason() -> str | None:
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler ({compiler}) to compile the parsers with"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").exists():
        return "no Python headers (Python.h) to compile the parsers against"
    return None


def build_wheel(out: Path, env: dict[str, str] | None = None) -> tuple[Path, str]:
    """A wheel of this checkout, built as `pip install .` builds it (the build tools of the
    test environment, no download), and the build's output."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-v",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            str(out),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [wheel] = out.glob("gpuherd-*.whl")
    return wheel, done.stdout + done.stderr


def flags_without_warnings() -> str:
    """Python's C flags less its `-W` warnings (a `CFLAGS` set in the environment replaces
    them in the build): at `-O0`, gcc's `-Wall` analyses took 17 of the build's 31 s of CPU."""
    flags = str(sysconfig.get_config_var("CFLAGS") or "").split()
    return " ".join(flag for flag in flags if not flag.startswith("-W"))


@pytest.fixture(scope="session")
def compiled_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The compiled wheel, built once for the whole run: under pytest-xdist the workers share
    the run's temporary root, and the first to get its lock builds the wheel there."""
    reason = no_compiler_reason()
    if reason:
        pytest.skip(reason)
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent
    out = shared / "compiled-wheel"
    with open(shared / "compiled-wheel.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        built = sorted(out.glob("gpuherd-*.whl"))
        if built:
            return built[0]
        # mypyc's opt level 0 (gcc -O0) and Python's C flags without its warnings: the same C
        # from the same translation, built in about a third of the -O3 -Wall users' installs
        # get (docs/parsers.md says what the suite then leaves unchecked)
        wheel, output = build_wheel(
            out, env={"GPUHERD_MYPYC_OPT_LEVEL": "0", "CFLAGS": flags_without_warnings()}
        )
        assert "stay pure Python" not in output, output[-3000:]
        return wheel


@pytest.mark.slow
def test_a_wheel_built_with_a_compiler_holds_every_parser_compiled(compiled_wheel: Path) -> None:
    names = zipfile.ZipFile(compiled_wheel).namelist()
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    sources = sorted(n for n in names if n.startswith("parsers/") and n.endswith(".py"))
    assert len(sources) > 20
    assert [n for n in sources if n.removesuffix(".py") + suffix not in names] == []
    assert f"parsers__mypyc{suffix}" in names
    # Only the parsers and the tracker modules named in hatch_build.py are compiled; the wheel
    # says which interpreter it is for.
    compiled = {n.removesuffix(suffix).replace("/", ".") for n in names if n.endswith(suffix)}
    assert compiled == {"parsers__mypyc", *COMPILED_MODULES}
    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert compiled_wheel.name.split("-")[2] == tag


# Not `slow`: the build above, handed out first, makes the wheel while the workers run other
# tests; marked `slow` too, these waited idle on its lock at the start of every run.
def test_gpuherd_version_says_the_parsers_are_compiled(
    compiled_wheel: Path, tmp_path: Path
) -> None:
    assert version_line(compiled_wheel, tmp_path).endswith("(log parsers: compiled)")


@pytest.mark.parametrize("share", range(SHARES))
def test_the_parser_tests_pass_on_the_compiled_parsers(
    compiled_wheel: Path, tmp_path: Path, share: int
) -> None:
    installed = tmp_path / "site"
    zipfile.ZipFile(compiled_wheel).extractall(installed)
    deselect = [arg for test in ONLY_PURE_PYTHON for arg in ("--deselect", test)]
    # `-n 0`: in this one process, which alone has the compiled parsers first on its path
    # (pyproject's addopts would start workers importing the pure-Python ones). The `slow`
    # fuzz tests run on the pure build only: they ask what any input does to the parsers'
    # logic, which both builds share; what compiling can change (ints, floats, exceptions,
    # every format's golden lines) the other tests pin on the compiled build.
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            RUN_ON_COMPILED,
            str(installed),
            str(share),
            str(SHARES),
            ",".join(name.removesuffix(".__init__") for name in COMPILED_MODULES),
            "-q",
            "-n",
            "0",
            "-p",
            "no:cacheprovider",
            "-m",
            "not slow",
            *deselect,
            *PARSER_TESTS,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert " passed" in done.stdout and " failed" not in done.stdout


def test_without_a_c_compiler_the_wheel_keeps_the_pure_python_parsers(tmp_path: Path) -> None:
    wheel, output = build_wheel(tmp_path, env={"CC": str(shutil.which("false"))})
    assert "gpuherd: the log parsers stay pure Python: compiling them failed" in output
    names = zipfile.ZipFile(wheel).namelist()
    assert "parsers/tqdm_bar.py" in names
    assert [n for n in names if n.endswith(".so")] == []
    assert wheel.name.endswith("-py3-none-any.whl")
    assert version_line(wheel, tmp_path / "site").endswith("(log parsers: pure Python)")


def test_gpuherd_pure_python_skips_compiling(tmp_path: Path) -> None:
    wheel, output = build_wheel(tmp_path, env={"GPUHERD_PURE_PYTHON": "1"})
    assert "stay pure Python: GPUHERD_PURE_PYTHON is set" in output
    assert wheel.name.endswith("-py3-none-any.whl")


def test_a_wheel_asks_for_the_compiler_tools_and_an_editable_install_does_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The backend's hooks read the project from the working directory, as installers call them.
    monkeypatch.chdir(ROOT)
    import hatch_build

    build_system = (ROOT / "pyproject.toml").read_text().split("[build-system]")[1].split("\n[")[0]
    assert 'build-backend = "hatch_build"' in build_system
    assert 'backend-path = ["."]' in build_system
    wheel = hatch_build.get_requires_for_build_wheel()
    editable = hatch_build.get_requires_for_build_editable()
    assert set(hatch_build.COMPILER_TOOLS) <= set(wheel)
    assert set(hatch_build.COMPILER_TOOLS) & set(editable) == set()
    # the rest of hatchling's list for an editable install stays
    assert any(requirement.startswith("editables") for requirement in editable)
