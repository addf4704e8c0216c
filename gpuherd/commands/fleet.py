"""`gpuherd fleet --prometheus URL`: every host and GPU that Prometheus knows, in one view."""

from __future__ import annotations

import argparse

from gpuherd.common.argcheck import finite_float
from gpuherd.common.options import FleetOptions, from_namespace

HELP = "the fleet view: every host's GPUs as Prometheus sees them, most free memory first"
EPILOG = """\
URL is a Prometheus server scraping `gpuherd serve-metrics` (or `--serve-metrics`) on each host,
or NVIDIA's dcgm-exporter; docs/fleet.md has a scrape config. One row per host and GPU: memory,
utilization, the user holding the most memory, tasks and their health. A host whose newest
sample is older than --stale-after (or whose scrape failed) is marked stale and sorted last; it
never holds the others up. Exit status 2 when Prometheus cannot be reached or has no GPU series."""

MIN_REFRESH_S = 0.2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The fleet view's flags."""
    parser.add_argument(
        "--prometheus",
        required=True,
        metavar="URL",
        help="the Prometheus server, e.g. http://127.0.0.1:9090",
    )
    parser.add_argument(
        "--interval",
        type=finite_float,
        default=2.0,
        metavar="S",
        help="seconds between two refreshes (default 2, at least 0.2)",
    )
    parser.add_argument(
        "--stale-after",
        type=finite_float,
        default=60.0,
        metavar="S",
        help="mark a host stale when its newest sample is older (default 60)",
    )
    parser.add_argument(
        "--forget-after",
        type=finite_float,
        default=3600.0,
        metavar="S",
        help="drop a host silent for longer than this (default 3600)",
    )


def check(args: argparse.Namespace) -> str | None:
    """What is wrong with the values, if anything."""
    from gpuherd.fleet.promql import check_url  # standard library only

    try:
        check_url(args.prometheus)
    except ValueError as error:
        return str(error)
    if not args.interval >= MIN_REFRESH_S:
        return f"--interval must be at least {MIN_REFRESH_S:g} s (got {args.interval:g})"
    if not args.stale_after > 0 or not args.forget_after > 0:
        return "--stale-after and --forget-after must be more than zero"
    return None


def options(args: argparse.Namespace) -> FleetOptions:
    """The typed options this command hands the engine."""
    return from_namespace(FleetOptions, args)


def run(args: argparse.Namespace) -> int:
    """Show the fleet until `q`."""
    from gpuherd.fleet import view

    return view.run(options(args))
