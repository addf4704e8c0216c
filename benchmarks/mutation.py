"""Mutation testing of one module with mutmut: which small changes to it no test notices.

Usage: python benchmarks/mutation.py MODULE [--tests PATH ...] [--only GLOB ...] [--keep DIR]

MODULE is a path such as `parsers/health.py`. The working tree is copied to a scratch folder
(tracked and untracked files, as git lists them), `[tool.mutmut]` there is pointed at MODULE and
its tests (`--tests`, or the list in `TESTS` below), and `mutmut run` mutates it: each mutant
(an operator, constant or call changed) runs against the tests that reach the mutated function.
A mutant that no test fails on "survived".

It prints each survivor with its diff, marks the ones listed in `EQUIVALENT` (changes no output
can show, with the reason), and ends with one line per module: mutants, killed, survived (of
which equivalent), not reached by any test, timed out. benchmarks/RESULTS.md ("Mutation
testing") holds the latest counts. Several minutes per module on a 2-core machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

HEALTH_TESTS = [
    "tests/unit/test_health_boundaries.py",
    "tests/unit/test_tasks.py",
    "tests/unit/test_parsers.py",
    "tests/unit/test_health_agreement.py",
]
# Recording tests (`test_record_*`) are left out: they start whole recordings per mutant, one
# runs as another user who cannot import the mutation copy, and they pin nothing of the summary
# that the in-process tests do not.
SUMMARY_TESTS = [
    "tests/unit/test_summary.py",
    "tests/unit/test_summary_multi_gpu.py",
    "tests/unit/test_summary_stats_pinned.py",
    "tests/unit/test_summary_extremes.py",
    "tests/unit/test_summary_containers.py",
    "tests/unit/test_summary_charts.py",
    "tests/unit/test_session_cut_last_cell.py",
    "tests/unit/test_hf_run_average.py",
    "tests/unit/test_note.py",
    "tests/unit/test_note_content.py",
]
SUMMARY_MODULE_TESTS = [
    *SUMMARY_TESTS,
    "tests/unit/test_summary_sections_pinned.py",
    "tests/unit/test_summary_tasks_pinned.py",
    "tests/unit/test_summary_write_atomic.py",
]
TESTS: dict[str, list[str]] = {
    "parsers/health.py": HEALTH_TESTS,
    "gpuherd/tasks/health.py": HEALTH_TESTS,
    "gpuherd/summary/stats.py": SUMMARY_TESTS,
    "gpuherd/summary/summary.py": SUMMARY_MODULE_TESTS,
    "gpuherd/record/peaks.py": [
        "tests/unit/test_record_peaks.py",
        "tests/unit/test_peaks_pinned.py",
    ],
    "parsers/findings.py": [
        "tests/unit/test_findings_pinned.py",
        "tests/unit/test_parsers.py",
        "tests/unit/test_parsers_hand_read.py",
    ],
    "parsers/tqdm_bar.py": [
        "tests/unit/test_tqdm_units.py",
        "tests/unit/test_tqdm_pinned.py",
        "tests/unit/test_parsers.py",
        "tests/unit/test_parsers_hand_read.py",
        "tests/unit/test_parsers_bad_input.py",
        "tests/unit/test_parsers_several_bars.py",
        "tests/unit/test_parsers_console_formats.py",
        "tests/unit/test_parsers_golden.py",
    ],
    "collectors/session/session_reader.py": [
        "tests/unit/test_session_reader_pinned.py",
        "tests/unit/test_session_reader.py",
        "tests/unit/test_session_cut_last_cell.py",
        "tests/unit/test_session_damage.py",
        "tests/unit/test_session_fuzz.py",
        "tests/unit/test_session_containers.py",
        "tests/unit/test_replay_metrics.py",
        "tests/unit/test_summary.py",
    ],
}
"""The tests that pin each module's meaning (the whole unit suite for a module not listed)."""

_READER_TASKS = (
    "the session reader skips every metrics row with an empty task or metric and"
    " builds the task categories from the rows it kept: the filter removes nothing,"
    " and every category is observed"
)
EQUIVALENT: dict[str, list[tuple[str, str, str]]] = {
    "parsers/health.py": [
        (
            "xs[1:], strict=False)",
            "xs[1:], strict=None)",
            "zip's strict is tested for truth: None is False",
        ),
        ("xs[1:], strict=False)", "xs[1:], )", "strict=False is zip's default"),
    ],
    "gpuherd/tasks/health.py": [
        ("strict=False)", "strict=None)", "zip's strict is tested for truth: None is False"),
        ("strict=False)", "parts), )", "strict=False is zip's default"),
        (
            "health.stalled(loss, window=STALL_WINDOW)",
            "health.stalled(loss, )",
            "STALL_WINDOW is stalled()'s default window, 50",
        ),
        (
            "(row[0][0], sum(",
            "(row[1][0], sum(",
            "loss terms of one row are logged together, with one step: every term's x is the same",
        ),
    ],
    "gpuherd/summary/stats.py": [
        (
            'frame.groupby("id", observed=True, sort=False)',
            'groupby("id", observed=None',
            "the reader builds the id categories from the rows it read, and container_labels gets"
            " the whole frame: every category is observed",
        ),
        (
            'frame.groupby("id", observed=True, sort=False)',
            'groupby("id", observed=False',
            "the same: every id category is observed in the whole frame",
        ),
        (
            'frame.groupby("id", observed=True, sort=False)',
            'groupby("id", sort=False)',
            "the same: every id category is observed in the whole frame",
        ),
        (
            'frame.groupby("id", observed=True, sort=False)',
            "observed=True, sort=",
            "the order only orders a dict that is read by id, and the name counts",
        ),
        (
            'frame.groupby("id", observed=True, sort=False)',
            "observed=True, )",
            "the order only orders a dict that is read by id, and the name counts",
        ),
        (
            "frame.groupby(by, observed=True)",
            "frame.groupby(by, ",
            "observed only matters for categorical keys; the GPU index and the scope are not",
        ),
        (
            'finite.groupby(["task", "metric"], observed=True)',
            '"metric"], )',
            "left out, observed is pandas 3's default, True (installed here); pandas 2, which"
            " pyproject also allows, defaults to False, and then the pairs test fails: the explicit"
            " True is for it. (observed=None is not equivalent: pandas reads it as False)",
        ),
        (
            "pd.concat(out) if out else",
            "(out) or True",
            "out holds one table per statistic column, never none",
        ),
        (
            "units, strict=True)",
            "units, ",
            "units is built from the same index: the lengths always match",
        ),
        (
            'return "inf" if value > 0 else',
            'return "inf" if value >= 0 else',
            "only an infinity reaches this line, and +inf > 0, +inf >= 0, +inf > 1 alike",
        ),
        (
            'return "inf" if value > 0 else',
            'return "inf" if value > 1 else',
            "only an infinity reaches this line, and +inf > 0, +inf >= 0, +inf > 1 alike",
        ),
    ],
    "gpuherd/record/peaks.py": [
        (
            "self.unavailable: str | None = None",
            '= ""',
            'only tested for truth, and "" is false as None is',
        ),
        (
            "timeout_s: float = 2.0",
            "timeout_s: float = 3.0",
            "how long stop() waits for a thread that ends within one fast interval",
        ),
        (
            "self._thread.join(timeout_s)",
            "join(None)",
            "the same: the thread ends within one fast interval after the stop event",
        ),
        (
            "time.monotonic() < deadline and",
            "time.monotonic() <= deadline and",
            "a clock reading equal to the deadline to the nanosecond: one more 5 ms poll at most",
        ),
        (
            "time.sleep(0.005)",
            "time.sleep(1.005)",
            "how often the first reading is polled: a later start, no other output",
        ),
        ("used > gpu.peak", "used >= gpu.peak", "an equal reading sets the same value"),
        (
            "self._gpus.setdefault(index, _Gpu())",
            "setdefault(index, ",
            "only GPUs with a reading are in the own-memory map, and the reading made the entry",
        ),
        (
            "if timeout > 0 and not self.is_set():",
            "if timeout >= 0",
            "time.sleep(0) returns at once, as skipping it does",
        ),
    ],
    "gpuherd/summary/summary.py": [
        (
            'groupby("task", sort=False, observed=True)',
            'groupby("task", sort=None, ',
            "pandas tests sort for truth: None is False",
        ),
        (
            'groupby("task", sort=False, observed=True)',
            'groupby("task", sort=False, )',
            _READER_TASKS,
        ),
        ('groupby("task", sort=False, observed=True)', "sort=False, observed=None)", _READER_TASKS),
        (
            'groupby("task", sort=False, observed=True)',
            "sort=False, observed=False)",
            _READER_TASKS,
        ),
        (
            'metrics[metrics["task"].notna() & metrics["metric"].notna()]',
            'metrics[metrics["task"].notna() | metrics["metric"].notna()]',
            _READER_TASKS,
        ),
        (
            "per_metric.get(str(task), {})",
            "per_metric.get(str(task), None)",
            "every task the loop sees has rows, and _metric_table makes an entry for each: the"
            " default is never used",
        ),
        (
            "per_metric.get(str(task), {})",
            "per_metric.get(str(task), )",
            "every task the loop sees has rows, and _metric_table makes an entry for each: the"
            " default is never used",
        ),
        (
            'if elapsed <= 0 or last["step"]',
            'if elapsed < 0 or last["step"]',
            "elapsed is 0 only when every stepped row has the same time; idxmin and idxmax then"
            " pick the same (first) row, whose step is not above itself: None either way",
        ),
        (
            'return "inf" if value > 0 else',
            'return "inf" if value >= 0 else',
            "only an infinity reaches this line, and +inf > 0, +inf >= 0, +inf > 1 alike",
        ),
        (
            'return "inf" if value > 0 else',
            'return "inf" if value > 1 else',
            "only an infinity reaches this line, and +inf > 0, +inf >= 0, +inf > 1 alike",
        ),
        (
            'drop_duplicates(keys, keep="first")',
            "drop_duplicates(keys, )",
            'keep="first" is drop_duplicates\' default',
        ),
        (
            "finite.groupby(keys, observed=True)",
            "finite.groupby(keys, )",
            "observed=True is the default of pandas 3 (installed here), not of pandas 2, which"
            " pyproject also allows: the explicit True is for it",
        ),
        (
            "total = metrics.groupby(keys, observed=True)",
            "metrics.groupby(keys, observed=None)",
            "pandas reads observed=None as False: the sizes of the (task, metric) pairs that occur"
            " are the same, and the pairs of size 0 it adds are never looked up",
        ),
        (
            "total = metrics.groupby(keys, observed=True)",
            'metrics.groupby(keys, )["value"]',
            "observed=True is pandas 3's default, and with pandas 2's False the sizes of the pairs"
            " that occur are the same, the pairs of size 0 never looked up",
        ),
        (
            "total = metrics.groupby(keys, observed=True)",
            "metrics.groupby(keys, observed=False)",
            "the sizes of the (task, metric) pairs that occur are the same; the pairs of size 0 it"
            " adds are never looked up: the loop reads only pairs that have rows",
        ),
        (
            'encoding="utf-8", newline=newline)',
            'encoding="utf-8", newline=None)',
            "gpuherd summarize imports fcntl, so runs on POSIX only, where newline=None writes each"
            " \\n as os.linesep, \\n: the same bytes",
        ),
        (
            'encoding="utf-8", newline=newline)',
            'encoding="utf-8", )',
            "gpuherd summarize imports fcntl, so runs on POSIX only, where newline=None writes each"
            " \\n as os.linesep, \\n: the same bytes",
        ),
        (
            'encoding="utf-8", newline=newline)',
            'encoding="UTF-8"',
            "codec names are looked up case-insensitively: the same codec",
        ),
        (
            'kind = str(event.get("kind", ""))',
            'event.get("kind", None)',
            "events come from the session reader, which refuses an event whose kind is not a"
            " string: the default is never used",
        ),
        (
            'kind = str(event.get("kind", ""))',
            'event.get("kind", )',
            "events come from the session reader, which refuses an event whose kind is not a"
            " string: the default is never used",
        ),
        (
            'kind = str(event.get("kind", ""))',
            'event.get("kind", "XXXX")',
            "events come from the session reader, which refuses an event whose kind is not a"
            " string: the default is never used",
        ),
    ],
    "collectors/session/session_reader.py": [
        (
            "if found is not None or block == size:",
            "if found is not None and block == size:",
            "a longer tail has the same last valid row, so reading on to the whole file returns"
            " the same t; with none found, every block up to the whole file finds none",
        ),
    ],
    "parsers/findings.py": [
        (
            '("y" in line and "emory" in line)',
            '("y" in line or "emory" in line)',
            "the one-letter test only spares the word search: with `or`, more lines reach the"
            " regexes, which decide alone",
        ),
        (
            'or ("T" in line and "Traceback" in line)',
            'or ("T" in line or "Traceback" in line)',
            "the same: a letter test only spares the word search",
        ),
        (
            'or ("w" in line and "ownload" in line)',
            'or ("w" in line or "ownload" in line)',
            "the same: a letter test only spares the word search",
        ),
        (
            'or ("F" in line and "Fetching" in line)',
            'or ("F" in line or "Fetching" in line)',
            "the same: a letter test only spares the word search",
        ),
        (
            'or ("C" in line and ("NCCL" in line',
            'or ("C" in line or ("NCCL" in line',
            "the same: a letter test only spares the word search",
        ),
        (
            'or ("K" in line and "Killed" in line)',
            'or ("K" in line or "Killed" in line)',
            "the same: a letter test only spares the word search",
        ),
        (
            'or ("S" in line and "Segmentation" in line)',
            'or ("S" in line or "Segmentation" in line)',
            "the same: a letter test only spares the word search",
        ),
        (
            'or ("B" in line and "B/s" in line)',
            'or ("B" in line or "B/s" in line)',
            "the same: a letter test only spares the word search",
        ),
        (
            'or ("T" in line and "Traceback" in line)',
            'or ("t" in line and "Traceback" in line)',
            'the traceback regex needs `Traceback (most recent call last)`, which holds a "t"',
        ),
        (
            'or ("F" in line and "Fetching" in line)',
            'or ("f" in line and "Fetching" in line)',
            'the download regex needs `Fetching N files`, whose "files" holds an "f"',
        ),
        (
            "if len(line) > _RAW_SCAN_CHARS:",
            "if len(line) >= _RAW_SCAN_CHARS:",
            "the cut-off only picks which text the cheap keyword pre-test reads: at exactly 512"
            " characters the cleaned line instead of the raw one; they differ only where an escape"
            " code or a backspace splits a keyword, which lines of any other length under the"
            " cut-off miss as well",
        ),
    ],
    "parsers/tqdm_bar.py": [
        (
            'if not line.endswith("]") and not line.rstrip().endswith("]"):',
            'not line.endswith("XX]XX")',
            "a line that ends in `]` still does once stripped: "
            "the first test only spares the strip",
        ),
        (
            'bracket = line.rfind("[", 0, line.rfind("]"))',
            'rfind("[", None, ',
            "a start of None is 0",
        ),
        (
            'bar_end = line.rfind("|", 0, bracket)',
            'rfind("|", None, bracket)',
            "a start of None is 0",
        ),
        (
            'bar_start = line.rfind("|", 0, bar_end) if bar_end > 0 else -1',
            'rfind("|", None, bar_end)',
            "a start of None is 0",
        ),
        (
            'bracket = line.rfind("[", 0, line.rfind("]"))',
            'rfind("[", 0, None)',
            "the line's last non-blank character is its last `]` (tested just above, or where a "
            "record was cut off): every `[` lies before it",
        ),
        ('bracket = line.rfind("[", 0, line.rfind("]"))', 'rfind("[", 0, )', "the same"),
        (
            'bracket = line.rfind("[", 0, line.rfind("]"))',
            'rfind("XX]XX")',
            "an end of -1 leaves out only the last character, which is the last `]` or a blank, "
            "never `[`",
        ),
        (
            'bracket = line.rfind("[", 0, line.rfind("]"))',
            'rfind("[", 1, ',
            "a `[` at index 0 has no count before it, so no bar matches: None either way",
        ),
        ("if bracket < 0:", "if bracket <= 0:", "the same: a `[` at index 0 opens no bar"),
        ("if bracket < 0:", "if bracket < 1:", "the same: a `[` at index 0 opens no bar"),
        (
            'bar_end = line.rfind("|", 0, bracket)',
            'rfind("|", 1, bracket)',
            "a bar end at 0 and none (-1) both give no bar start",
        ),
        (
            "max(0, bracket - 200), bar_end) if bar_end > 0 else -1",
            "(bar_end > 0) and False",
            "the window only spares a search: where it holds no `|` at index 4 or later, "
            "_start_without_bar looks again from the line's start up to bar_end and finds the same "
            "`|`, so every window gives the same start",
        ),
        (
            "max(0, bracket - 200), bar_end) if bar_end > 0 else -1",
            'rfind("|", None, bar_end)',
            "the window only spares a search: where it holds no `|` at index 4 or later, "
            "_start_without_bar looks again from the line's start up to bar_end and finds the same "
            "`|`, so every window gives the same start",
        ),
        (
            "max(0, bracket - 200), bar_end) if bar_end > 0 else -1",
            'rfind("XX|XX"',
            "the window only spares a search: where it holds no `|` at index 4 or later, "
            "_start_without_bar looks again from the line's start up to bar_end and finds the same "
            "`|`, so every window gives the same start",
        ),
        (
            "max(0, bracket - 200), bar_end) if bar_end > 0 else -1",
            "max(1, bracket - 200)",
            "the window only spares a search: where it holds no `|` at index 4 or later, "
            "_start_without_bar looks again from the line's start up to bar_end and finds the same "
            "`|`, so every window gives the same start",
        ),
        (
            "max(0, bracket - 200), bar_end) if bar_end > 0 else -1",
            "max(0, bracket + 200)",
            "the window only spares a search: where it holds no `|` at index 4 or later, "
            "_start_without_bar looks again from the line's start up to bar_end and finds the same "
            "`|`, so every window gives the same start",
        ),
        (
            "max(0, bracket - 200), bar_end) if bar_end > 0 else -1",
            "max(0, bracket - 201)",
            "the window only spares a search: where it holds no `|` at index 4 or later, "
            "_start_without_bar looks again from the line's start up to bar_end and finds the same "
            "`|`, so every window gives the same start",
        ),
        (
            "max(0, bracket - 200), bar_end) if bar_end > 0 else -1",
            "if bar_end >= 0 else",
            "the window only spares a search: where it holds no `|` at index 4 or later, "
            "_start_without_bar looks again from the line's start up to bar_end and finds the same "
            "`|`, so every window gives the same start; and a search up to 0 finds nothing",
        ),
        (
            "max(0, bracket - 200), bar_end) if bar_end > 0 else -1",
            "if bar_end > 1 else",
            "the window only spares a search: where it holds no `|` at index 4 or later, "
            "_start_without_bar looks again from the line's start up to bar_end and finds the same "
            "`|`, so every window gives the same start",
        ),
        (
            "max(0, bracket - 200), bar_end) if bar_end > 0 else -1",
            "else +1",
            "the window only spares a search: where it holds no `|` at index 4 or later, "
            "_start_without_bar looks again from the line's start up to bar_end and finds the same "
            "`|`, so every window gives the same start",
        ),
        (
            "max(0, bracket - 200), bar_end) if bar_end > 0 else -1",
            "else -2",
            "the window only spares a search: where it holds no `|` at index 4 or later, "
            "_start_without_bar looks again from the line's start up to bar_end and finds the same "
            "`|`, so every window gives the same start",
        ),
        (
            "if bar_start >= 4:",
            "if bar_start > 4:",
            "at 4, _start_without_bar finds the same `|` and returns 4 - 4, as this branch does",
        ),
        ("if bar_start >= 4:", "if bar_start >= 5:", "the same"),
        (
            'bar_start = line.rfind("|", 0, bar_end) if bar_end > 0 else -1',
            "if bar_end >= 0 else",
            "a search up to index 0 finds nothing: -1 either way",
        ),
        (
            'bar_start = line.rfind("|", 0, bar_end) if bar_end > 0 else -1',
            "else -2",
            "any start below 0 takes the same branch",
        ),
        (
            'unit = match["unit"] or ""',
            'or "XXXX"',
            "the unit is only compared with `B/s`, `s/...B` and the dataset units, and neither "
            "`XXXX` nor the empty unit is one of them",
        ),
        (
            '(match["postfix"] or "").endswith',
            '(match["postfix"] or "XXXX").endswith',
            "neither `XXXX` nor the empty text ends with a dataset rate",
        ),
        (
            'self.unit: str = unit or ""',
            'or "XXXX"',
            "a rate without a unit counts iterations: `XXXX` holds no `/s` or `s/` and is no sample"
            " or token unit, so it counts iterations too",
        ),
        (
            'desc_as_printed: str = "") -> None:',
            'desc_as_printed: str = "XXXX"',
            "read_bar, the only caller, always passes the description",
        ),
        (
            'if "epoch" in low_desc else None',
            '("epoch" in low_desc) or True',
            "_EPOCH needs the word `epoch`: the test only spares the search",
        ),
        (
            "while cut >= 0:",
            "while cut > 0:",
            "a line opening with `][LEVEL|` gives `]` (no `[`, no bar) instead of nothing: None "
            "either way; read_bar is bar_before_record's only caller",
        ),
        ("while cut >= 0:", "while cut >= 1:", "the same"),
        (
            'cut = line.find("][", cut + 2)',
            'cut = line.find("][", cut + 3)',
            "differs only where a `][` follows right after another (`...][][INFO|`): the line cut "
            "there ends in `[]`, which no bar matches, so None either way",
        ),
        ('return ""', 'return "XXXX"', "read_bar finds no `]` in `XXXX`: None either way"),
    ],
}
"""Per module, (text of the line the mutant changes, text of its new line, why no output can
differ) for survivors known to be equivalent."""


def copy_tree(target: Path) -> None:
    """The working tree as git sees it (tracked and untracked, not ignored), into `target`."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    )
    for name in sorted(set(listed.stdout.decode().split("\0")) - {""}):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)


def configure(target: Path, module: str, tests: list[str]) -> None:
    """Point `[tool.mutmut]` of the copy at `module` and `tests`."""
    path = target / "pyproject.toml"
    text = path.read_text()
    text = re.sub(r"\n\[tool\.mutmut\]\n.*?(?=\n\[|\Z)", "", text, flags=re.S)
    quoted = ", ".join(f'"{t}"' for t in tests)
    text += (
        f'\n[tool.mutmut]\nsource_paths = ["parsers", "gpuherd", "collectors"]\n'
        f'only_mutate = ["{module}"]\n'
        f'pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-x"]\n'
        f"pytest_add_cli_args_test_selection = [{quoted}]\n"
    )
    path.write_text(text)


def mutmut(target: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mutmut", *args], cwd=target, capture_output=True, text=True
    )


def statuses(target: Path) -> dict[str, str]:
    """Mutant name -> status (`killed`, `survived`, `no tests`, `timeout`, ...)."""
    out = mutmut(target, "results", "--all", "true")
    found = {}
    for line in out.stdout.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep:
            found[name] = status
    return found


def diff_of(target: Path, name: str) -> str:
    return "\n".join(
        line
        for line in mutmut(target, "show", name).stdout.splitlines()
        if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))
    )


def equivalent_reason(module: str, diff: str) -> str | None:
    removed = " ".join(line[1:].strip() for line in diff.splitlines() if line.startswith("-"))
    added = " ".join(line[1:].strip() for line in diff.splitlines() if line.startswith("+"))
    for old, new, why in EQUIVALENT.get(module, []):
        if old in removed and new in added:
            return why
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("module", help="the module to mutate, e.g. parsers/health.py")
    parser.add_argument("--tests", nargs="+", help="test files or folders to run on each mutant")
    parser.add_argument("--max-children", type=int, default=2, help="mutants run at once")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    parser.add_argument(
        "--only",
        nargs="+",
        default=[],
        help="mutant name globs, e.g. 'gpuherd.summary.summary.x_gpu_summary*'",
    )
    args = parser.parse_args()
    module = args.module
    if not (ROOT / module).is_file():
        parser.error(f"{module}: no such module under {ROOT}")
    if importlib.util.find_spec("mutmut") is None:
        parser.error("mutmut is not installed here: pip install -e '.[test,mutation]'")
    tests = args.tests or TESTS.get(module, ["tests/unit"])
    work = args.keep or Path(tempfile.mkdtemp(prefix="gpuherd-mutation-"))
    work.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    try:
        copy_tree(work)
        configure(work, module, tests)
        run = mutmut(work, "run", "--max-children", str(args.max_children), *args.only)
        if run.returncode != 0:
            print(run.stdout[-3000:], run.stderr[-3000:], file=sys.stderr)
            return 1
        found = statuses(work)
        counts = Counter(found.values())
        equivalent = 0
        for name, status in sorted(found.items()):
            if status not in ("survived", "no tests", "timeout", "suspicious"):
                continue
            diff = diff_of(work, name)
            why = equivalent_reason(module, diff) if status == "survived" else None
            equivalent += why is not None
            print(f"{status}: {name}" + (f"  [equivalent: {why}]" if why else ""))
            print("    " + diff.replace("\n", "\n    "))
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    checked = len(found) - counts["not checked"]
    print(
        f"{module}: {checked} mutants, {counts['killed']} killed, {counts['survived']} "
        f"survived ({equivalent} equivalent), {counts['no tests']} not reached by a test, "
        f"{counts['timeout']} timed out; {time.monotonic() - began:.0f} s "
        f"with {len(tests)} test paths"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
