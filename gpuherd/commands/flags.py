"""Flags that more than one subcommand takes, defined once so their help reads the same."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from gpuherd.argcheck import finite_float


def add_logs(parser: argparse.ArgumentParser) -> None:
    """`--log PATH` and `--watch DIR` (both repeatable)."""
    parser.add_argument("--log", action="append", default=[], metavar="PATH",
                        help="follow a training log (repeatable, globs allowed, the file may "
                        "not exist yet)")
    parser.add_argument("--watch", action="append", default=[], metavar="DIR",
                        help="discover training logs under DIR (repeatable)")


def add_interval(parser: argparse.ArgumentParser) -> None:
    """`--interval S`: seconds between full samples."""
    parser.add_argument("--interval", type=finite_float, default=1.0, metavar="S",
                        help="seconds between samples (default 1, at least 0.05)")


def add_speed(parser: argparse.ArgumentParser) -> None:
    """`--speed N`: the replay speed factor."""
    parser.add_argument("--speed", type=finite_float, default=1.0, metavar="N",
                        help="replay speed factor (default 1; 10 plays ten times faster)")


def first_problem(*checks: tuple[Callable[[float], float], float]) -> str | None:
    """The message of the first failing `(check, value)` pair (argcheck functions), or `None`."""
    for check, value in checks:
        try:
            check(value)
        except ValueError as error:
            return str(error)
    return None
