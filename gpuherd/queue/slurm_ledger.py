"""The jobs `queue add --slurm` handed to Slurm: one JSON line each in `<state>/slurm-jobs.jsonl`.

Slurm keeps the jobs; this file keeps what Slurm does not know: the command as given, where its
recorded session goes, the GPU memory it was said to need. Appends are one `write` of one line
(`O_APPEND`), so two submissions at once never interleave; a damaged line is skipped and named.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

LEDGER_FILE = "slurm-jobs.jsonl"


@dataclass(frozen=True, slots=True)
class SlurmSubmission:
    """One job handed to Slurm."""

    slurm_job_id: str
    name: str
    argv: tuple[str, ...]
    cwd: str
    session_dir: str
    """The recorded session's directory (where the job records, on the node that runs it)."""
    submitted_at: float
    gpus: int = 1
    vram_bytes: int = 0
    partition: str | None = None
    time_limit: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


@dataclass
class SlurmLedger:
    """Reads and appends the submissions of one state directory."""

    state_dir: Path
    damaged: list[str] = field(default_factory=list)

    @property
    def path(self) -> Path:
        """The ledger file."""
        return self.state_dir / LEDGER_FILE

    def append(self, entry: SlurmSubmission) -> None:
        """Add one submission (the state directory is created mode 0700 if needed)."""
        self.state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        line = json.dumps(asdict(entry), separators=(",", ":")) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def entries(self) -> list[SlurmSubmission]:
        """Every submission, oldest first; unreadable lines are listed in `damaged`."""
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        found: list[SlurmSubmission] = []
        for number, line in enumerate(text.splitlines(), 1):
            try:
                raw = json.loads(line)
                raw["argv"] = tuple(raw["argv"])
                found.append(SlurmSubmission(**raw))
            except (ValueError, TypeError, KeyError):
                self.damaged.append(f"{self.path}:{number}: not a submission record")
        return found

    def find(self, slurm_job_id: str) -> SlurmSubmission | None:
        """The submission of Slurm job `slurm_job_id`, if this queue made it."""
        return next((e for e in self.entries() if e.slurm_job_id == slurm_job_id), None)

    def last_for(self, argv: Sequence[str], cwd: str) -> list[SlurmSubmission]:
        """Submissions of the same command from the same directory, newest first."""
        return [e for e in reversed(self.entries()) if e.argv == tuple(argv) and e.cwd == cwd]
