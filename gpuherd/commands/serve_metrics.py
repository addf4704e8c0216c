"""`gpuherd serve-metrics [HOST:]PORT [--replay DIR]`: the Prometheus exporter alone, headless."""

from __future__ import annotations

import argparse

from gpuherd.commands.flags import (
    add_interval,
    add_logs,
    add_metrics_tls,
    add_speed,
    first_problem,
    metrics_problem,
)
from gpuherd.common.argcheck import check_interval, check_speed
from gpuherd.common.options import ServeMetricsOptions, from_namespace

HELP = "export this machine (or a recorded session) as Prometheus metrics, headless"
EPILOG = """\
[HOST:]PORT is where to listen: 9400 is 127.0.0.1:9400 (this machine only; reach it over an
SSH tunnel), 0.0.0.0:9400 every interface, [::1]:9400 IPv6. Only GET /metrics is answered.
With --replay DIR the metrics come from a recorded session at its recorded pace (--speed),
and the last values stay served after its end; without it, this user's job queue is served
too. Runs until Ctrl-C or SIGTERM.
The dashboard, `replay` and `record` take --serve-metrics [HOST:]PORT to export beside what
they do. Metric names, a scrape config and a Grafana dashboard: docs/fleet.md."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The exporter's flags."""
    parser.add_argument("listen", metavar="[HOST:]PORT", help="where to serve /metrics")
    parser.add_argument(
        "--replay",
        metavar="DIR",
        help="export a recorded session directory instead of this machine",
    )
    add_speed(parser)
    add_interval(parser)
    add_logs(parser)
    add_metrics_tls(parser)


def check(args: argparse.Namespace) -> str | None:
    """What is wrong with the values, if anything."""
    if args.replay is not None and (args.log or args.watch):
        return "--replay exports a recorded session; --log and --watch follow this machine"
    return metrics_problem(args, args.listen) or first_problem(
        (check_interval, args.interval), (check_speed, args.speed)
    )


def options(args: argparse.Namespace) -> ServeMetricsOptions:
    """The typed options this command hands the engine."""
    return from_namespace(ServeMetricsOptions, args)


def run(args: argparse.Namespace) -> int:
    """Serve until stopped."""
    from gpuherd.export import headless

    return headless.run(options(args))
