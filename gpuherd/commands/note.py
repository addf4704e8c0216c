"""`gpuherd note DIR --example PATH [--dry-run]`: write the verification note of a run."""

from __future__ import annotations

import argparse

from gpuherd.common.options import NoteOptions, from_namespace

HELP = "write the verification note of a recorded run into an example.yaml"
EPILOG = (
    "DIR is a session directory written by `gpuherd record`; PATH is the example.yaml "
    "whose `verification:` mapping gets the note (docs/recording.md)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The note's flags."""
    parser.add_argument("session_dir", metavar="DIR", help="the session directory")
    parser.add_argument("--example", required=True, metavar="PATH", help="the example.yaml")
    parser.add_argument("--dry-run", action="store_true", help="print the diff, change nothing")


def options(args: argparse.Namespace) -> NoteOptions:
    """The typed options this command hands the engine."""
    return from_namespace(NoteOptions, args)


def run(args: argparse.Namespace) -> int:
    """Write (or show) the note."""
    from gpuherd.note import note_command

    return note_command.run(options(args))
