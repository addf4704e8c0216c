"""`gpuherd queue add|ls|show|rm|cancel|pause|resume|move|run`: the GPU-headroom job queue."""

from __future__ import annotations

import argparse

from gpuherd.commands import queue_run
from gpuherd.commands.flags import usage_with_command
from gpuherd.common.options import from_namespace
from gpuherd.common.queue_defaults import MARGIN_BYTES, MAX_UTIL_PCT, SETTLE_S, STOP_GRACE_S
from gpuherd.present.format import format_size
from gpuherd.queue.options import QueueOptions

HELP = "queue jobs that start when a GPU has room for them (add, ls, show, rm, cancel, ...)"
EPILOG = f"""\
gpuherd queue add [--name N] [--gpus K] [--vram SIZE|auto] [--max-util PCT] [--cwd DIR]
                  [--env K=V ...] [--after JOB] [--retry-oom] -- CMD ARGS...
gpuherd queue add --slurm [--partition P] [--time T] [--gpus K] [--vram SIZE|auto]
                  [--record-dir DIR] -- CMD ARGS...       (sbatch; docs/slurm.md)
gpuherd queue ls [--json]        gpuherd queue show JOB      gpuherd queue rm JOB
gpuherd queue cancel [--slurm] JOB [--grace S]               gpuherd queue move JOB --to N
gpuherd queue pause              gpuherd queue resume        gpuherd queue run

A job waits until a GPU has its --vram free (plus a {format_size(MARGIN_BYTES)} margin) and is
under --max-util for {SETTLE_S:g} s, then runs as a recorded session in
<state>/jobs/<id>-<name>/. The queue lives in $GPUHERD_STATE_DIR, else
$XDG_STATE_HOME/gpuherd, else ~/.local/state/gpuherd
(docs/queue.md)."""

ACCEPTS_COMMAND = True
"""`queue add` takes the job's command after a bare `--` (`args.child_command`)."""
NEEDS_COMMAND = "give the job's command after `--`: gpuherd queue add [flags] -- CMD ARGS..."
NO_COMMAND_HERE = "a command after `--` is only for `gpuherd queue add`"


def _job(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", metavar="JOB", type=int, help="the job's id (`gpuherd queue ls`)")


def _add_arguments_add(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--name", metavar="N", help="a name to show (default: the program)")
    parser.add_argument(
        "--gpus",
        metavar="K",
        type=int,
        default=1,
        help="how many GPUs the job needs, each with --vram free (default 1)",
    )
    parser.add_argument(
        "--vram",
        metavar="SIZE",
        help="memory the job needs per GPU, e.g. 20GiB, 512MiB; `auto`: the "
        "recorded peak of the last run of the same command (default: 0, only "
        "the margin)",
    )
    parser.add_argument(
        "--max-util",
        metavar="PCT",
        type=float,
        default=MAX_UTIL_PCT,
        help=f"a GPU busier than this %% does not qualify (default {MAX_UTIL_PCT:g})",
    )
    parser.add_argument("--cwd", metavar="DIR", help="directory to run in (default: here)")
    parser.add_argument(
        "--env",
        metavar="K=V",
        action="append",
        default=[],
        help="set a variable for the job (repeatable); the job gets the "
        "environment `queue add` runs in, with these applied",
    )
    parser.add_argument("--after", metavar="JOB", type=int, help="start only after job JOB is done")
    parser.add_argument(
        "--retry-oom",
        action="store_true",
        help="if the job dies of CUDA out-of-memory, queue it once more with "
        "1.5 times the need (at least 2 GiB more)",
    )
    from gpuherd.commands.queue_slurm_flags import add_slurm_arguments

    add_slurm_arguments(parser)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The queue's sub-subcommands, each with its own flags."""
    sub = parser.add_subparsers(dest="queue_command", metavar="ACTION", required=True)
    add = sub.add_parser(
        "add",
        help="queue a command: add [flags] -- CMD ARGS...",
        epilog="-- CMD ARGS...  the job's command (required); it must be found "
        "in the job's PATH and --cwd now",
    )
    _add_arguments_add(add)
    usage_with_command(add)
    ls = sub.add_parser("ls", help="list the jobs")
    ls.add_argument("--json", action="store_true", help="a JSON list of jobs (docs/queue.md)")
    show = sub.add_parser("show", help="everything about one job")
    _job(show)
    show.add_argument(
        "--show-secrets",
        action="store_true",
        help="print the values of variables named like secrets (*TOKEN*, *KEY*, "
        "*SECRET*, *PASSWORD*, *PASSWD*, *CREDENTIAL*, *AUTH*), masked "
        "otherwise",
    )
    _job(sub.add_parser("rm", help="remove a job that is not running"))
    cancel = sub.add_parser("cancel", help="cancel a job; a running one gets SIGTERM, then SIGKILL")
    _job(cancel)
    cancel.add_argument(
        "--slurm",
        action="store_true",
        help="JOB is a Slurm job id this queue submitted: scancel it",
    )
    cancel.add_argument(
        "--grace",
        metavar="S",
        type=float,
        default=STOP_GRACE_S,
        help=f"seconds between SIGTERM and SIGKILL (default {STOP_GRACE_S:g})",
    )
    sub.add_parser("pause", help="start no new job (running jobs go on)")
    sub.add_parser("resume", help="start jobs again")
    move = sub.add_parser("move", help="change a waiting job's place in line")
    _job(move)
    move.add_argument(
        "--to",
        metavar="N",
        type=int,
        required=True,
        help="the new place: 1 is first; past the end is last",
    )
    # `queue run` (the runner) owns its flags in gpuherd.commands.queue_run.
    run_parser = sub.add_parser(
        "run",
        help=queue_run.RUN_HELP,
        description=queue_run.RUN_HELP,
        epilog=queue_run.RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    queue_run.add_run_arguments(run_parser)


def check(args: argparse.Namespace) -> str | None:
    """A command after `--` belongs to `queue add`, and `queue add` needs one."""
    if args.queue_command == "run" and args.child_command is None:
        return queue_run.check_run(args)
    if args.queue_command == "add":
        from gpuherd.commands.queue_slurm_flags import check_slurm_flags

        return NEEDS_COMMAND if not args.child_command else check_slurm_flags(args)
    return NO_COMMAND_HERE if args.child_command is not None else None


def options(args: argparse.Namespace) -> QueueOptions:
    """The typed options this command hands the engine."""
    return from_namespace(QueueOptions, args)


def run(args: argparse.Namespace) -> int:
    """Run one queue action."""
    if args.queue_command == "run":
        return queue_run.run_queue_run(args)
    from gpuherd.queue import queue_command

    return queue_command.run(options(args))
