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

# command name -> module whose `run(args) -> int` carries it out
COMMANDS = {
    "monitor": "gpuherd.monitor",
    "record": "gpuherd.record.command",
    "snapshot": "gpuherd.snapshot",
    "parse": "gpuherd.parse_command",
    "summarize": "gpuherd.record.summarize_command",
    "note": "gpuherd.record.note_command",
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
    parser.add_argument("--speed", type=float, default=1.0, help="replay speed factor")
    parser.add_argument("--interval", type=float, default=1.0, metavar="S",
                        help="seconds between samples (default 1)")
    parser.add_argument("--log", action="append", default=[], metavar="PATH",
                        help="follow a training log (repeatable, globs allowed)")
    parser.add_argument("--watch", action="append", default=[], metavar="DIR",
                        help="discover training logs under DIR")
    parser.add_argument("--record", metavar="DIR", help="record a session directory, headless")
    parser.add_argument("--duration", metavar="TIME", help="stop recording after e.g. 90s, 10m, 2h")
    parser.add_argument("--tui", action="store_true", help="with --record: also show the dashboard")
    parser.add_argument("--peak-interval", type=float, default=0.02, metavar="S",
                        help="with --record: seconds between fast memory readings for peaks "
                        "(default 0.02; 0 turns the fast sampler off)")


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse `argv`; everything after a bare `--` is the command to record."""
    argv = list(argv)
    child: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, child = argv[:cut], argv[cut + 1 :]
    args = build_parser().parse_args(argv)
    args.child_command = child
    if args.command is None:
        args.command = "record" if args.record else "monitor"
    if child and args.command != "record":
        build_parser().error("a command after `--` needs --record DIR")
    if args.speed <= 0:
        build_parser().error("--speed must be positive")
    if args.interval <= 0:
        build_parser().error("--interval must be positive")
    if args.peak_interval < 0:
        build_parser().error("--peak-interval must be zero or positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `gpuherd` console script; returns the process exit code."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    module = importlib.import_module(COMMANDS[args.command])
    try:
        return int(module.run(args))
    except KeyboardInterrupt:
        print("gpuherd: interrupted", file=sys.stderr)
        return 130
