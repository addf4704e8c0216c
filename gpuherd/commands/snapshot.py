"""`gpuherd snapshot [--json]`: one sample of every GPU and the host, printed once."""

from __future__ import annotations

import argparse

from gpuherd.common.options import SnapshotOptions, from_namespace

HELP = "print one sample of everything and exit"
EPILOG = (
    "Exit status 0 when every GPU was read, 1 when a GPU could not be read, 3 without an "
    "NVIDIA driver or GPU (the host part is still printed). The JSON layout is in "
    "docs/snapshot-json.md."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The snapshot's flags."""
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def options(args: argparse.Namespace) -> SnapshotOptions:
    """The typed options this command hands the engine."""
    return from_namespace(SnapshotOptions, args)


def run(args: argparse.Namespace) -> int:
    """Take and print the snapshot."""
    from gpuherd.snapshot import snapshot

    return snapshot.run(options(args))
