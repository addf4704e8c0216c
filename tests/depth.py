"""How hard the stress and fuzz tests push: quick by default, full with `GPUHERD_TEST_DEPTH=deep`.

The README's test command must finish in a few minutes on 2 cores, so the kill -9 trials, the
waker's and the many-logs rounds and the Hypothesis examples run at a depth that still reaches
every kind of case; `GPUHERD_TEST_DEPTH=deep` runs them at the depth they were written for.
"""

from __future__ import annotations

import os

DEEP = os.environ.get("GPUHERD_TEST_DEPTH", "") == "deep"


def depth(quick: int, deep: int) -> int:
    """`deep` under `GPUHERD_TEST_DEPTH=deep`, else `quick`."""
    return deep if DEEP else quick
