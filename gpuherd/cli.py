"""The `gpuherd` command line: argument parsing and dispatch.

Each command lives in its own module, imported only when that command runs, so headless commands
(`snapshot`, `parse`, `--record`, `summarize`, `note`) never import Textual.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from gpuherd import __version__
from gpuherd.argcheck import (
    check_interval,
    check_peak_interval,
    check_speed,
    finite_float,
    parse_duration,
)

# command name -> module whose `run(args) -> int` carries it out
COMMANDS = {
    "monitor": "gpuherd.monitor",
    "record": "gpuherd.record.command",
    "snapshot": "gpuherd.snapshot",
    "parse": "gpuherd.parse_command",
    "summarize": "gpuherd.summary.summarize_command",
    "note": "gpuherd.note.note_command",
}


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser; subcommands are optional, the monitor is the default."""
    parser = argparse.ArgumentParser(
        prog="gpuherd",
        description="Terminal monitor for shared GPU hosts.",
        epilog="Run `gpuherd --demo` to see it on a machine without an NVIDIA GPU.",
    )
    parser.add_argument("--version", action="version", version=f"gpuherd {__version__}")
    _add_monitor_arguments(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    snap = sub.add_parser("snapshot", help="print one sample of everything and exit")
    snap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parse = sub.add_parser("parse", help="print the metrics and findings found in log files")
    parse.add_argument("files", nargs="+", metavar="FILE")
    parse.add_argument("--format", dest="log_format", default=None, help="force a log format")
    parse.add_argument("--json", action="store_true", help="one JSON object per line")
    summ = sub.add_parser("summarize", help="summarize a recorded session directory")
    summ.add_argument("session_dir", metavar="DIR")
    fmt = summ.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print summary.json")
    fmt.add_argument("--md", action="store_true", help="print summary.md")
    note = sub.add_parser("note", help="write the verification note into an example.yaml")
    note.add_argument("session_dir", metavar="DIR")
    note.add_argument("--example", required=True, metavar="PATH", help="the example.yaml")
    note.add_argument("--dry-run", action="store_true", help="print the diff, change nothing")
    return parser


def _add_monitor_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--replay", metavar="DIR", help="replay a recorded session directory")
    source.add_argument("--demo", action="store_true", help="replay the bundled demo session")
    parser.add_argument("--speed", type=finite_float, default=1.0, help="replay speed factor")
    parser.add_argument("--interval", type=finite_float, default=1.0, metavar="S",
                        help="seconds between samples (default 1, at least 0.05)")
    parser.add_argument("--log", action="append", default=[], metavar="PATH",
                        help="follow a training log (repeatable, globs allowed)")
    parser.add_argument("--watch", action="append", default=[], metavar="DIR",
                        help="discover training logs under DIR")
    parser.add_argument("--record", metavar="DIR", help="record a session directory, headless")
    parser.add_argument("--duration", metavar="TIME", help="stop recording after e.g. 90s, 10m, 2h")
    parser.add_argument("--tui", action="store_true", help="with --record: also show the dashboard")
    parser.add_argument("--peak-interval", type=finite_float, default=0.02, metavar="S",
                        help="with --record: seconds between fast memory readings for peaks "
                        "(default 0.02, at least 0.005; 0 turns the fast sampler off)")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse `argv`; everything after a bare `--` is the command to record."""
    argv = list(argv)
    child: list[str] | None = None
    if "--" in argv:
        cut = argv.index("--")
        argv, child = argv[:cut], argv[cut + 1 :]
    parser = build_parser()
    args = parser.parse_args(argv)
    args.child_command = child or []
    if args.command is None:
        args.command = "record" if args.record else "monitor"
    problem = command_problem(args, child) or number_problem(args)
    if problem is not None:
        parser.error(problem)
    return args


def command_problem(args: argparse.Namespace, child: list[str] | None) -> str | None:
    """What is wrong with `--record`, `--duration` and the command after `--`, if anything.

    Each of these once started a recording that never ended (no command, an empty duration,
    a replay that `--record` ignored).
    """
    if child is not None and args.command != "record":
        return "a command after `--` needs --record DIR"
    if child == []:
        return "nothing after `--`: give the command to record (--record DIR -- CMD ARGS...)"
    if args.record and (args.replay or args.demo):
        return "--record records this machine; it cannot be combined with --replay or --demo"
    if args.duration is not None:
        try:
            parse_duration(args.duration)
        except ValueError as error:
            return str(error)
    return None


def number_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with `--speed`, `--interval` and `--peak-interval`, if anything."""
    checks = ((check_speed, args.speed), (check_interval, args.interval),
              (check_peak_interval, args.peak_interval))
    for check, value in checks:
        try:
            check(value)
        except ValueError as error:
            return str(error)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `gpuherd` console script; returns the process exit code."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    module = importlib.import_module(COMMANDS[args.command])
    try:
        return int(module.run(args))
    except KeyboardInterrupt:
        print("gpuherd: interrupted", file=sys.stderr)
        return 130
