"""The exit codes of every gpuherd command, in one table (README.md "Exit codes" shows it)."""

from __future__ import annotations

OK = 0
"""Everything asked for was done."""
FAILED = 1
"""The command ran and reported a failure on stderr: a GPU could not be read, the recording could
not start or stopped early (disk full), a log file could not be read, was empty, held no text or
had no line that matched a forced `--format` (`parse`), the example file could not be written
(`note`)."""
USAGE = 2
"""Refused before anything ran: an unknown or misplaced flag, a bad value, an unknown `--format`,
a session directory that is missing or unusable (`replay`, `summarize`, `note`) or that `record`
must not write into (a link where a session file goes, writable by others), an example file
`note` must not or cannot edit, the dashboard without a terminal, a refused `queue` action (a
second `queue run` of the same user included), a `--serve-metrics` port in use or certificate
that does not match its key, a Prometheus that cannot be reached or holds no GPU series
(`fleet`)."""
NO_SOURCE = 3
"""No usable source: `snapshot` or `queue run` found no NVIDIA driver or no GPU (`snapshot` still
prints the host part)."""
INTERRUPTED = 130
"""Stopped by Ctrl-C (128 + SIGINT), as a shell reports it."""
BROKEN_PIPE = 141
"""The reader of stdout closed it early (`gpuherd parse f | head -1`): the rest of the output is
dropped without a message, and the status is 128 + SIGPIPE, as a shell reports `cat` or `grep`
ended by SIGPIPE, so `set -o pipefail` still sees that the output was cut."""

# `record -- CMD` ends with the recorded command's own exit status instead; 126 and 127 (the
# command is not executable / does not exist) come from gpuherd.proc.child.
