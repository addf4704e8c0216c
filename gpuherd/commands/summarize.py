"""`gpuherd summarize DIR [--json | --md]`: the run summary of a session directory."""

from __future__ import annotations

import argparse

from gpuherd.common.options import SummarizeOptions, from_namespace

HELP = "summarize a recorded session directory"
EPILOG = (
    "DIR is a session directory written by `gpuherd record`; summary.json and summary.md "
    "are (re)written into it when it can be written to."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The summary's flags."""
    parser.add_argument("session_dir", metavar="DIR", help="the session directory")
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="print summary.json")
    form.add_argument("--md", action="store_true", help="print summary.md")


def options(args: argparse.Namespace) -> SummarizeOptions:
    """The typed options this command hands the engine."""
    return from_namespace(SummarizeOptions, args)


def run(args: argparse.Namespace) -> int:
    """Summarize DIR."""
    from gpuherd.summary import summarize_command

    return summarize_command.run(options(args))
