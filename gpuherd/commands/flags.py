"""Flags that more than one subcommand takes, defined once so their help reads the same."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from typing import NoReturn

from gpuherd.common.argcheck import finite_float
from gpuherd.export.address import parse_listen  # standard library only


def add_logs(parser: argparse.ArgumentParser) -> None:
    """`--log PATH` and `--watch DIR` (both repeatable)."""
    parser.add_argument(
        "--log",
        action="append",
        default=[],
        metavar="PATH",
        help="follow a training log (repeatable, globs allowed, the file may not exist yet)",
    )
    parser.add_argument(
        "--watch",
        action="append",
        default=[],
        metavar="DIR",
        help="discover training logs under DIR (repeatable)",
    )


def add_interval(parser: argparse.ArgumentParser) -> None:
    """`--interval S`: seconds between full samples."""
    parser.add_argument(
        "--interval",
        type=finite_float,
        default=1.0,
        metavar="S",
        help="seconds between samples (default 1, at least 0.05)",
    )


def add_speed(parser: argparse.ArgumentParser) -> None:
    """`--speed N`: the replay speed factor."""
    parser.add_argument(
        "--speed",
        type=finite_float,
        default=1.0,
        metavar="N",
        help="replay speed factor (default 1; 10 plays ten times faster)",
    )


def watch_problem(args: argparse.Namespace) -> str | None:
    """A `--watch` that names a file: it would be scanned for ever and never followed."""
    for directory in getattr(args, "watch", None) or []:
        if os.path.exists(directory) and not os.path.isdir(directory):
            return (
                f"--watch {directory}: a file, not a directory (follow a file with "
                f"--log {directory})"
            )
    return None


def watch_notes(args: argparse.Namespace) -> list[str]:
    """What a person should hear about `--watch` directories that are not there (yet).

    Not an error: a run may create its log directory after gpuherd starts, and the scan finds
    it then; but a typo must not pass without a word.
    """
    return [
        f"--watch {directory}: no such directory yet; logs are found in it once it appears"
        for directory in getattr(args, "watch", None) or []
        if not os.path.exists(directory)
    ]


def first_problem(*checks: tuple[Callable[[float], float], float]) -> str | None:
    """The message of the first failing `(check, value)` pair (argcheck functions), or `None`."""
    for check, value in checks:
        try:
            check(value)
        except ValueError as error:
            return str(error)
    return None


def add_serve_metrics(parser: argparse.ArgumentParser) -> None:
    """`--serve-metrics [HOST:]PORT` and its TLS pair (docs/fleet.md)."""
    parser.add_argument(
        "--serve-metrics",
        metavar="[HOST:]PORT",
        help="also export Prometheus metrics at http://HOST:PORT/metrics "
        "(HOST defaults to 127.0.0.1; docs/fleet.md)",
    )
    add_metrics_tls(parser)


def add_metrics_tls(parser: argparse.ArgumentParser) -> None:
    """`--metrics-cert PEM` and `--metrics-key PEM`: serve the metrics over HTTPS."""
    parser.add_argument(
        "--metrics-cert",
        metavar="PEM",
        help="serve the metrics over HTTPS with this certificate (with --metrics-key)",
    )
    parser.add_argument("--metrics-key", metavar="PEM", help="the private key of --metrics-cert")


def metrics_problem(args: argparse.Namespace, listen: str | None) -> str | None:
    """What is wrong with `--serve-metrics` (given as `listen`) and its TLS flags, if anything."""
    cert, key = args.metrics_cert, args.metrics_key
    if (cert is None) != (key is None):
        return "give --metrics-cert and --metrics-key together"
    if listen is None:
        return "--metrics-cert needs --serve-metrics" if cert is not None else None
    try:
        parse_listen(listen)
    except ValueError as error:
        return str(error)
    return None


def usage_with_command(parser: argparse.ArgumentParser) -> None:
    """End `parser`'s usage line with `[-- CMD ARGS...]` (call it once its flags are added).

    argparse cannot show what follows a bare `--`: the router takes it off before parsing
    (`gpuherd.cli.parse_args`), so without this the usage line never says a command goes there.
    """
    usage = parser.format_usage().removeprefix("usage: ").rstrip("\n")
    parser.usage = usage.replace("%", "%%") + " [-- CMD ARGS...]"


_EXPECTED_ONE = re.compile(r"^argument ([^:]+): expected one argument$")


class OneLineParser(argparse.ArgumentParser):
    """A parser whose usage errors are one line of what is wrong, then where help is.

    argparse prints the whole usage (four or five lines for `record`) before the line that
    matters; here that line comes alone, and `see gpuherd CMD --help` after it.
    """

    def error(self, message: str) -> NoReturn:
        """Print `PROG: error: MESSAGE` and the help hint on stderr; exit with status 2."""
        expected = _EXPECTED_ONE.match(message)
        if expected is not None:  # `--vram -5GiB`: argparse takes `-5GiB` for a flag
            flag = expected[1].split("/")[-1]
            message += f" (give one; a value that starts with `-` is written {flag}=VALUE)"
        self.exit(2, f"{self.prog}: error: {message}\nsee `{self.prog} --help`\n")


def deepest_parser(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> argparse.ArgumentParser:
    """The parser of the innermost subcommand `args` chose (`queue add`, not `queue`)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            chosen = action.choices.get(getattr(args, action.dest, None) or "")
            if chosen is not None:
                return deepest_parser(chosen, args)
    return parser
