"""`gpuherd record DIR [--duration T] [--tui] [--log ...] [-- CMD ARGS...]`: record a session."""

from __future__ import annotations

import argparse

from gpuherd.commands.flags import (
    add_interval,
    add_logs,
    add_serve_metrics,
    first_problem,
    metrics_problem,
)
from gpuherd.common.argcheck import (
    check_interval,
    check_peak_interval,
    finite_float,
    parse_duration,
)
from gpuherd.common.options import RecordOptions, from_namespace

HELP = "record GPUs, host and training logs into a session directory (headless, or --tui)"
EPILOG = """\
DIR is the session directory to write (created if needed; it must not hold a session already):
CSV files, events.jsonl, meta.json and, at the end, summary.json and summary.md
(docs/session-format.md).

-- CMD ARGS...  run CMD under gpuherd and record it: its output goes to DIR/command.log and the
                terminal, recording stops when it exits, and gpuherd exits with its exit code.
                Without a command, recording runs until --duration, Ctrl-C or (with --tui) q.

`gpuherd --record DIR ...` and `gpuherd --tui --record DIR ...` are the same command.
Example: gpuherd record runs/resnet50 --log 'lightning_logs/*/metrics.csv' -- python train.py"""

ACCEPTS_COMMAND = True
"""Everything after a bare `--` is the command to record (`args.child_command`)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The recorder's flags."""
    parser.add_argument("record", metavar="DIR", help="the session directory to write")
    parser.add_argument(
        "--duration",
        metavar="T",
        help="stop recording after T, e.g. 90s, 10m, 2h, 1h30m (the command "
        "gets SIGTERM, then SIGKILL 10 s later)",
    )
    parser.add_argument(
        "--tui",
        action="store_true",
        help="also show the live dashboard; q leaves it while the recording "
        "goes on to the command's end, k stops the command",
    )
    add_logs(parser)
    add_interval(parser)
    parser.add_argument(
        "--peak-interval",
        type=finite_float,
        default=0.02,
        metavar="S",
        help="seconds between fast memory readings for peaks (default 0.02, at "
        "least 0.005; 0 turns the fast sampler off)",
    )
    add_serve_metrics(parser)


def check(args: argparse.Namespace) -> str | None:
    """What is wrong with the values or the command after `--`, if anything.

    Each of these once started a recording that never ended (no command, an empty duration)
    or busy-looped on a core (an interval of 1e-9).
    """
    if args.child_command == []:
        return "nothing after `--`: give the command to record (--record DIR -- CMD ARGS...)"
    if args.duration is not None:
        try:
            parse_duration(args.duration)
        except ValueError as error:
            return str(error)
    return metrics_problem(args, args.serve_metrics) or first_problem(
        (check_interval, args.interval), (check_peak_interval, args.peak_interval)
    )


def options(args: argparse.Namespace) -> RecordOptions:
    """The typed options this command hands the engine."""
    return from_namespace(RecordOptions, args)


def run(args: argparse.Namespace) -> int:
    """Record headless, or with `--tui` behind the dashboard."""
    recording = options(args)
    if recording.tui:
        from gpuherd.dashboard import monitor_record

        return monitor_record.run(recording)
    from gpuherd.record import command

    return command.run(recording)
