"""The `gpuherd` command line: a table of subcommands, the old spellings, and dispatch.

Each subcommand is one module in `gpuherd.commands` with its own flags (`add_arguments`), an
optional `check(args)` of their values, and `run(args) -> int`. Those modules are light (all of
them are imported to build the parser); the module that does the work is imported inside `run`,
so headless commands never import Textual. A new command is a new module there and a row in
`COMMANDS`.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from gpuherd import __version__, parsers_compiled
from gpuherd.commands import demo, note, parse, queue, record, replay, snapshot, summarize
from gpuherd.commands import fleet as fleet_command
from gpuherd.commands import monitor as monitor_command
from gpuherd.commands import serve_metrics as serve_metrics_command
from gpuherd.commands.flags import (
    OneLineParser,
    deepest_parser,
    usage_with_command,
    watch_notes,
    watch_problem,
)
from gpuherd.common import exit_codes
from gpuherd.present.format import visible

COMMANDS: dict[str, ModuleType] = {
    "monitor": monitor_command,
    "replay": replay,
    "demo": demo,
    "record": record,
    "snapshot": snapshot,
    "parse": parse,
    "summarize": summarize,
    "note": note,
    "queue": queue,
    "serve-metrics": serve_metrics_command,
    "fleet": fleet_command,
}
"""Subcommand name -> the module that owns its flags and runs it."""
DEFAULT_COMMAND = "monitor"
ALIASES = {"--record": "record", "--replay": "replay", "--demo": "demo"}
"""Spellings from before the subcommands: the flag picks the command (the value, if any, is its
DIR). `--tui --record DIR` is `record --tui DIR`."""
_ALIAS_TAKES_VALUE = {"--record", "--replay"}
ROOT_FLAGS = {"-h", "--help", "--version"}
MIXED_MODES = "--record records this machine; it cannot be combined with --replay or --demo"
NO_RECORD = "a command after `--` needs --record DIR"


class UsageError(ValueError):
    """The command line cannot be read; the message is argparse's one line."""


def rewrite_aliases(argv: Sequence[str]) -> list[str]:
    """`argv` with the old spellings turned into subcommands, and `monitor` made explicit.

    Only a command line that does not start with a subcommand is rewritten; the first alias
    flag (`--record DIR`, `--replay DIR`, `--demo`) becomes the subcommand and the other
    arguments follow it, to be checked by that command's parser. Anything after a bare `--`
    is left as it is. Raises `UsageError` when two modes are asked for at once.
    """
    argv = list(argv)
    cut = argv.index("--") if "--" in argv else len(argv)
    head, tail = argv[:cut], argv[cut:]
    if head and (head[0] in COMMANDS or head[0] in ROOT_FLAGS or not head[0].startswith("-")):
        return argv  # a subcommand, the root's own flags, or a misspelt command for argparse
    modes: list[tuple[str, list[str]]] = []
    rest: list[str] = []
    i = 0
    while i < len(head):
        flag, _, value = head[i].partition("=")
        if flag in ALIASES:
            if (
                flag in _ALIAS_TAKES_VALUE
                and not value
                and i + 1 < len(head)
                and not head[i + 1].startswith("-")
            ):
                value = head[i + 1]
                i += 1
            modes.append((ALIASES[flag], [value] if value else []))
        else:
            rest.append(head[i])
        i += 1
    names = [name for name, _ in modes]
    if len(names) > 1:
        raise UsageError(
            f"--{names[0]} is given twice"
            if len(set(names)) == 1
            else MIXED_MODES
            if "record" in names
            else "give one of --replay and --demo"
        )
    if not modes:
        return [DEFAULT_COMMAND, *head, *tail]
    name, directory = modes[0]
    return [name, *directory, *rest, *tail]


def build_parser() -> argparse.ArgumentParser:
    """The root parser with one subparser per command."""
    return _build()[0]


def _build() -> tuple[OneLineParser, dict[str, argparse.ArgumentParser]]:
    parser = OneLineParser(
        prog="gpuherd",
        description="Terminal monitor for shared GPU hosts.",
        epilog="Without a command, gpuherd runs `monitor`. The old spellings still work: "
        "`gpuherd --record DIR ...` is `gpuherd record DIR ...`, `--tui --record DIR` is "
        "`record --tui DIR`, `--replay DIR` is `replay DIR`, `--demo` is `demo`. A command to run "
        "goes after a bare `--`: `gpuherd record DIR -- CMD ARGS...` records it, `gpuherd queue "
        "add [flags] -- CMD ARGS...` queues it. Run "
        "`gpuherd demo` to see it on a machine without an NVIDIA GPU; `gpuherd COMMAND --help` "
        "for a command's flags.",
    )
    parsers = "compiled" if parsers_compiled() else "pure Python"
    parser.add_argument(
        "--version", action="version", version=f"gpuherd {__version__} (log parsers: {parsers})"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    children: dict[str, argparse.ArgumentParser] = {}
    for name, module in COMMANDS.items():
        child = sub.add_parser(
            name,
            help=module.HELP,
            description=module.HELP,
            epilog=module.EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(child)
        if getattr(module, "ACCEPTS_COMMAND", False) and name != "queue":
            usage_with_command(child)  # `queue add` says it on its own parser
        children[name] = child
    return parser, children


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse `argv` (aliases included); everything after a bare `--` is the command to record.

    Exits with status 2 and argparse's one-line message on any usage error.
    """
    parser, children = _build()
    try:
        argv = rewrite_aliases(argv)
    except UsageError as error:
        parser.error(str(error))
    child: list[str] | None = None
    if "--" in argv:
        cut = argv.index("--")
        argv, child = argv[:cut], argv[cut + 1 :]
    args, extra = parser.parse_known_args(argv)
    module = COMMANDS[args.command]
    own_parser = deepest_parser(children[args.command], args)  # `queue add`, not `queue`
    if extra:  # named by the command that refuses them, not by the root
        own_parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if child is not None and not getattr(module, "ACCEPTS_COMMAND", False):
        own_parser.error(NO_RECORD)
    args.child_command = child
    check = getattr(module, "check", None)
    problem = (check(args) if check is not None else None) or watch_problem(args)
    if problem is not None:
        own_parser.error(visible(problem))  # a check may name a file another user made
    for said in watch_notes(args):
        print(visible(f"{own_parser.prog}: {said}"), file=sys.stderr)
    args.child_command = child or []
    return args


def typed_options(args: argparse.Namespace) -> object:
    """The typed options (`gpuherd.common.options`) the command `args` names hands its engine."""
    return COMMANDS[args.command].options(args)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `gpuherd` console script; returns the process exit code."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        return int(COMMANDS[args.command].run(args))
    except KeyboardInterrupt:
        print("gpuherd: interrupted", file=sys.stderr)
        return exit_codes.INTERRUPTED
    except BrokenPipeError:
        # The reader of stdout went away (`gpuherd parse f | head -1`). Catching it here rather
        # than restoring SIGPIPE's default keeps a closed metrics client or child pipe from
        # killing a recorder; like a tool killed by SIGPIPE, end quietly with 128 + SIGPIPE.
        _drop_stdout()
        return exit_codes.BROKEN_PIPE


def _drop_stdout() -> None:
    """Point stdout at /dev/null so that the flush at exit does not fail on the closed pipe."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no stdout descriptor (an embedding caller)
        pass
