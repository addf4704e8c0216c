"""Running Slurm's commands: where they are, whether this machine is a node, one call each."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from collections.abc import Mapping, Sequence

from collectors.base import CollectorError, CollectorUnavailable

_PREFIX = re.compile(r"^[\w-]+: (?:error|fatal): ")

OFF_ENV = "GPUHERD_SLURM"
"""`GPUHERD_SLURM=off` keeps gpuherd from reading Slurm on a node (and the tests that are not
about Slurm from the machine's Slurm and other tests' jobs)."""

TIMEOUT_S = 5.0
"""A query slower than this fails the tick (a controller that does not answer)."""

CONF_PATHS = (
    "/etc/slurm/slurm.conf",
    "/etc/slurm-llnl/slurm.conf",
    "/run/slurm/conf/slurm.conf",
    "/usr/local/etc/slurm.conf",
)
"""Where Slurm's commands look for their configuration (the last but one: a configless node,
whose slurmd keeps the controller's copy there). Without one they retry for a minute."""


def slurm_missing(
    env: Mapping[str, str] | None = None,
    conf_paths: Sequence[str] = CONF_PATHS,
    proc_root: str = "/proc",
) -> str | None:
    """Why Slurm cannot be read here (no commands, no configuration, no slurmd); `None` if it can.

    A machine without Slurm pays a PATH lookup; one with Slurm's commands also a few `stat`
    calls and a look for a running `slurmd`.
    """
    env = os.environ if env is None else env
    if env.get(OFF_ENV, "").lower() in ("off", "0", "no"):
        return f"Slurm is turned off ({OFF_ENV}={env[OFF_ENV]})"
    if shutil.which("scontrol", path=env.get("PATH")) is None:
        return "no Slurm here (scontrol is not on PATH)"
    confs = (env.get("SLURM_CONF", ""), *conf_paths)
    if not any(path and os.path.isfile(path) for path in confs):
        return "Slurm's commands are installed but no slurm.conf was found"
    if not slurmd_runs(proc_root):
        return "no slurmd runs here: this machine is no Slurm compute node"
    return None


def slurmd_runs(proc_root: str = "/proc") -> bool:
    """Whether a `slurmd` process is visible here (a compute node; a login node has none).

    One pass over the process names, paid only where Slurm's commands are installed.
    """
    try:
        entries = [e.name for e in os.scandir(proc_root) if e.name.isdigit()]
    except OSError:
        return False
    for pid in entries:
        try:
            with open(f"{proc_root}/{pid}/comm", "rb") as f:
                if f.read(16) == b"slurmd\n":
                    return True
        except OSError:
            continue
    return False


def node_name(env: Mapping[str, str] | None = None) -> str:
    """This node's Slurm name: `SLURMD_NODENAME` when set, else the short host name."""
    env = os.environ if env is None else env
    return env.get("SLURMD_NODENAME") or socket.gethostname().split(".", 1)[0]


def run_slurm(argv: Sequence[str], timeout_s: float = TIMEOUT_S) -> str:
    """Run one Slurm command; its stdout, or `CollectorError` with Slurm's own last line."""
    try:
        done = subprocess.run(
            list(argv),
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            check=False,
        )
    except FileNotFoundError as missing:
        raise CollectorUnavailable(f"{argv[0]} is gone: {missing}", "slurm") from None
    except subprocess.TimeoutExpired:
        raise CollectorError(f"{argv[0]} did not answer within {timeout_s:g} s", "slurm") from None
    if done.returncode != 0:
        raise CollectorError(
            last_line(done.stderr) or f"{argv[0]} exited {done.returncode}", "slurm"
        )
    return done.stdout


def last_line(text: str) -> str:
    """Slurm's reason: its last non-empty line, without the `sbatch: error: ` prefix."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return _PREFIX.sub("", lines[-1]) if lines else ""
