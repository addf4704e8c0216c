"""`gpuherd demo [--speed N]`: replay the bundled session recorded on a real GPU."""

from __future__ import annotations

import argparse

from gpuherd.argcheck import check_speed
from gpuherd.commands.flags import add_speed, first_problem
from gpuherd.options import MonitorOptions, from_namespace

HELP = "replay the bundled session recorded on a real GPU, in a loop"
EPILOG = "`gpuherd --demo` is the same command."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The demo's flags."""
    add_speed(parser)
    parser.set_defaults(demo=True)


def check(args: argparse.Namespace) -> str | None:
    """What is wrong with the values, if anything."""
    return first_problem((check_speed, args.speed))


def options(args: argparse.Namespace) -> MonitorOptions:
    """The typed options this command hands the engine."""
    return from_namespace(MonitorOptions, args)


def run(args: argparse.Namespace) -> int:
    """Replay the demo session until `q`."""
    from gpuherd import monitor

    return monitor.run(options(args))
