"""`gpuherd parse FILE... [--format NAME] [--json]`: metrics and findings in training logs."""

from __future__ import annotations

import argparse

HELP = "print the metrics and health findings found in training-log files"
EPILOG = ("FILE is a training log (plain text, CSV, JSON lines, or a trainer_state.json); its "
          "format is detected from its first lines unless --format names it (docs/parsers.md).")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The parser command's flags."""
    parser.add_argument("files", nargs="+", metavar="FILE", help="the log files to read")
    parser.add_argument("--format", dest="log_format", default=None, metavar="NAME",
                        help="force a log format instead of detecting it")
    parser.add_argument("--json", action="store_true", help="one JSON object per line")


def run(args: argparse.Namespace) -> int:
    """Parse the files."""
    from gpuherd import parse_command

    return parse_command.run(args)
