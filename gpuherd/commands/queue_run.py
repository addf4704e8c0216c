"""`gpuherd queue run`: the headless queue runner's flags (the `queue` command routes here)."""

from __future__ import annotations

import argparse

from gpuherd.common.argcheck import check_interval, finite_float
from gpuherd.common.queue_defaults import GRACE_S, MARGIN_TEXT, SETTLE_S

RUN_HELP = "run the queue: launch waiting jobs when their GPUs have room (headless)"
RUN_EPILOG = """\
One runner per user: a second `queue run` with the same state directory refuses (exit 2).
Ctrl-C, SIGTERM or a closed terminal stop the runner; jobs it started keep running, and the
next runner adopts them. Run it in tmux, under nohup, or as a systemd user service
(docs/queue.md, "Running the queue").
State: $GPUHERD_STATE_DIR (else $XDG_STATE_HOME/gpuherd, else ~/.local/state/gpuherd).
Ledger shared by every user: $GPUHERD_LEDGER_DIR (else /tmp/gpuherd-ledger)."""


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The runner's flags."""
    parser.add_argument(
        "--settle",
        type=finite_float,
        default=SETTLE_S,
        metavar="S",
        help=f"seconds a GPU must keep room for a job before it starts (default {SETTLE_S:g})",
    )
    parser.add_argument(
        "--margin",
        default=MARGIN_TEXT,
        metavar="SIZE",
        help=f"memory kept free on top of each job's need (default {MARGIN_TEXT})",
    )
    parser.add_argument(
        "--grace",
        type=finite_float,
        default=GRACE_S,
        metavar="S",
        help="seconds a started job's reservation is held at most while it has "
        f"not allocated its need yet (default {GRACE_S:g})",
    )
    parser.add_argument(
        "--interval",
        type=finite_float,
        default=1.0,
        metavar="S",
        help="seconds between GPU readings (default 1, at least 0.05)",
    )


def check_run(args: argparse.Namespace) -> str | None:
    """What is wrong with the runner's values, if anything."""
    from gpuherd.queue.ledger_files import MAX_GRACE_S
    from gpuherd.queue.sizes import parse_size

    try:
        check_interval(args.interval)
        args.margin_bytes = parse_size(args.margin)
    except ValueError as error:
        return f"--margin: {error}" if "interval" not in str(error) else str(error)
    if not args.settle >= 0:
        return "--settle must be 0 or more seconds"
    if not args.grace > 0:
        return "--grace must be more than 0 seconds"
    if args.grace > MAX_GRACE_S:
        # The ledger does not trust an entry that says it counts longer than this.
        return f"--grace must be at most {MAX_GRACE_S:g} seconds"
    return None


def run_queue_run(args: argparse.Namespace) -> int:
    """Run the queue until stopped; 2 when another runner holds the state directory."""
    from gpuherd.queue.ledger import default_ledger_dir
    from gpuherd.queue.runner import run_headless
    from gpuherd.queue.store import default_state_dir

    return run_headless(
        default_state_dir(),
        default_ledger_dir(),
        settle_s=args.settle,
        margin_bytes=args.margin_bytes,
        grace_s=args.grace,
        interval_s=args.interval,
    )
