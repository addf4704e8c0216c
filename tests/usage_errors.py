"""The one line a usage error prints, whatever follows it."""

from __future__ import annotations

SEE_HELP = "see `gpuherd"


def error_line(stderr: str) -> str:
    """The line that says what is wrong: the last, or the one before `see gpuherd CMD --help`.

    A usage error is `gpuherd CMD: error: WHAT` then the help hint and nothing else; a command
    that refuses its input itself prints its one line alone.
    """
    lines = stderr.strip().splitlines()
    if any(": error: " in line for line in lines):  # a usage error: its line, then the hint
        assert lines[-1].startswith(SEE_HELP), f"no `see ... --help` after the error: {lines}"
    if lines and lines[-1].startswith(SEE_HELP):
        assert len(lines) == 2, f"more than the line and the hint: {lines}"
        assert lines[-1].endswith(" --help`") and lines[0].startswith("gpuherd")
        return lines[0]
    return lines[-1]
