"""`gpuherd queue run`: the headless runner's flags and entry (a stand-in for its own module).

The runner (`gpuherd.queue.runner`) and its flags live apart from the other queue actions;
`gpuherd.commands.queue` reaches them only through the names below.
"""

from __future__ import annotations

import argparse
import importlib
import sys

RUN_HELP = "run the queue: launch waiting jobs when their GPUs have room (headless)"
RUN_EPILOG = "docs/queue.md describes the runner."


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `gpuherd queue run` (none in this stand-in)."""


def check_run(args: argparse.Namespace) -> str | None:
    """What is wrong with the runner's flag values, if anything."""
    return None


def run_queue_run(args: argparse.Namespace) -> int:
    """Run the queue until Ctrl-C or SIGTERM (running jobs go on)."""
    from gpuherd.queue.store import default_state_dir

    try:  # by name: the runner and the ledger are modules of their own
        runner = importlib.import_module("gpuherd.queue.runner")
        ledger = importlib.import_module("gpuherd.queue.ledger")
    except ModuleNotFoundError as error:
        if not (error.name or "").startswith("gpuherd.queue"):
            raise
        print("gpuherd queue run: the runner is not part of this build", file=sys.stderr)
        return 1
    return int(runner.run_headless(default_state_dir(), ledger.default_ledger_dir()))
