"""The process table's own cost per redraw: applying new rows and drawing the lines they change.

The table is mounted alone in a headless app (160x60, so 50 rows fit), as tall as its rows as
in the dashboard, and given `--rows` rows; each frame then changes the rows and lets Textual
draw the screen. Two cases: `one` changes the CPU % of one row (the second when there are two
or more), `all` changes every row's CPU % and elapsed time (a busy box between two redraws, as
the dashboard's every 2 s). Timed in the process: the `rows_shown` watcher (the update) and
the table's `render_lines` (the drawing Textual asks for), per frame, after `--warmup` frames.

It imports the table from the tree on `PYTHONPATH`, so one script measures any tree:

    PYTHONPATH=<tree> python benchmarks/bench_process_table.py --rows 1 50 --frames 200

Prints one JSON line per (rows, case), then a table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from typing import Any

from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.strip import Strip

import tui.widgets.process_table as module
from tui.processes import ProcessRow
from tui.widgets.process_table import ProcessTable

GiB = 1 << 30


class TimedTable(ProcessTable):
    """The real table, adding up the time spent in its update and its drawing."""

    update_s = 0.0
    draw_s = 0.0
    lines = 0

    def watch_rows_shown(self, rows: tuple[ProcessRow, ...]) -> None:
        start = time.perf_counter()
        super().watch_rows_shown(rows)
        self.update_s += time.perf_counter() - start

    def render_lines(self, crop: Region) -> list[Strip]:
        start = time.perf_counter()
        strips = super().render_lines(crop)
        self.draw_s += time.perf_counter() - start
        return strips

    def render_line(self, y: int) -> Strip:
        self.lines += 1
        return super().render_line(y)


class TableApp(App[None]):
    CSS = "TimedTable { height: auto; max-height: 100%; }"  # as in the dashboard (app.tcss)

    def compose(self) -> ComposeResult:
        yield TimedTable()


def rows(count: int, frame: int, case: str) -> tuple[ProcessRow, ...]:
    changed = 1 if count > 1 else 0
    out = []
    for i in range(count):
        moving = case == "all" or i == changed
        out.append(
            ProcessRow(
                f"GPU-{i % 8}/{1000 + i}",
                i % 8,
                f"GPU-{i % 8}",
                1000 + i,
                (40 - i % 40) * GiB,
                user=f"user{i % 5}",
                cpu_pct=float(50 + frame % 40) if moving else 12.0,
                rss_bytes=3 * GiB,
                elapsed_s=3600.0 + (frame if moving else 0),
                command=f"python train.py --config run{i}.yaml --seed {i}",
                container="trainer" if i % 3 == 0 else None,
                task=f"run{i}/train.log" if i % 4 == 0 else None,
            )
        )
    return tuple(out)


async def measure(count: int, case: str, frames: int, warmup: int) -> dict[str, Any]:
    app = TableApp()
    async with app.run_test(size=(160, 60)) as pilot:
        table = app.query_one(TimedTable)
        table.focus()
        per_frame: list[tuple[float, float, int]] = []
        for frame in range(warmup + frames):
            table.update_s = table.draw_s = 0.0
            table.lines = 0
            table.rows_shown = rows(count, frame, case)
            await pilot.pause()
            if frame >= warmup:
                per_frame.append((table.update_s, table.draw_s, table.lines))
    update = statistics.median(u for u, _, _ in per_frame) * 1e6
    draw = statistics.median(d for _, d, _ in per_frame) * 1e6
    total = statistics.median(u + d for u, d, _ in per_frame) * 1e6
    return {
        "tree": module.__file__,
        "rows": count,
        "case": case,
        "frames": frames,
        "update_us": round(update, 1),
        "draw_us": round(draw, 1),
        "total_us": round(total, 1),
        "lines_drawn": statistics.median(n for _, _, n in per_frame),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 50])
    parser.add_argument("--cases", nargs="+", default=["one", "all"], choices=["one", "all"])
    parser.add_argument("--frames", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args()
    results = []
    for count in args.rows:
        for case in args.cases:
            result = asyncio.run(measure(count, case, args.frames, args.warmup))
            print(json.dumps(result), flush=True)
            results.append(result)
    header = ("rows", "case", "update us", "draw us", "total us", "lines")
    print("\n{:>4} {:>4} {:>10} {:>9} {:>9} {:>5}".format(*header))
    for r in results:
        print(
            f"{r['rows']:>4} {r['case']:>4} {r['update_us']:>10} {r['draw_us']:>9} "
            f"{r['total_us']:>9} {r['lines_drawn']:>5}"
        )


if __name__ == "__main__":
    main()
