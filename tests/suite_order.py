"""The suite's order for its workers (tests/conftest.py), kept apart so that it can be tested."""

from __future__ import annotations

from collections.abc import Callable

import pytest

SPREAD_OVER = 0.8
"""The share of the other tests that the chosen ones are spread over: the last fifth of the run
is left to tests that keep both cores busy to its end (with the chosen ones spread to the very
end, the last 40 s of a run on 2 cores used 70 % of them)."""


def spread_out(
    items: list[pytest.Item], chosen: Callable[[pytest.Item], bool]
) -> list[pytest.Item]:
    """`items` with the `chosen` ones spread evenly among the others after the `slow` ones,
    over the first `SPREAD_OVER` of them."""
    first = [item for item in items if item.get_closest_marker("slow") is not None]
    rest = [item for item in items[len(first) :] if not chosen(item)]
    picked = [item for item in items[len(first) :] if chosen(item)]
    if not picked:
        return items
    # the k-th chosen item goes before the rest's item at (k + 1/2) / len(picked) of the span
    span = round(len(rest) * SPREAD_OVER)
    spread: list[pytest.Item] = []
    for k, item in enumerate(picked):
        cut = (2 * k + 1) * span // (2 * len(picked))
        spread.extend(rest[len(spread) - k : cut])
        spread.append(item)
    spread.extend(rest[len(spread) - len(picked) :])
    return first + spread
