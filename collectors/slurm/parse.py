"""Pure readers of Slurm's text output: `squeue -o`, `scontrol show job -d -o`, `listpids`."""

from __future__ import annotations

import re

from collectors.slurm.samples import SlurmJob

SEP = "\x1f"
"""Field separator asked of `squeue -o`: no job name, user or partition can hold it."""

SQUEUE_FIELDS = ("%A", "%i", "%u", "%P", "%T", "%M", "%l", "%b", "%j")
"""Job id, id as shown (array form), user, partition, state, elapsed, limit, GRES, name (last,
so a separator in a name could only ever spill into the name)."""

SQUEUE_FORMAT = SEP.join(SQUEUE_FIELDS)

_IDX = re.compile(r"\(IDX:([^)]*)\)")
_GPU_GRES = re.compile(r"(?:^|[,\s])(?:gres/|gres:)?gpu(?::[^:,\s]+)?:(\d+)")
_DURATION = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)$")
_HOSTLIST = re.compile(r"([^,\[]+)(?:\[([^\]]+)\])?")


def parse_duration(text: str) -> int | None:
    """Seconds in Slurm's `[D-][HH:]MM:SS`; `None` for `UNLIMITED`, `N/A`, `INVALID`."""
    m = _DURATION.match(text.strip())
    if m is None:
        return None
    days, hours, minutes, seconds = (int(g) if g else 0 for g in m.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def parse_indexes(text: str) -> tuple[int, ...]:
    """`0-1,3` -> (0, 1, 3)."""
    out: list[int] = []
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        if first.isdigit():
            out.extend(range(int(first), int(last if last.isdigit() else first) + 1))
    return tuple(out)


def gpu_indexes_of_gres(gres: str) -> tuple[int, ...]:
    """The GPU indexes in one `GRES=gpu:a100:2(IDX:0-1),nic:1(IDX:0)` value."""
    out: list[int] = []
    for item in re.split(r",(?=[a-z])", gres):
        m = _IDX.search(item)
        if m is not None and item.startswith("gpu"):
            out.extend(parse_indexes(m.group(1)))
    return tuple(out)


def gpus_requested(tres: str) -> int:
    """GPUs per node in squeue's `%b` (`gres:gpu:2`, `gres/gpu:a100=2`); 0 when none."""
    m = _GPU_GRES.search(tres.replace("=", ":"))
    return int(m.group(1)) if m else 0


def expand_hostlist(text: str) -> list[str]:
    """`gpu[01-03,7],login` -> ['gpu01', 'gpu02', 'gpu03', 'gpu7', 'login']."""
    names: list[str] = []
    for m in _HOSTLIST.finditer(text):
        prefix, ranges = m.group(1).strip(","), m.group(2)
        if ranges is None:
            names.append(prefix)
            continue
        for part in ranges.split(","):
            first, _, last = part.partition("-")
            width = len(first)
            if not first.isdigit():
                continue
            for number in range(int(first), int(last if last.isdigit() else first) + 1):
                names.append(f"{prefix}{number:0{width}d}")
    return names


def parse_squeue_line(line: str) -> SlurmJob | None:
    """One line of `squeue -h -o SQUEUE_FORMAT`; `None` when it is not one."""
    fields = line.rstrip("\n").split(SEP, len(SQUEUE_FIELDS) - 1)
    if len(fields) != len(SQUEUE_FIELDS) or not fields[0].isdigit():
        return None
    job_id, shown, user, partition, state, elapsed, limit, tres, name = fields
    return SlurmJob(
        job_id=job_id,
        user=user,
        name=name,
        partition=partition,
        state=state,
        elapsed_s=parse_duration(elapsed),
        time_limit_s=parse_duration(limit),
        gpus_requested=gpus_requested(tres),
        array_id=shown if "_" in shown else None,
    )


def gpu_indexes_on_node(detail: str, node: str) -> tuple[int, ...] | None:
    """The GPUs `scontrol show job -d -o` says the job holds on `node`; `None` if it names none.

    The detail holds one `Nodes=<hostlist> CPU_IDs=... [GRES=...]` group per set of nodes; a
    group without `GRES=` holds no GPU there.
    """
    found: tuple[int, ...] | None = None
    for group in re.split(r"\s(?=Nodes=)", detail)[1:]:
        hosts, _, rest = group[len("Nodes=") :].partition(" ")
        if node not in expand_hostlist(hosts):
            continue
        gres = re.search(r"\bGRES=(\S+)", rest.split(" Min", 1)[0])
        found = gpu_indexes_of_gres(gres.group(1)) if gres else ()
    return found


def parse_listpids(text: str) -> dict[int, tuple[str, str | None]]:
    """`scontrol listpids` -> pid: (job id, step); the header and odd lines are skipped."""
    out: dict[int, tuple[str, str | None]] = {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[0].isdigit() and fields[1].isdigit():
            out[int(fields[0])] = (fields[1], None if fields[2] == "-" else fields[2])
    return out
