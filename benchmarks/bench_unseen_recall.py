"""Recall on logs of frameworks without a parser: the generic reader's share of hand-read values.

Usage: python benchmarks/bench_unseen_recall.py [-v]

Every log of `UNSEEN` (tests/unit/hand_read_unseen.py) goes through `gpuherd parse --json`
as a user runs it; a value counts as found as in bench_parse_recall.py (its line, name, value,
and step or epoch where the reading names them). Prints recall on the logs the rules were
developed on and on the held-out (blind) logs, and with `-v` every value not found.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_parse_recall import DATA, found, run_parse  # noqa: E402
from tests.unit.hand_read_unseen import BLIND, UNSEEN  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="list the misses")
    args = parser.parse_args()
    totals = {"developed on": [0, 0], "blind": [0, 0]}
    for key, log in sorted(UNSEEN.items()):
        records = run_parse(DATA / key)
        side = totals["blind" if key in BLIND else "developed on"]
        for read in log.values:
            hit = found(read, records)
            side[0] += hit
            side[1] += 1
            if not hit and args.verbose:
                print(f"missed: {key} line {read.line}: {read.name} = {read.value}")
    for name, (hit, total) in totals.items():
        print(f"{name}: {hit} / {total} ({100 * hit / total:.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
