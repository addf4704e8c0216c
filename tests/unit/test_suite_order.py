"""The suite's own order (tests/suite_order.py): `waits` tests spread out after `slow` ones."""

from __future__ import annotations

from typing import Any, cast

import pytest

from tests.suite_order import spread_out


class Item:
    """What `spread_out` reads of a pytest item: its markers (and a name to compare)."""

    def __init__(self, name: str, *markers: str) -> None:
        self.name, self.markers = name, markers

    def get_closest_marker(self, name: str) -> str | None:
        return name if name in self.markers else None


def names(items: list[Any]) -> list[str]:
    ordered = spread_out(
        cast(list[pytest.Item], items), lambda item: item.get_closest_marker("waits") is not None
    )
    return [cast(Item, item).name for item in ordered]


def test_waiting_tests_are_spread_evenly_after_the_slow_ones() -> None:
    rest = [Item(f"r{i}") for i in range(10)]
    items = [Item("s1", "slow"), Item("s2", "slow", "waits"), *rest]
    items += [Item("w0", "waits"), Item("w1", "waits")]
    # over the first 8 of the 10 others: at 2 and at 6, the last 2 left to the others
    assert names(items) == (
        ["s1", "s2", "r0", "r1", "w0", "r2", "r3", "r4", "r5", "w1", "r6", "r7", "r8", "r9"]
    )


def test_more_waiting_tests_than_others_keep_every_test_once() -> None:
    items = [Item("r0"), *(Item(f"w{i}", "waits") for i in range(3)), Item("r1")]
    assert names(items) == ["w0", "r0", "w1", "w2", "r1"]


def test_without_waiting_tests_the_order_is_unchanged() -> None:
    items = [Item("s", "slow"), Item("a"), Item("b")]
    assert names(items) == ["s", "a", "b"]
