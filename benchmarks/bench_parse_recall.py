"""Parse recall: the share of values read off the real logs by eye that `gpuherd parse` finds.

Usage: python benchmarks/bench_parse_recall.py [--write-results]

For every log in tests/data/logs, `gpuherd parse --json FILE` runs as a subprocess, the way a
user runs it (detection included: no `--format`). Each value of the log's row in `HAND_READ`
(tests/unit/test_parsers_hand_read.py: line, metric name, value, and the step or epoch where
the line says so, validation side included) counts as found when a record of that line
carries that metric with that value (relative 1e-9; NaN matches NaN) and the same step and
epoch where the reading names them. Findings are not counted here: the hand-read test pins
them exactly.

It prints recall per format and overall (goal: >= 95 % overall, no format below 85 %) and,
with `--write-results`, puts the table into the "Parse recall" section of RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.unit.test_parsers_hand_read import HAND_READ, Read  # noqa: E402

DATA = ROOT / "tests" / "data" / "logs"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SECTION = "## Parse recall"
GOAL_OVERALL, GOAL_FORMAT = 0.95, 0.85


def run_parse(path: Path) -> list[dict[str, Any]]:
    """The metric records `gpuherd parse --json` prints for one file (findings left out)."""
    done = subprocess.run(
        [sys.executable, "-m", "gpuherd", "parse", "--json", str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    records = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    return [r for r in records if "metric" in r]


def _number(value: float | int | str) -> float:
    return float(value)  # "nan", "inf" and "-inf" as strict JSON spells them, or a number


def same_value(got: float, expected: float) -> bool:
    """Equal within a relative 1e-9, NaN equal to NaN, an infinity to itself."""
    if math.isnan(expected):
        return math.isnan(got)
    if math.isinf(expected) or math.isinf(got):
        return got == expected
    return abs(got - expected) <= 1e-9 * max(abs(expected), abs(got), 1e-300)


def found(read: Read, records: Iterable[dict[str, Any]]) -> bool:
    """Whether some record is the reading: its line, name, value, and step/epoch if named."""
    for record in records:
        if record["line"] != read.line or record["metric"] != read.name:
            continue
        if not same_value(_number(record["value"]), read.value):
            continue
        if read.step is not None and record.get("step") != read.step:
            continue
        if read.epoch is not None and (
            "epoch" not in record or not same_value(_number(record["epoch"]), read.epoch)
        ):
            continue
        return True
    return False


def recall(reads: Sequence[Read], records: Sequence[dict[str, Any]]) -> tuple[int, int]:
    """(found, expected) over the readings of one log."""
    return sum(found(read, records) for read in reads), len(reads)


def measure() -> tuple[dict[str, list[int]], list[tuple[str, Read]]]:
    """Found and expected per format, and every reading not found."""
    per_format: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    missed: list[tuple[str, Read]] = []
    for key, log in sorted(HAND_READ.items()):
        if not log.values:
            continue  # a failure log: findings only
        records = run_parse(DATA / key)
        name = log.format or key.split("/", 1)[0]
        for read in log.values:
            hit = found(read, records)
            per_format[name][0] += hit
            per_format[name][1] += 1
            if not hit:
                missed.append((key, read))
    return dict(per_format), missed


def table(per_format: dict[str, list[int]]) -> list[str]:
    """Markdown rows: format, found / expected, recall; the overall row last."""
    rows = ["| format | found / read by eye | recall |", "| --- | ---: | ---: |"]
    for name, (hit, total) in sorted(per_format.items()):
        rows.append(f"| `{name}` | {hit} / {total} | {100 * hit / total:.1f} % |")
    hit = sum(h for h, _ in per_format.values())
    total = sum(t for _, t in per_format.values())
    rows.append(f"| **overall** | {hit} / {total} | {100 * hit / total:.1f} % |")
    return rows


def write_results(rows: list[str], missed: list[tuple[str, Read]]) -> None:
    """Replace (or add) the "Parse recall" section of RESULTS.md."""
    body = [
        SECTION,
        "",
        "`python benchmarks/bench_parse_recall.py --write-results`: every `HAND_READ` value "
        "(tests/unit/test_parsers_hand_read.py) looked up in `gpuherd parse --json FILE` "
        "output, detection included. Goal: >= 95 % overall, no format below 85 %.",
        "",
        *rows,
        "",
    ]
    if missed:
        body += ["Not found:", ""]
        body += [
            f"- `{key}` line {read.line}: `{read.name}` = {read.value}" for key, read in missed
        ]
        body.append("")
    replace_section(SECTION, "\n".join(body) + "\n")


def replace_section(section: str, block: str) -> None:
    """Put `block` in place of RESULTS.md's `section` (up to the next `## `), or at its end."""
    text = RESULTS.read_text()
    start = text.find(section + "\n")
    if start < 0:
        RESULTS.write_text(text.rstrip("\n") + "\n\n" + block)
        return
    end = text.find("\n## ", start + len(section))
    RESULTS.write_text(text[:start] + block + (text[end + 1 :] if end >= 0 else ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--write-results", action="store_true", help="write the table into benchmarks/RESULTS.md"
    )
    args = parser.parse_args()
    per_format, missed = measure()
    rows = table(per_format)
    print("\n".join(rows))
    for key, read in missed:
        print(f"missed: {key} line {read.line}: {read.name} = {read.value}")
    if args.write_results:
        write_results(rows, missed)
    hit = sum(h for h, _ in per_format.values())
    total = sum(t for _, t in per_format.values())
    worst = min(h / t for h, t in per_format.values())
    return 0 if hit / total >= GOAL_OVERALL and worst >= GOAL_FORMAT else 1


if __name__ == "__main__":
    sys.exit(main())
