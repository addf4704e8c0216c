"""`gpuherd queue SUBCOMMAND`: the GPU-headroom job queue (only `run` in this stand-in)."""

from __future__ import annotations

import argparse

from gpuherd.commands import queue_run

HELP = "the GPU-headroom job queue: add jobs, list them, run the queue"
EPILOG = "docs/queue.md describes the queue."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """One sub-subcommand parser per queue action."""
    sub = parser.add_subparsers(dest="queue_command", metavar="ACTION", required=True)
    run_parser = sub.add_parser("run", help=queue_run.RUN_HELP, description=queue_run.RUN_HELP,
                                epilog=queue_run.RUN_EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    queue_run.add_run_arguments(run_parser)


def check(args: argparse.Namespace) -> str | None:
    """The chosen action's value check."""
    return queue_run.check_run(args) if args.queue_command == "run" else None


def run(args: argparse.Namespace) -> int:
    """Dispatch to the action."""
    return queue_run.run_queue_run(args)
