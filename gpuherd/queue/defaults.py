"""The queue runner's defaults, written once: flags, help text and every signature read them."""

from __future__ import annotations

from gpuherd.format import GIB, format_size

SETTLE_S = 10.0
"""Seconds a GPU must keep room before a job starts on it (`--settle`)."""
MARGIN_BYTES = GIB
"""Memory kept free on top of each job's need (`--margin`)."""
MARGIN_TEXT = format_size(MARGIN_BYTES).replace(" ", "")
"""`MARGIN_BYTES` as a person writes it on the command line: `1GiB`."""
GRACE_S = 120.0
"""Seconds a started job's reservation is held at most before it allocates (`--grace`)."""
MAX_UTIL_PCT = 10.0
"""A GPU busier than this percentage does not qualify for a job (`queue add --max-util`)."""
STOP_GRACE_S = 10.0
"""Seconds between SIGTERM and SIGKILL when a running job is cancelled (`queue cancel --grace`)."""
