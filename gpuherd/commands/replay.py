"""`gpuherd replay DIR [--speed N]`: the dashboard driven by a recorded session directory."""

from __future__ import annotations

import argparse

from gpuherd.commands.flags import add_serve_metrics, add_speed, first_problem, metrics_problem
from gpuherd.common.argcheck import check_speed
from gpuherd.common.options import MonitorOptions, from_namespace

HELP = "drive the dashboard from a recorded session directory"
EPILOG = (
    "DIR is a session directory written by `gpuherd record` (docs/session-format.md); it "
    "is checked before the dashboard starts. Tasks come from its metrics.csv and "
    "events.jsonl. `gpuherd --replay DIR` is the same command."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The replay's flags."""
    parser.add_argument("replay", metavar="DIR", help="the session directory to replay")
    add_speed(parser)
    add_serve_metrics(parser)


def check(args: argparse.Namespace) -> str | None:
    """What is wrong with the values, if anything."""
    return metrics_problem(args, args.serve_metrics) or first_problem((check_speed, args.speed))


def options(args: argparse.Namespace) -> MonitorOptions:
    """The typed options this command hands the engine."""
    return from_namespace(MonitorOptions, args)


def run(args: argparse.Namespace) -> int:
    """Replay DIR once on the dashboard."""
    from gpuherd.dashboard import monitor

    return monitor.run(options(args))
