"""`gpuherd [monitor] [--interval S] [--log PATH ...] [--watch DIR ...]`: the live dashboard."""

from __future__ import annotations

import argparse

from gpuherd.argcheck import check_interval
from gpuherd.commands.flags import (
    add_interval,
    add_logs,
    add_serve_metrics,
    first_problem,
    metrics_problem,
)

HELP = "the live dashboard of this machine (the default command)"
EPILOG = ("`gpuherd` alone runs this command. Without an NVIDIA driver the dashboard still "
          "shows the host; `gpuherd demo` replays a recorded session instead. To record while "
          "watching, use `gpuherd record --tui DIR`.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The dashboard's flags."""
    add_interval(parser)
    add_logs(parser)
    add_serve_metrics(parser)


def check(args: argparse.Namespace) -> str | None:
    """What is wrong with the values, if anything."""
    return (metrics_problem(args, args.serve_metrics)
            or first_problem((check_interval, args.interval)))


def run(args: argparse.Namespace) -> int:
    """Show the dashboard until `q`."""
    from gpuherd import monitor

    return monitor.run(args)
