"""The flags `queue add` takes to hand a job to Slurm instead of running it here."""

from __future__ import annotations

import argparse

from gpuherd.common.queue_defaults import MAX_UTIL_PCT


def add_slurm_arguments(parser: argparse.ArgumentParser) -> None:
    """`--slurm` and the flags that go with it."""
    parser.add_argument(
        "--slurm",
        action="store_true",
        help="submit the job to Slurm (sbatch --gres=gpu:K) instead of "
        "waiting for room here; it runs under `gpuherd record` on the node "
        "Slurm picks (docs/slurm.md)",
    )
    parser.add_argument("--partition", metavar="P", help="with --slurm: the partition")
    parser.add_argument(
        "--time",
        metavar="T",
        help="with --slurm: the time limit, in Slurm's form (90, 2:00:00, 1-12:00:00)",
    )
    parser.add_argument(
        "--record-dir",
        metavar="DIR",
        help="with --slurm: where the job's session goes, as DIR/job-<id> "
        "(default ./gpuherd-sessions; on a filesystem the nodes share)",
    )


_LOCAL_ONLY = ("max_util", "after", "retry_oom")
_SLURM_ONLY = ("partition", "time", "record_dir")


def check_slurm_flags(args: argparse.Namespace) -> str | None:
    """A flag of the other mode is a usage error: `--partition` needs `--slurm`, and so on."""
    slurm = getattr(args, "slurm", False)
    for flag in _SLURM_ONLY if not slurm else _LOCAL_ONLY:
        value = getattr(args, flag, None)
        default = {"max_util": MAX_UTIL_PCT, "retry_oom": False}.get(flag)
        if value is not None and value != default:
            name = "--" + flag.replace("_", "-")
            return (
                f"{name} is only for Slurm jobs (--slurm)"
                if not slurm
                else f"{name} is only for jobs this queue starts, not with --slurm"
            )
    return None
