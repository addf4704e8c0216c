"""Shared fixtures: a deterministic environment for every test."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from parsers.model import LogMetric


def _assign_once(metric: LogMetric, name: str, value: object) -> None:
    """`LogMetric` is immutable by contract, not by a frozen dataclass (see its docstring): in
    tests, a field that is set already cannot be set again, wherever the code doing it is."""
    try:
        getattr(metric, name)
    except AttributeError:  # an empty slot: the constructor filling it
        object.__setattr__(metric, name, value)
        return
    raise FrozenInstanceError(f"cannot assign to field {name!r} of a LogMetric")


def _no_delete(metric: LogMetric, name: str) -> None:
    raise FrozenInstanceError(f"cannot delete field {name!r} of a LogMetric")


LogMetric.__setattr__ = _assign_once  # type: ignore[method-assign,assignment]
LogMetric.__delattr__ = _no_delete  # type: ignore[method-assign,assignment]


@pytest.fixture(autouse=True)
def _quiet_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # Terminal colour and width leak into formatted output; pin them.
    monkeypatch.setenv("COLUMNS", "120")
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("TZ", "UTC")
    # CI runs a Slurm node (.ci/slurm-up): its jobs, other tests' among them, stay out of the
    # panels and snapshots of tests that are not about Slurm (tests/slurm turns it back on).
    monkeypatch.setenv("GPUHERD_SLURM", "off")


@pytest.fixture(autouse=True)
def _reap_queue_jobs() -> Iterator[None]:
    """After each test, the jobs its in-process queue runners started are ended and reaped
    (`tests.queue_helpers.reap_open_queues`); nothing to do where no test made a queue."""
    yield
    helpers = sys.modules.get("tests.queue_helpers")
    if helpers is not None:
        helpers.reap_open_queues()


@pytest.fixture
def utc_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local time is UTC for the test: logs stamp local time without a zone, so parsed times
    do not depend on the machine. `time.tzset()` makes the C library read `TZ` again."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test starts (append them): each is killed if still running, and reaped,
    when the test ends, whatever its outcome."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


PRODUCT_PACKAGES = ("collectors", "gpuherd", "parsers", "tui")


def pytest_configure(config: pytest.Config) -> None:
    """Byte-compile gpuherd once, before the workers start.

    The suite starts about a thousand Python processes of gpuherd (the command line, runners,
    recorders, dashboards in tmux). Where nothing writes their bytecode caches (a fresh clone
    with `PYTHONDONTWRITEBYTECODE` set, as in many CI images), each of them would compile every
    module it imports from source again; `compileall` writes the caches whatever that says.
    """
    if hasattr(config, "workerinput"):  # a pytest-xdist worker: the controller did it
        return
    import compileall

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for package in PRODUCT_PACKAGES:
        compileall.compile_dir(os.path.join(root, package), quiet=2)
    if getattr(config.option, "numprocesses", None):
        _rewrite_test_modules_once(config, Path(root, "tests"))


def _rewrite_test_modules_once(config: pytest.Config, tests: Path) -> None:
    """Write pytest's rewritten bytecode of the test modules before the workers start.

    Each worker imports every test module, through pytest's assertion rewriting; on a fresh
    clone (or with `PYTHONDONTWRITEBYTECODE`) each would rewrite and compile all of them, about
    5 s of CPU a worker. Workers read a rewritten module's cache even when they may not write
    one. This uses pytest's own (private) helpers; where they changed, the workers rewrite as
    they always do.
    """
    try:
        from _pytest.assertion import rewrite

        state = config.stash[rewrite.assertstate_key]
        for source in sorted(tests.rglob("*.py")):
            if not (source.name.startswith("test_") or source.name == "conftest.py"):
                continue
            cache_dir = rewrite.get_cache_dir(source)
            pyc = cache_dir / (source.name[:-3] + rewrite.PYC_TAIL)
            if rewrite._read_pyc(source, pyc, state.trace) is not None:
                continue
            if not rewrite.try_makedirs(cache_dir):
                return  # a read-only checkout
            source_stat, code = rewrite._rewrite_test(source, config)
            rewrite._write_pyc(state, code, source_stat, pyc)
    except Exception:  # noqa: BLE001 - only a speed-up: the workers rewrite as usual
        return


def pytest_collection_finish(session: pytest.Session) -> None:
    """Keep what collection made (modules, test items, fixtures' definitions) out of the
    garbage collector's full passes: each worker holds thousands of items for the whole run, and
    every full collection walked them again (about 6 % of the unit tests' CPU)."""
    gc.collect()
    gc.freeze()


def pytest_report_header(config: pytest.Config) -> str:
    return f"gpuherd tests, cwd={os.path.basename(os.getcwd())}"


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook, known only when it is installed
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (pyproject's addopts): two workers a core, at most 8, since many tests wait on
    a subprocess, a terminal or a socket; `PYTEST_XDIST_AUTO_NUM_WORKERS` sets it instead. On 2
    cores, a small edge: one run after the other on the same tree, 4 workers took 369 s and 3
    took 402 s with the same CPU, and 4 took 393, 355 and 342 s in three more runs
    (benchmarks/RESULTS.md); 2 workers leave a core idle while a test waits."""
    wanted = os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS", "")
    if wanted.isdigit():
        return int(wanted)
    cores = len(os.sched_getaffinity(0))
    return max(2, min(8, 2 * cores))


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order and group the tests for the workers of pyproject's addopts.

    Tests marked `slow` run first, in their usual order, then those marked `waits`, then the
    rest (`order`): a long test handed out last would keep one worker busy after the others are
    done. The `waits` tests (most of their time a deadline or a rotation's clock) run one after
    the other on one worker, as do the tests on the machine's Docker engine: in file order, a
    module of them went to every worker at once and left both cores mostly idle for 10 to 20 s,
    and spread among the other tests they still met (four of them at once where the tests
    around them were quick). The order is the same in every worker, as pytest-xdist requires,
    and no test depends on it. The Docker tests' busy containers each spin a core, and they
    read CPU percentages that other such containers would take from them. So do the GPU tests:
    each puts a known load on the GPU and checks what NVML reads of it.
    """
    for item in items:
        for marker, group in GROUPS:
            if item.get_closest_marker(marker) is not None:
                item.add_marker(pytest.mark.xdist_group(group))
    items.sort(key=order)


def order(item: pytest.Item) -> tuple[bool, bool]:
    """`slow` tests first, then the `waits` ones (`slow` or not), then the rest: the `waits`
    group starts when the `slow` tests are handed out, not beside the Docker and Slurm groups,
    which wait too (all three at once left the 2 cores a third idle for the first 30 s)."""
    waits = item.get_closest_marker("waits") is not None
    return item.get_closest_marker("slow") is None or waits, not waits


GROUPS = (("docker", "docker-engine"), ("gpu", "gpu"), ("slurm", "slurm"), ("waits", "waits"))
"""Tests of each marker run one at a time, on one worker (pytest-xdist's groups)."""
