"""Generalization: the share of hand-read values found without the framework parsers.

Usage: python benchmarks/bench_generalization.py [--write-results]

Every log of tests/data/logs with values in `HAND_READ` (tests/unit/test_parsers_hand_read.py)
or `UNSEEN` (tests/unit/hand_read_unseen.py: frameworks with no parser of their own) is parsed
in this process by `gpuherd parse`'s own code (`parse_file`: the shared line pipeline,
detection included) three ways:

* all parsers: as `gpuherd parse` runs (the figure of bench_parse_recall.py);
* generic alone: every format of `parsers.registry.FRAMEWORK_FORMATS` off, so only the readers
  that know no framework are left: the generic key-value and plain-line reader, CSV headers,
  JSON records and tqdm bars;
* leave one family out: each log with its own family's framework parsers off (the formats that
  detection picks for the logs of its tests/data/logs folder), every other parser on, as a log
  of a framework nobody wrote a parser for would be read.

A value counts as found as bench_parse_recall.py counts it (its `found`: line, name, value,
and step or epoch where the reading names them). Each miss gets a cause: `wrong step` (the
name and value are on the line, at another step or epoch), `wrong side` (the value is there as
the other of train and validation), `name differs` (the value is there under another name),
`value missed` (the line gave other values) or `line not read` (the line gave nothing).
A reported value that no reading of its log has on its line and that the full parse (all
parsers: the output the golden files pin) does not report on that line either, under any name,
is counted as unaccounted: a false positive (a config value, a printout, a placeholder) or a
value the framework parser leaves out on purpose; the most frequent names are listed.

With `--write-results` the tables go into the "Generalization" section of RESULTS.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_parse_recall import found, replace_section, same_value  # noqa: E402

from gpuherd.parse.parse_command import parse_file  # noqa: E402
from parsers.registry import FRAMEWORK_FORMATS  # noqa: E402
from tests.unit.hand_read_unseen import UNSEEN  # noqa: E402
from tests.unit.test_parsers_hand_read import HAND_READ as FRAMEWORK_READ  # noqa: E402
from tests.unit.test_parsers_hand_read import Read  # noqa: E402

HAND_READ = {**FRAMEWORK_READ, **UNSEEN}
"""Every hand-read log: those of frameworks with a parser, and those of frameworks without."""

DATA = ROOT / "tests" / "data" / "logs"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SECTION = "## Generalization: the generic reader alone, and each family without its parser"
MODES = ("all parsers", "generic alone", "leave one family out")
CAUSES = ("wrong step", "wrong side", "name differs", "value missed", "line not read")
SIDES = ("train/", "val/", "eval/", "test/")


@dataclass
class Score:
    """What one way of reading found over the hand-read logs."""

    per_family: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    """Family (tests/data/logs folder) -> [found, read by eye]."""
    misses: list[tuple[str, Read, str]] = field(default_factory=list)
    """(log, reading, cause) of every reading not found."""
    unaccounted: dict[str, Counter[str]] = field(default_factory=dict)
    """Family -> names of values neither a reading nor the full parse has there, with counts."""
    values: dict[str, dict[int, list[float]]] = field(default_factory=dict)
    """Log -> line -> the values reported on it."""
    formats: dict[str, str] = field(default_factory=dict)
    """Log -> the format it was read as."""

    def total(self) -> tuple[int, int]:
        """(found, read by eye) over every family."""
        return (
            sum(h for h, _ in self.per_family.values()),
            sum(t for _, t in self.per_family.values()),
        )


def family_of(key: str) -> str:
    """The tests/data/logs folder of a `HAND_READ` key."""
    return key.split("/", 1)[0]


def read_logs() -> list[str]:
    """The `HAND_READ` keys that carry values (failure logs carry findings only)."""
    return [key for key, log in sorted(HAND_READ.items()) if log.values]


def parse(key: str, off: frozenset[str]) -> tuple[str, list[dict[str, Any]]]:
    """(format read as, metric records) of one log with the formats `off` left out."""
    records: list[dict[str, Any]] = []
    report = parse_file(str(DATA / key), None, records.append, off)
    return report.format, [r for r in records if "metric" in r]


def _base(name: str) -> str:
    for side in SIDES:
        if name.startswith(side):
            return name[len(side) :]
    return name


def cause(read: Read, on_line: list[dict[str, Any]]) -> str:
    """Why `read` was not found, from the records of its line."""
    if not on_line:
        return "line not read"
    same = [r for r in on_line if same_value(float(r["value"]), read.value)]
    if any(r["metric"] == read.name for r in same):
        return "wrong step"
    if any(r["metric"] != read.name and _base(r["metric"]) == _base(read.name) for r in same):
        return "wrong side"
    return "name differs" if same else "value missed"


def score(
    keys: Iterable[str], off_for: dict[str, frozenset[str]], reference: Score | None = None
) -> Score:
    """Score every log in `keys`, each with the formats `off_for[its family]` left out.

    Values that neither a reading nor `reference` (the full parse) has on their line are
    counted as unaccounted; without a reference, none is.
    """
    result = Score()
    for key in keys:
        family = family_of(key)
        result.formats[key], records = parse(key, off_for.get(family, frozenset()))
        by_line: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for record in records:
            by_line[record["line"]].append(record)
        reads = HAND_READ[key].values
        for read in reads:
            hit = found(read, by_line.get(read.line, []))
            result.per_family[family][0] += hit
            result.per_family[family][1] += 1
            if not hit:
                result.misses.append((key, read, cause(read, by_line.get(read.line, []))))
        result.values[key] = {n: [float(r["value"]) for r in on] for n, on in by_line.items()}
        extra = result.unaccounted.setdefault(family, Counter())
        if reference is not None:
            known = reference.values[key]
            for record in records:
                value, line = float(record["value"]), record["line"]
                if not any(
                    read.line == line and same_value(value, read.value) for read in reads
                ) and not any(same_value(value, v) for v in known.get(line, ())):
                    extra[record["metric"]] += 1
    return result


def measure() -> dict[str, Score]:
    """The three ways of reading, by name (`MODES`)."""
    keys = read_logs()
    everything = score(keys, {})
    own: dict[str, set[str]] = defaultdict(set)
    for key, log_format in everything.formats.items():
        if log_format in FRAMEWORK_FORMATS:
            own[family_of(key)].add(log_format)
    alone = {family_of(key): FRAMEWORK_FORMATS for key in keys}
    left_out = {f: frozenset(s) for f, s in own.items()}
    return {
        "all parsers": everything,
        "generic alone": score(keys, alone, everything),
        "leave one family out": score(keys, left_out, everything),
    }


def _share(hit: int, total: int) -> str:
    return f"{hit} / {total} ({100 * hit / total:.1f} %)" if total else "-"


def recall_rows(scores: dict[str, Score]) -> list[str]:
    """Markdown rows: found / read by eye per family in each way of reading, overall last."""
    rows = ["| family | " + " | ".join(MODES) + " |", "| --- |" + " ---: |" * len(MODES)]
    for family in sorted(scores[MODES[0]].per_family):
        cells = [_share(*scores[m].per_family[family]) for m in MODES]
        rows.append(f"| `{family}` | " + " | ".join(cells) + " |")
    rows.append("| **overall** | " + " | ".join(_share(*scores[m].total()) for m in MODES) + " |")
    return rows


def cause_rows(scores: dict[str, Score]) -> list[str]:
    """Markdown rows: misses by cause in each way of reading, and the unaccounted values."""
    rows = ["| | " + " | ".join(MODES) + " |", "| --- |" + " ---: |" * len(MODES)]
    for name in CAUSES:
        counts = [sum(c == name for _, _, c in scores[m].misses) for m in MODES]
        rows.append(f"| {name} | " + " | ".join(map(str, counts)) + " |")
    extra = [str(sum(sum(c.values()) for c in scores[m].unaccounted.values())) for m in MODES]
    rows.append(
        "| unaccounted values (false positives or left out on purpose) | - | "
        + " | ".join(extra[1:])
        + " |"
    )
    return rows


def miss_lines(score_: Score) -> list[str]:
    """One line per cause and log: the lines and names of its misses."""
    grouped: dict[tuple[str, str], list[str]] = defaultdict(list)
    for key, read, why in score_.misses:
        grouped[(why, key)].append(f"{read.line} `{read.name}`")
    return [
        f"- {why}: `{key}` line {', '.join(items)}"
        for (why, key), items in sorted(grouped.items(), key=lambda i: CAUSES.index(i[0][0]))
    ]


def top_unaccounted(score_: Score, count: int = 12) -> str:
    """The most frequent unaccounted names, with their family."""
    names: Counter[str] = Counter()
    for family, counter in score_.unaccounted.items():
        for name, n in counter.items():
            names[f"`{name}` ({family})"] += n
    return ", ".join(f"{name} {n}" for name, n in names.most_common(count))


def report(scores: dict[str, Score]) -> list[str]:
    """The whole section body, as printed and as written to RESULTS.md."""
    lines = [*recall_rows(scores), "", "Misses by cause:", "", *cause_rows(scores), ""]
    shown: list[str] = []
    for mode in MODES[1:]:
        misses = miss_lines(scores[mode])
        extra = top_unaccounted(scores[mode])
        if misses == shown and extra == top_unaccounted(scores[MODES[1]]):
            lines += [f"Misses and unaccounted values, {mode}: the same as {MODES[1]}.", ""]
            continue
        lines += [
            f"Misses, {mode}:",
            "",
            *misses,
            "",
            f"Most frequent unaccounted values, {mode}: {extra}.",
            "",
        ]
        shown = misses
    return lines


def write_results(body: list[str]) -> None:
    """Replace (or add at the end) this benchmark's section of RESULTS.md."""
    block = (
        "\n".join(
            [
                SECTION,
                "",
                "`python benchmarks/bench_generalization.py --write-results`, "
                f"{time.strftime('%Y-%m-%d')} (in-process `parse_file`, detection included; "
                "what each "
                "column means: the script's docstring). Found / read by eye per tests/data/logs "
                "folder, `HAND_READ` and `UNSEEN` values only.",
                "",
                *body,
            ]
        )
        + "\n"
    )
    replace_section(SECTION, block)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--write-results", action="store_true", help="write the tables into benchmarks/RESULTS.md"
    )
    args = parser.parse_args()
    body = report(measure())
    print("\n".join(body))
    if args.write_results:
        write_results(body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
