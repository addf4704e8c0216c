"""`gpuherd [monitor] [--interval S] [--log P ...] [--watch D ...] [--queue]`: the dashboard."""

from __future__ import annotations

import argparse

from gpuherd.commands.flags import (
    add_interval,
    add_logs,
    add_serve_metrics,
    first_problem,
    metrics_problem,
)
from gpuherd.common.argcheck import check_interval, finite_float
from gpuherd.common.options import MonitorOptions, from_namespace
from gpuherd.common.queue_defaults import GRACE_S, MARGIN_TEXT, SETTLE_S

HELP = "the live dashboard of this machine (the default command)"
EPILOG = (
    "`gpuherd` alone runs this command. Without an NVIDIA driver the dashboard still "
    "shows the host; `gpuherd demo` replays a recorded session instead. To record while "
    "watching, use `gpuherd record --tui DIR`. With --queue the dashboard also runs "
    "this user's job queue, as `gpuherd queue run` does (docs/queue.md); q leaves the "
    "dashboard and the jobs keep running."
)
QUEUE_ONLY = ("--settle", "--margin", "--grace")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The dashboard's flags."""
    add_interval(parser)
    add_logs(parser)
    add_serve_metrics(parser)
    parser.add_argument(
        "--queue",
        action="store_true",
        help="also run this user's job queue: launch waiting jobs when their "
        "GPUs have room (one runner per user; docs/queue.md)",
    )
    parser.add_argument(
        "--settle",
        type=finite_float,
        default=None,
        metavar="S",
        help="with --queue: seconds a GPU must keep room before a job starts "
        f"(default {SETTLE_S:g})",
    )
    parser.add_argument(
        "--margin",
        default=None,
        metavar="SIZE",
        help=f"with --queue: memory kept free on top of each job's need (default {MARGIN_TEXT})",
    )
    parser.add_argument(
        "--grace",
        type=finite_float,
        default=None,
        metavar="S",
        help="with --queue: seconds a started job's reservation is held at most "
        f"before it allocates (default {GRACE_S:g})",
    )


def check(args: argparse.Namespace) -> str | None:
    """What is wrong with the values, if anything."""
    return (
        metrics_problem(args, args.serve_metrics)
        or first_problem((check_interval, args.interval))
        or _queue_problem(args)
    )


def _queue_problem(args: argparse.Namespace) -> str | None:
    """The runner's flags: only with --queue, checked as `queue run` checks them."""
    given = [flag for flag in QUEUE_ONLY if getattr(args, flag[2:]) is not None]
    if not args.queue:
        return f"{given[0]} needs --queue" if given else None
    from gpuherd.commands.queue_run import check_run

    runner = argparse.Namespace(
        settle=SETTLE_S if args.settle is None else args.settle,
        margin=MARGIN_TEXT if args.margin is None else args.margin,
        grace=GRACE_S if args.grace is None else args.grace,
        interval=args.interval,
    )
    problem = check_run(runner)
    if problem is None:
        args.settle, args.margin_bytes, args.grace = (
            runner.settle,
            runner.margin_bytes,
            runner.grace,
        )
    return problem


def options(args: argparse.Namespace) -> MonitorOptions:
    """The dashboard's typed options (without --queue, the runner's flags keep defaults)."""
    return from_namespace(
        MonitorOptions,
        args,
        settle=SETTLE_S if args.settle is None else args.settle,
        grace=GRACE_S if args.grace is None else args.grace,
    )


def run(args: argparse.Namespace) -> int:
    """Show the dashboard until `q`."""
    from gpuherd.dashboard import monitor

    return monitor.run(options(args))
