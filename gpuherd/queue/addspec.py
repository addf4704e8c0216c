"""`gpuherd queue add`: the job spec from its flags, every value checked before it is queued.

A job that cannot run is refused here, while the person is still at the terminal, instead of
failing hours later when a GPU frees up: a command that is not found in the job's PATH and
directory, a directory that does not exist, a size that is not one, more GPUs than the host
has, or a `--after` job that can never be done.
"""

from __future__ import annotations

import math
import os
import re
import stat
from collections.abc import Mapping, Sequence

from gpuherd.present.format import format_size
from gpuherd.queue.jobs import JobSpec, JobState
from gpuherd.queue.options import QueueOptions
from gpuherd.queue.sizes import parse_size
from gpuherd.queue.store import QueueError, QueueStore

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_NAME_CHARS = 80
MAX_GPUS = 1024
"""More GPUs than any one host holds; keeps `--gpus` far inside SQLite's 64-bit integers."""


def _executable(path: str) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and os.access(path, os.X_OK)


def resolve_command(program: str, env: Mapping[str, str], cwd: str) -> str:
    """The file `program` runs, looked up as the job will: in its PATH, from its directory.

    Raises:
        QueueError: no such command, or the file is not executable.
    """
    if "/" in program:
        path = os.path.join(cwd, program)
        if not os.path.exists(path):
            raise QueueError(f"no such command: {program} (not found from {cwd})")
        if not _executable(path):
            raise QueueError(f"{program} is not an executable file")
        return path
    for entry in env.get("PATH", os.defpath).split(os.pathsep):
        path = os.path.join(cwd, entry or ".", program)
        if _executable(path):
            return path
    raise QueueError(f"no such command: {program} (not found in the job's PATH)")


def parse_env(items: Sequence[str]) -> dict[str, str]:
    """`--env K=V` values as a mapping; `QueueError` for one that is not `NAME=value`."""
    found: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not _ENV_NAME.fullmatch(key):
            raise QueueError(
                f"--env {item!r}: expected NAME=VALUE (a name of letters, digits "
                "and _, not starting with a digit)"
            )
        found[key] = value
    return found


def _cwd(given: str | None) -> str:
    try:
        cwd = os.path.abspath(given if given is not None else os.getcwd())
    except FileNotFoundError:
        raise QueueError("the current directory no longer exists: give --cwd DIR") from None
    if not os.path.isdir(cwd):
        what = "no such directory" if not os.path.exists(cwd) else "not a directory"
        raise QueueError(f"--cwd {given or cwd}: {what}")
    return cwd


def _vram(
    text: str | None, store: QueueStore, argv: Sequence[str], cwd: str, notes: list[str]
) -> int:
    if text is None:
        return 0
    if text.strip().lower() == "auto":
        peak = store.last_peak_for(argv, cwd)
        if peak is None:
            raise QueueError("--vram auto: no recorded peak for this command yet: give --vram SIZE")
        notes.append(f"--vram auto: {format_size(peak)}, the recorded peak of its last run")
        return peak
    try:
        return parse_size(text)
    except ValueError as error:
        raise QueueError(f"--vram {error}") from None


def _after(job_id: int | None, store: QueueStore) -> int | None:
    if job_id is None:
        return None
    try:
        job = store.get(job_id)
    except QueueError:
        raise QueueError(f"--after {job_id}: no job {job_id} in the queue") from None
    if job.state in (JobState.FAILED, JobState.CANCELLED):
        raise QueueError(
            f"--after {job_id}: job {job_id} already {job.state.value}, so this "
            "job could never start"
        )
    return job_id


def check_gpu_count(
    gpus: int, host_gpus: int | None, why_unknown: str | None, notes: list[str]
) -> None:
    """Refuse more GPUs than the host has; without a driver, accept and note it."""
    if gpus < 1:
        raise QueueError(f"--gpus {gpus}: a job needs at least 1 GPU")
    if gpus > MAX_GPUS:
        raise QueueError(f"--gpus {gpus}: more than any host has (at most {MAX_GPUS})")
    if host_gpus is None:
        if gpus > 1:
            notes.append(
                f"--gpus {gpus} not checked: {why_unknown or 'no GPU count'}; the runner checks it"
            )
        return
    if gpus > host_gpus:
        have = f"{host_gpus} GPU" + ("" if host_gpus == 1 else "s")
        raise QueueError(f"--gpus {gpus}: this host has {have}")


def build_spec(
    args: QueueOptions, store: QueueStore, host_gpus: tuple[int | None, str | None]
) -> tuple[JobSpec, list[str]]:
    """The job `queue add` asked for, and notes to tell the person.

    Args:
        args: the parsed `queue add` flags, the command in `args.child_command`.
        store: the queue (for `--after` and `--vram auto`).
        host_gpus: the host's GPU count, or `None` and why it is unknown (no driver).

    Raises:
        QueueError: one line saying which value is wrong and why.
    """
    notes: list[str] = []
    argv = tuple(args.child_command)
    cwd = _cwd(args.cwd)
    env = dict(os.environ) | parse_env(args.env)
    resolve_command(argv[0], env, cwd)
    check_gpu_count(args.gpus, *host_gpus, notes)
    if not (math.isfinite(args.max_util) and 0 < args.max_util <= 100):
        raise QueueError(f"--max-util {args.max_util:g}: give a percentage above 0, at most 100")
    name = args.name
    if name is not None and (
        not name.strip() or len(name) > MAX_NAME_CHARS or not name.isprintable()
    ):
        raise QueueError(f"--name: give 1 to {MAX_NAME_CHARS} printable characters")
    spec = JobSpec(
        argv=argv,
        cwd=cwd,
        env=tuple(sorted(env.items())),
        name=name,
        gpus=args.gpus,
        vram_bytes=_vram(args.vram, store, argv, cwd, notes),
        max_util_pct=float(args.max_util),
        after=_after(args.after, store),
        retry_oom=bool(args.retry_oom),
    )
    return spec, notes
