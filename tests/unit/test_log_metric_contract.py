"""`LogMetric` is a plain slotted dataclass for speed and immutable by contract (its
docstring); these tests pin what callers rely on, and that the suite's guard holds."""

from __future__ import annotations

import dataclasses

import pytest

from parsers.model import LogMetric


def test_fields_keep_what_the_constructor_gave() -> None:
    metric = LogMetric((("train/loss", 0.5), ("lr", 1e-4)), 10, 1.5, 1_700_000_000.0, 2)
    assert metric.values == (("train/loss", 0.5), ("lr", 1e-4))
    assert (metric.step, metric.epoch, metric.taken_at, metric.unparsed_values) == (
        10,
        1.5,
        1_700_000_000.0,
        2,
    )
    assert LogMetric((("a", 1.0),)).step is None and LogMetric((("a", 1.0),)).unparsed_values == 0
    assert metric.as_dict() == {"train/loss": 0.5, "lr": 1e-4}


def test_equal_metrics_hash_alike_and_a_different_field_is_unequal() -> None:
    one = LogMetric((("loss", 1.0),), step=3)
    assert one == LogMetric((("loss", 1.0),), step=3)
    assert hash(one) == hash(LogMetric((("loss", 1.0),), step=3))
    assert one != LogMetric((("loss", 1.0),), step=4)
    assert one != LogMetric((("loss", 1.0),), step=3, unparsed_values=1)
    assert len({one, LogMetric((("loss", 1.0),), step=3)}) == 1


def test_replace_makes_a_new_metric_and_leaves_the_old_one() -> None:
    one = LogMetric((("loss", 1.0),), step=3)
    moved = dataclasses.replace(one, step=4)
    assert moved.step == 4 and one.step == 3


def test_no_instance_dict_so_no_stray_attribute() -> None:
    with pytest.raises((AttributeError, TypeError)):
        LogMetric((("loss", 1.0),)).stray = 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("field", ["values", "step", "epoch", "taken_at", "unparsed_values"])
def test_the_suite_refuses_a_second_assignment_or_a_delete(field: str) -> None:
    metric = LogMetric((("loss", 1.0),), step=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(metric, field, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        delattr(metric, field)
    assert metric == LogMetric((("loss", 1.0),), step=3)
