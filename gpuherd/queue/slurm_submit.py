"""`gpuherd queue add --slurm`: the job handed to `sbatch`, its command under `gpuherd record`."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from gpuherd.queue.addspec import parse_env, resolve_command
from gpuherd.queue.options import QueueOptions
from gpuherd.queue.read_peak import recorded_peak
from gpuherd.queue.sizes import format_size, parse_size
from gpuherd.queue.slurm_ledger import SlurmLedger, SlurmSubmission
from gpuherd.queue.store import QueueError, QueueStore

SBATCH_TIMEOUT_S = 60.0
DEFAULT_RECORD_DIR = "gpuherd-sessions"
"""Under the job's directory unless `--record-dir` names another (it must be on a filesystem
the compute nodes share: the job writes its session there)."""


def batch_script(
    argv: Sequence[str], record_dir: Path, env: Mapping[str, str], python: str = sys.executable
) -> str:
    """The script Slurm runs: `gpuherd record <record_dir>/job-$SLURM_JOB_ID -- CMD`."""
    lines = ["#!/bin/sh", "# gpuherd queue add --slurm: the command, recorded where it runs"]
    lines += [f"export {key}={shlex.quote(value)}" for key, value in sorted(env.items())]
    session = shlex.quote(str(record_dir) + "/job-") + '"$SLURM_JOB_ID"'
    command = " ".join(shlex.quote(a) for a in argv)
    lines.append(f"exec {shlex.quote(python)} -m gpuherd record {session} -- {command}")
    return "\n".join(lines) + "\n"


def sbatch_argv(
    name: str, gpus: int, cwd: str, record_dir: Path, partition: str | None, time_limit: str | None
) -> list[str]:
    """`sbatch` with the job's name, GPUs, directory, output file, partition and time."""
    argv = [
        "sbatch",
        "--parsable",
        f"--job-name={name}",
        f"--chdir={cwd}",
        f"--output={record_dir}/slurm-%j.out",
    ]
    if gpus:
        argv.append(f"--gres=gpu:{gpus}")
    if partition:
        argv.append(f"--partition={partition}")
    if time_limit:
        argv.append(f"--time={time_limit}")
    return argv


def slurm_reason(stderr: str) -> str:
    """Slurm's own words: its error lines, without the `sbatch: error: ` prefixes, in one line."""
    from collectors.slurm.commands import last_line

    said = [last_line(line) for line in stderr.splitlines() if line.strip()]
    return "; ".join(dict.fromkeys(said)) or "sbatch gave no reason"


def submit(argv: Sequence[str], script: str) -> str:
    """Run `sbatch`; the job id, or `QueueError` with Slurm's reason for refusing it."""
    try:
        done = subprocess.run(
            list(argv),
            input=script,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=SBATCH_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        raise QueueError("--slurm: sbatch is not on PATH (no Slurm here)") from None
    except subprocess.TimeoutExpired:
        raise QueueError(f"--slurm: sbatch did not answer in {SBATCH_TIMEOUT_S:g} s") from None
    job_id = done.stdout.strip().split(";")[0]
    if done.returncode != 0 or not job_id.isdigit():
        raise QueueError(f"Slurm refused the job: {slurm_reason(done.stderr)}")
    return job_id


def _vram(
    text: str | None, ledger: SlurmLedger, store: QueueStore, argv: Sequence[str], cwd: str
) -> tuple[int, str | None]:
    if text is None:
        return 0, None
    if text.strip().lower() != "auto":
        try:
            return parse_size(text), None
        except ValueError as error:
            raise QueueError(f"--vram {error}") from None
    for earlier in ledger.last_for(argv, cwd):
        peak = recorded_peak(Path(earlier.session_dir))
        if peak is not None:
            return peak, (
                f"--vram auto: {format_size(peak)}, the recorded peak of Slurm job "
                f"{earlier.slurm_job_id}"
            )
    peak = store.last_peak_for(argv, cwd)
    if peak is None:
        raise QueueError("--vram auto: no recorded peak for this command yet: give --vram SIZE")
    return peak, f"--vram auto: {format_size(peak)}, the recorded peak of its last run"


def add_slurm(store: QueueStore, args: QueueOptions) -> str:
    """Submit the job; the line to print (notes go to stderr)."""
    argv = tuple(args.child_command)
    cwd = os.path.abspath(args.cwd or os.getcwd())
    if not os.path.isdir(cwd):
        raise QueueError(f"--cwd {cwd}: no such directory")
    extra = parse_env(args.env)
    resolve_command(argv[0], dict(os.environ) | extra, cwd)
    if args.gpus < 0:
        raise QueueError(f"--gpus {args.gpus}: give 0 or more GPUs")
    ledger = SlurmLedger(store.path.parent)
    vram, note = _vram(args.vram, ledger, store, argv, cwd)
    record_dir = Path(cwd, args.record_dir or DEFAULT_RECORD_DIR).resolve()
    try:
        record_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise QueueError(f"--record-dir {record_dir}: {error.strerror}") from None
    name = args.name or os.path.basename(argv[0])
    job_id = submit(
        sbatch_argv(name, args.gpus, cwd, record_dir, args.partition, args.time),
        batch_script(argv, record_dir, extra),
    )
    session = record_dir / f"job-{job_id}"
    ledger.append(
        SlurmSubmission(
            job_id,
            name,
            argv,
            cwd,
            str(session),
            time.time(),
            args.gpus,
            vram,
            args.partition,
            args.time,
            extra,
        )
    )
    if note:
        print(f"gpuherd queue add: {note}", file=sys.stderr)
    gpus = "1 GPU" if args.gpus == 1 else f"{args.gpus} GPUs"
    need = f", needs {format_size(vram)} each" if vram else ""
    return (
        f"submitted Slurm job {job_id} ({name}) on {gpus}{need}; recorded in {session} "
        "(`gpuherd queue ls` follows it)"
    )
