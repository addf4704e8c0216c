"""The dashboard's UI-thread CPU by function: run it under cProfile for a while, then report.

cProfile here counts the CPU time of the thread it runs on (`time.thread_time`), Textual's
event loop, so the collectors' threads and the time spent waiting are left out. The dashboard
quits by itself after `--seconds`; run it in a real terminal (a tmux pane of 160x50, as
`bench_tui_cpu.py` does), with `-P` so that the tree on `PYTHONPATH` is the one imported:

    tmux new-session -d -x 160 -y 50 "env PYTHONPATH=<tree> python -P \\
        benchmarks/profile_dashboard.py --seconds 34 --out t.prof -- \\
        --replay tests/data/sessions/e2e --speed 1"
    python benchmarks/profile_dashboard.py --report t.prof

The report gives the UI thread's CPU and the process table's share of it: its drawing
(`render_lines`, a `DataTable`'s or its own) and its update (`watch_rows_shown`). cProfile
slows Python code down unevenly, so the shares compare trees; they are not timings.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import runpy
import sys
import time


def profile(seconds: float, out: str, args: list[str]) -> None:
    """Run `gpuherd ARGS` for `seconds` under cProfile and write the stats to `out`."""
    import tui.app

    mount = tui.app.GpuherdApp.on_mount

    def on_mount(self: tui.app.GpuherdApp) -> None:
        mount(self)
        self.set_timer(seconds, self.exit)

    tui.app.GpuherdApp.on_mount = on_mount  # type: ignore[method-assign]
    sys.argv = ["gpuherd", *args]
    profiler = cProfile.Profile(time.thread_time)
    profiler.enable()
    try:
        runpy.run_module("gpuherd", run_name="__main__", alter_sys=True)
    except SystemExit:
        pass
    profiler.disable()
    profiler.dump_stats(out)


def report(path: str) -> str:
    """The UI thread's CPU in `path` and the process table's share of it."""
    stats = pstats.Stats(path).stats  # type: ignore[attr-defined]
    total = sum(entry[2] for entry in stats.values())

    def cumulative(suffix: str, name: str) -> float:
        return sum(v[3] for (f, _, n), v in stats.items() if f.endswith(suffix) and n == name)

    # A DataTable's drawing is DataTable.render_lines (only the process table is a DataTable on
    # the screen of a session without tasks, containers or a queue); the line-API table's is
    # its own render_lines.
    table = (
        cumulative("widgets/_data_table.py", "render_lines")
        + cumulative("widgets/process_table.py", "render_lines")
        + cumulative("widgets/process_table.py", "watch_rows_shown")
    )
    return (
        f"{path}: UI thread {total:.3f} s of CPU; "
        f"process table {table:.3f} s ({100 * table / total:.1f} %)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=34.0)
    parser.add_argument("--out", help="write the profile here (runs the dashboard)")
    parser.add_argument("--report", nargs="+", help="report these profiles")
    parser.add_argument("args", nargs="*", help="the dashboard's arguments, after --")
    options = parser.parse_args()
    if options.report:
        for path in options.report:
            print(report(path))
    elif options.out:
        profile(options.seconds, options.out, options.args)
    else:
        parser.error("--out or --report")


if __name__ == "__main__":
    main()
