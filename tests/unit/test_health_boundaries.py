"""Every health rule just inside and just outside each of its thresholds, with exact evidence.

The rules are in `parsers.health` (windowed rules over metric histories) and
`gpuherd.tasks.health` (`judge`, which routes histories to them, and the GPU-usage rules).
Values are chosen so that the float arithmetic at each boundary is exact (100 -> 99 is a drop of
exactly 1 %), and so that a threshold moved to a plausible neighbour (1 % -> 5 %, 0.2 -> 0.1,
10 classes for an unknown count) changes the answer.
"""

from __future__ import annotations

import math

import pytest

from gpuherd.tasks import health as tasks_health
from gpuherd.tasks.health import gpu_findings, judge, judge_histories, severity_of, wants
from gpuherd.tasks.series import MetricSeries
from parsers import health

NAN = math.nan


def pts(values: list[float], start: int = 0) -> list[tuple[float, float]]:
    return [(float(start + i), v) for i, v in enumerate(values)]


def flat_then(before: float, after: float, n: int = 50) -> list[tuple[float, float]]:
    """`n` points: the first half at `before`, the second half at `after`."""
    return pts([before] * (n // 2) + [after] * (n - n // 2))


# --- stalled: over the later half of the run, its later half's mean must be >= 1 % lower ----


def later_half(before: float, after: float, first: float = 500.0) -> list[tuple[float, float]]:
    """Steps 0-99: the earlier half of the run at `first`, then steps 50-74 at `before` and
    75-99 at `after` (the window is steps 50-99, split at 74.5)."""
    return pts([first] * 50 + [before] * 25 + [after] * 25)


def test_a_fall_of_exactly_one_percent_is_progress() -> None:
    assert health.stalled(later_half(100.0, 99.0)) is None


def test_a_fall_just_under_one_percent_is_stalled() -> None:
    found = health.stalled(later_half(100.0, 99.01))
    assert found is not None and found.kind == "stalled"
    assert found.evidence == "loss mean 100 -> 99.01 over steps 50-99"


@pytest.mark.parametrize("after", [98.0, 96.0, 95.5])
def test_falls_of_two_to_four_and_a_half_percent_are_progress(after: float) -> None:
    # A 5 % threshold would call these stalled.
    assert health.stalled(later_half(100.0, after)) is None


def test_only_the_later_half_of_the_run_is_judged() -> None:
    # A big fall early does not hide a flat later half; a flat start does not hide a fall.
    assert health.stalled(later_half(100.0, 99.5, first=1000.0)) is not None
    assert health.stalled(later_half(100.0, 98.0, first=100.0)) is None


def test_a_rising_loss_is_stalled_with_both_means_and_the_window_steps() -> None:
    found = health.stalled(pts([2.0 + 0.001 * i for i in range(100)]))
    assert found is not None
    assert found.evidence == "loss mean 2.062 -> 2.087 over steps 50-99"


def test_it_needs_fifty_finite_points() -> None:
    assert health.STALL_MIN_POINTS == 50
    assert health.stalled(pts([1.0] * 49)) is None
    assert health.stalled(pts([1.0] * 50)) is not None
    assert health.stalled(pts([NAN] * 10 + [1.0] * 49)) is None  # NaNs are not points
    assert health.stalled(pts([NAN] * 10 + [1.0] * 50)) is not None


def test_a_step_counter_that_goes_back_splits_by_order() -> None:
    # One counter per epoch (0-49 twice): the later 50 points, 25 against 25.
    values = [500.0] * 50 + [100.0] * 25 + [99.01] * 25
    found = health.stalled([(float(i % 50), v) for i, v in enumerate(values)])
    assert found is not None and found.evidence == "loss mean 100 -> 99.01 over steps 0-49"


@pytest.mark.parametrize("level", [0.0, -1.0])
def test_a_loss_at_or_below_zero_is_never_stalled(level: float) -> None:
    assert health.stalled(pts([level] * 50)) is None


def test_a_custom_min_drop_is_the_threshold() -> None:
    assert health.stalled(later_half(100.0, 95.0), min_drop=0.05) is None
    assert health.stalled(later_half(100.0, 95.5), min_drop=0.05) is not None


# --- chance level: the last `window` validation points all <= 1.5 x chance ---------------------

RISING = pts([0.2, 0.4])
RISING_PCT = pts([20.0, 40.0])


def test_exactly_one_and_a_half_times_chance_is_near_chance() -> None:
    found = health.chance_level(pts([0.15, 0.15, 0.15]), 10, RISING)
    assert found is not None and found.kind == "chance"
    assert found.evidence == (
        "val acc 0.15 at step 2 is near chance 0.1 (10 classes) for 3 evaluations"
    )


def test_just_above_one_and_a_half_times_chance_is_not() -> None:
    assert health.chance_level(pts([0.1501, 0.15, 0.15]), 10, RISING) is None
    assert health.chance_level(pts([0.15, 0.15, 0.1501]), 10, RISING) is None


def test_percent_accuracies_use_a_percent_chance() -> None:
    found = health.chance_level(pts([1.5, 1.5, 1.5]), 100, RISING_PCT)
    assert found is not None and "near chance 1 (100 classes)" in found.evidence
    assert health.chance_level(pts([1.5, 1.51, 1.5]), 100, RISING_PCT) is None


def test_a_value_of_exactly_one_is_a_fraction() -> None:
    # 1.0 is a perfect fraction, not 1 %: on a fraction scale 2-class chance is 0.5, and 0.75
    # is its limit. Read as percent, chance would be 50 and every value would be "near" it.
    assert health.chance_level(pts([0.75, 0.75, 0.75]), 2, pts([0.5, 1.0])) is not None
    assert health.chance_level(pts([0.76, 0.75, 0.75]), 2, pts([0.5, 1.0])) is None


def test_a_train_accuracy_above_one_makes_both_percent() -> None:
    # val 0.9 looks like a fraction, but train says percent: 0.9 % on 100 classes is chance.
    found = health.chance_level(pts([0.9, 0.9, 0.9]), 100, pts([5.0, 40.0]))
    assert found is not None and "near chance 1 (100 classes)" in found.evidence


def test_only_the_last_window_points_count() -> None:
    assert health.chance_level(pts([0.9, 0.1, 0.1, 0.1]), 10, RISING) is not None
    assert health.chance_level(pts([0.1, 0.1]), 10, RISING) is None
    assert health.chance_level(pts([0.1, 0.1, 0.1]), 10, RISING, window=4) is None


def test_no_class_count_means_two_classes() -> None:
    found = health.chance_level(pts([0.7, 0.7, 0.7]), None, RISING)
    assert found is not None and "near chance 0.5 (2 classes)" in found.evidence
    assert health.chance_level(pts([0.76, 0.7, 0.7]), None, RISING) is None


def test_training_must_have_risen() -> None:
    val = pts([0.1, 0.1, 0.1])
    assert health.chance_level(val, 10, pts([0.4, 0.4])) is None  # flat is not rising
    assert health.chance_level(val, 10, pts([0.4, 0.41])) is not None
    assert health.chance_level(val, 10, pts([0.4])) is None  # one point shows no trend
    assert health.chance_level(val, 10, None) is not None  # no train accuracy: not required


def test_a_nan_validation_value_is_not_near_chance() -> None:
    assert health.chance_level(pts([0.1, NAN, 0.1]), 10, RISING) is None


# --- zero metric: mAP/mIoU exactly 0 everywhere while the loss fell >= 5 % ------------------

ZEROS = pts([0.0, 0.0])


def test_a_loss_fall_of_exactly_five_percent_counts() -> None:
    loss = pts([100.0, 100.0, 95.0, 95.0])
    found = health.zero_metric_while_loss_falls(ZEROS, loss, name="val/miou")
    assert found is not None and found.kind == "zero_metric"
    assert found.evidence == "val/miou = 0 at all 2 evaluations while loss fell 100 -> 95"


def test_a_loss_fall_just_under_five_percent_does_not() -> None:
    loss = pts([100.0, 100.0, 95.01, 95.01])
    assert health.zero_metric_while_loss_falls(ZEROS, loss) is None


def test_the_quarters_are_compared_not_the_halves() -> None:
    # 8 points, quarters of 2: 100 -> 90 (a fall). Halves would compare 100 -> 100.
    loss = pts([100.0, 100.0, 110.0, 110.0, 100.0, 80.0, 90.0, 90.0])
    found = health.zero_metric_while_loss_falls(ZEROS, loss)
    assert found is not None and found.evidence.endswith("loss fell 100 -> 90")


def test_one_nonzero_evaluation_clears_it() -> None:
    loss = pts([2.0, 1.5, 1.0, 0.5])
    assert health.zero_metric_while_loss_falls(pts([0.0, 0.0, 0.001]), loss) is None
    assert health.zero_metric_while_loss_falls(pts([-0.001, 0.0]), loss) is None


def test_it_needs_two_evaluations_and_four_finite_losses() -> None:
    loss = pts([2.0, 1.5, 1.0, 0.5])
    assert health.zero_metric_while_loss_falls(pts([0.0]), loss) is None
    assert health.zero_metric_while_loss_falls(ZEROS, loss[:3]) is None
    assert health.zero_metric_while_loss_falls(ZEROS, pts([2.0, NAN, 1.0, 0.5])) is None
    assert health.zero_metric_while_loss_falls(ZEROS, pts([2.0, NAN, 1.5, 1.0, 0.5])) is not None


def test_a_loss_at_zero_or_below_never_counts_as_falling() -> None:
    assert health.zero_metric_while_loss_falls(ZEROS, pts([0.0, 0.0, -1.0, -1.0])) is None


# --- overfitting: train minus val at the latest evaluation >= 0.2 of the scale ---------------


def test_a_gap_of_exactly_twenty_points_is_overfitting() -> None:
    found = health.overfitting(pts([90.0]), pts([70.0], start=7))
    assert found is not None and found.kind == "overfitting"
    assert found.evidence == "train acc 90 vs val acc 70 at step 7"


def test_a_gap_just_under_twenty_points_is_not() -> None:
    assert health.overfitting(pts([90.0]), pts([70.01])) is None


@pytest.mark.parametrize("val", [0.8, 0.75, 0.71])
def test_fraction_gaps_between_ten_and_twenty_points_are_not(val: float) -> None:
    # A 0.1 threshold would call these overfitting.
    assert health.overfitting(pts([0.9]), pts([val])) is None


def test_only_the_latest_points_are_compared() -> None:
    assert health.overfitting(pts([0.99, 0.6]), pts([0.1, 0.55])) is None
    assert health.overfitting(pts([0.5, 0.99]), pts([0.9, 0.6])) is not None


def test_fractions_and_percents_are_told_apart_by_the_larger_value() -> None:
    assert health.overfitting(pts([0.95]), pts([0.7])) is not None  # 25 points on 0-1
    assert health.overfitting(pts([1.2]), pts([0.9])) is None  # 1.2 %: percent scale, 0.3 pt


def test_overfitting_needs_both_histories_and_finite_values() -> None:
    assert health.overfitting([], pts([0.1])) is None
    assert health.overfitting(pts([0.9]), []) is None
    assert health.overfitting(pts([NAN]), pts([0.1])) is None
    assert health.overfitting(pts([0.9]), pts([NAN])) is None


# --- judge: which histories reach which rule, under which metric name ------------------------


def rising_acc(n: int = 5) -> list[tuple[float, float]]:
    return pts([0.1 + 0.01 * i for i in range(n)])  # rising, never 20 points above val


def test_judge_names_the_metric_of_each_finding() -> None:
    series = {
        "train/loss": pts([3.0 - 0.01 * i for i in range(60)]),
        "train/acc": pts([0.5, 0.7, 0.95]),
        "val/acc": pts([0.6, 0.65, 0.7]),
        "val/map": pts([0.0, 0.0, 0.0]),
        "val/miou": pts([0.0, 0.1]),
    }
    found = [(name, f.kind) for name, f in judge(series)]
    assert found == [("val/acc", "overfitting"), ("val/map", "zero_metric")]


def test_judge_reports_a_stalled_loss_under_its_own_name() -> None:
    found = judge({"loss": pts([1.0] * 60)})
    assert [(name, f.kind) for name, f in found] == [("loss", "stalled")]
    assert found[0][1].evidence == "loss mean 1 -> 1 over steps 30-59"


def test_train_loss_wins_over_a_generic_loss() -> None:
    found = judge({"train/loss": pts([3.0 - 0.05 * i for i in range(60)]), "loss": pts([1.0] * 60)})
    assert found == []


def test_summed_loss_terms_are_judged_when_no_total_is_logged() -> None:
    # Each term alone is flat-ish, their sum is flat: stalled, named after the last term.
    series = {"train/box_loss": pts([1.0, 2.0] * 30), "train/cls_loss": pts([2.0, 1.0] * 30)}
    found = judge(series)
    assert [(name, f.kind) for name, f in found] == [("train/cls_loss", "stalled")]
    assert found[0][1].evidence == "loss mean 3 -> 3 over steps 30-59"


def test_summed_terms_align_from_the_newest_point() -> None:
    # The second term starts later: sums are taken over the rows both have, newest first.
    falling = [2.0 - 0.03 * i for i in range(60)]
    series = {"train/box_loss": pts([9.0] * 10 + falling), "train/cls_loss": pts(falling, start=10)}
    assert judge(series) == []  # 2 x falling: no finding, the early 9.0s are not summed in


def test_unknown_class_count_flags_only_what_is_broken_for_any_classifier() -> None:
    # 12 % would be near chance for 10 classes; with no class count it must not be flagged.
    assert judge({"train/acc": rising_acc(), "val/acc": pts([0.12, 0.12, 0.12])}) == []
    found = judge({"train/acc": rising_acc(), "val/acc": pts([0.015, 0.015, 0.015])})
    assert [(name, f.kind) for name, f in found] == [("val/acc", "chance")]
    assert found[0][1].evidence == (
        "val acc 0.015 at step 2 stays near zero while training improves (class count unknown)"
    )
    assert judge({"train/acc": rising_acc(), "val/acc": pts([0.0151, 0.015, 0.015])}) == []


def test_a_known_class_count_is_passed_to_the_rule() -> None:
    series = {"train/acc": rising_acc(), "val/acc": pts([0.12, 0.12, 0.12])}
    found = judge(series, num_classes=10)
    assert [f.evidence for _, f in found] == [
        "val acc 0.12 at step 2 is near chance 0.1 (10 classes) for 3 evaluations"
    ]
    assert judge(series, num_classes=100) == []


def test_chance_needs_rising_train_accuracy_or_a_falling_loss() -> None:
    val = pts([0.001, 0.001, 0.001])
    assert judge({"val/acc": val}) == []
    assert judge({"val/acc": val, "train/loss": pts([1.0, 1.0, 1.0, 1.0])}) == []
    falling = judge({"val/acc": val, "train/loss": pts([1.0, 1.0, 0.9, 0.9])})
    assert [f.kind for _, f in falling] == ["chance"]
    # three losses are too few to call a trend
    assert judge({"val/acc": val, "train/loss": pts([1.0, 0.9, 0.8])}) == []
    # NaN losses do not count toward the four
    assert judge({"val/acc": val, "train/loss": pts([1.0, NAN, 0.9, 0.8])}) == []


def test_a_falling_loss_compares_its_first_and_last_quarters() -> None:
    val = pts([0.001, 0.001, 0.001])
    # 8 losses: quarters 1.0 -> 1.0 (flat ends) even though the middle dipped.
    assert (
        judge({"val/acc": val, "train/loss": pts([1.0, 1.0, 0.5, 0.5, 0.5, 0.5, 1.0, 1.0])}) == []
    )
    # quarters 1.0 -> 0.95: fell
    assert (
        len(judge({"val/acc": val, "train/loss": pts([1.0, 1.0, 2.0, 2.0, 2.0, 2.0, 0.95, 0.95])}))
        == 1
    )


def test_zero_metrics_need_a_loss_history() -> None:
    assert judge({"val/map": pts([0.0, 0.0, 0.0])}) == []
    found = judge({"val/map_50": pts([0.0, 0.0]), "train/loss": pts([2.0, 1.5, 1.0, 0.5])})
    assert [(name, f.kind) for name, f in found] == [("val/map_50", "zero_metric")]


def test_wants_names_exactly_the_histories_judge_reads() -> None:
    for name in (
        "train/loss",
        "loss",
        "train/acc",
        "val/acc",
        "val/map",
        "val/map_50",
        "val/miou",
        "train/box_loss",
        "train/dfl_loss",
    ):
        assert wants(name), name
    for name in (
        "val/loss",
        "lr",
        "val/acc_top5",
        "val/pixel_acc",
        "train/lossy",
        "box_loss",
        "eta_s",
    ):
        assert not wants(name), name


# --- GPU usage while a task runs ------------------------------------------------------------


def utils(**counts: int) -> list[float]:
    """`utils(v10=6, v50=18)`: 6 samples at 10 %, 18 at 50 % (`_` for a decimal point)."""
    out: list[float] = []
    for key, n in counts.items():
        out += [float(key[1:].replace("_", "."))] * n
    return out


def test_a_fifth_at_each_extreme_is_a_swing() -> None:
    found = gpu_findings(utils(v10=6, v90=6, v50=18))
    assert [f.kind for f in found] == ["gpu_swing"]
    assert found[0].evidence == (
        "GPU utilization swings 0-100 %: 20% of the last 30 samples "
        "<= 10 %, 20% >= 90 % (input-bound?)"
    )


@pytest.mark.parametrize(
    "samples",
    [
        utils(v10=5, v90=6, v50=19),  # one short at the bottom
        utils(v10=6, v90=5, v50=19),  # one short at the top
        utils(v10_01=6, v90=6, v50=18),  # just above 10 % is not low
        utils(v10=6, v89_99=6, v50=18),  # just below 90 % is not high
    ],
)
def test_just_short_of_a_swing_is_not_one(samples: list[float]) -> None:
    assert [f.kind for f in gpu_findings(samples)] == []


def test_a_gpu_pinned_at_one_hundred_is_healthy() -> None:
    assert gpu_findings([100.0] * 60) == []
    assert gpu_findings([95.0] * 60) == []


def test_an_idle_gpu_is_low_not_swinging() -> None:
    found = gpu_findings([0.0] * 30)
    assert [f.kind for f in found] == ["gpu_low"]
    assert found[0].evidence == (
        "GPU utilization averages 0 % over the last 30 samples while the task logs progress"
    )


def test_a_mean_of_exactly_thirty_is_not_low() -> None:
    assert gpu_findings([30.0] * 30) == []
    found = gpu_findings([29.99] * 30)
    assert [f.kind for f in found] == ["gpu_low"]
    assert "averages 30 % over the last 30 samples" in found[0].evidence


def test_the_mean_is_a_mean() -> None:
    # mean 29, median 50: low by its mean only.
    found = gpu_findings([50.0] * 16 + [5.0] * 14)
    assert [f.kind for f in found] == ["gpu_low"]
    assert "averages 29 % over the last 30 samples" in found[0].evidence


def test_thirty_finite_samples_are_needed() -> None:
    assert gpu_findings([0.0] * 29) == []
    assert gpu_findings([0.0] * 29 + [NAN, math.inf]) == []
    assert [f.kind for f in gpu_findings([0.0] * 30 + [NAN])] == ["gpu_low"]
    assert "of the last 30 samples" in gpu_findings(utils(v0=15, v100=15) + [NAN])[0].evidence


# --- severity --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(tasks_health.ERROR_KINDS))
def test_broken_run_kinds_are_errors(kind: str) -> None:
    assert severity_of(kind, rerun=False) == severity_of(kind, rerun=True) == "error"


def test_error_kinds_are_exactly_these() -> None:
    assert tasks_health.ERROR_KINDS == {
        "oom",
        "traceback",
        "nan",
        "inf",
        "nccl",
        "cuda_error",
        "killed",
    }


def test_a_download_matters_only_on_a_rerun() -> None:
    assert severity_of("download", rerun=True) == "warning"
    assert severity_of("download", rerun=False) == "info"


@pytest.mark.parametrize(
    "kind", ["stalled", "chance", "zero_metric", "overfitting", "gpu_low", "gpu_swing"]
)
def test_windowed_and_gpu_findings_are_warnings(kind: str) -> None:
    assert severity_of(kind, rerun=False) == "warning"


# --- cases found by mutation testing (benchmarks/mutation.py) ---------------------------------


def test_values_between_one_and_two_are_percents() -> None:
    # 1.5 % val and 1.2 -> 1.8 % train on 100 classes: chance is 1 %, and 1.5 is at its limit.
    found = health.chance_level(pts([1.5, 1.5, 1.5]), 100, pts([1.2, 1.8]))
    assert found is not None and "near chance 1 (100 classes)" in found.evidence


def test_training_is_judged_first_to_last_not_first_to_second() -> None:
    val = pts([0.1, 0.1, 0.1])
    assert health.chance_level(val, 10, pts([0.4, 0.5, 0.3])) is None  # fell overall
    assert health.chance_level(val, 10, pts([0.4, 0.3, 0.5])) is not None  # rose overall


def test_chance_evidence_quotes_the_latest_value() -> None:
    found = health.chance_level(pts([0.11, 0.13, 0.14, 0.12]), 10, RISING)
    assert found is not None
    assert found.evidence == (
        "val acc 0.12 at step 3 is near chance 0.1 (10 classes) for 3 evaluations"
    )


def test_an_accuracy_of_exactly_one_is_a_fraction_for_overfitting() -> None:
    found = health.overfitting(pts([1.0]), pts([0.75]))
    assert found is not None and found.evidence == "train acc 1 vs val acc 0.75 at step 0"


def test_the_zero_metric_is_named_val_map_by_default() -> None:
    found = health.zero_metric_while_loss_falls(ZEROS, pts([2.0, 1.5, 1.0, 0.5]))
    assert found is not None and found.evidence.startswith("val/map = 0 at all 2 evaluations")


def test_a_quarter_of_four_to_seven_losses_is_one_point() -> None:
    # quarters of one point: 100 -> 95, a 5 % fall. Quarters of two would be 95 -> 97.5.
    found = health.zero_metric_while_loss_falls(ZEROS, pts([100.0, 90.0, 100.0, 95.0]))
    assert found is not None and found.evidence.endswith("loss fell 100 -> 95")


def test_a_falling_train_accuracy_rules_out_chance_even_while_the_loss_falls() -> None:
    falling_loss = pts([2.0, 1.8, 1.6, 1.4])
    series = {
        "train/acc": pts([0.10, 0.09, 0.08]),
        "val/acc": pts([0.001] * 3),
        "train/loss": falling_loss,
    }
    assert judge(series) == []
    assert judge(series, num_classes=1000) == []
    # the same histories with a rising train accuracy are near chance
    series["train/acc"] = pts([0.08, 0.09, 0.10])
    assert [f.kind for _, f in judge(series)] == ["chance"]


def test_the_train_accuracy_tells_that_accuracies_are_percents() -> None:
    # val 0.9 alone reads as a fraction (90 %); with train at 5 -> 40 (%) it is 0.9 %
    series = {"train/acc": pts([5.0, 40.0]), "val/acc": pts([0.9, 0.9, 0.9])}
    assert [f.evidence for _, f in judge(series, num_classes=100)] == [
        "val acc 0.9 at step 2 is near chance 1 (100 classes) for 3 evaluations",
        "train acc 40 vs val acc 0.9 at step 2",
    ]


@pytest.mark.parametrize(
    ("loss", "fell"),
    [
        ([1.0, 0.9, 1.2, 0.95], True),  # 4 points: quarters of 1, 1.0 -> 0.95
        ([1.0, 2.0, 0.5, 0.5, 0.5, 0.5, 1.2, 1.2], True),  # 8 points: quarters of 2, 1.5 -> 1.2
        ([1.0, 0.9, 1.0, 0.95, 1.1, 1.0, 1.0, 1.0], False),  # quarters of 2: 0.95 -> 1.0
    ],
)
def test_whether_the_loss_fell_compares_quarters(loss: list[float], fell: bool) -> None:
    found = judge({"val/acc": pts([0.001] * 3), "train/loss": pts(loss)})
    assert [f.kind for _, f in found] == (["chance"] if fell else [])


def test_summed_loss_terms_are_named_after_the_last_of_three() -> None:
    series = {
        "train/box_loss": pts([1.0] * 60),
        "train/cls_loss": pts([2.0] * 60),
        "train/dfl_loss": pts([0.5] * 60),
    }
    found = judge(series)
    assert [(name, f.evidence) for name, f in found] == [
        ("train/dfl_loss", "loss mean 3.5 -> 3.5 over steps 30-59")
    ]


def test_a_zero_metric_finding_names_its_metric() -> None:
    found = judge({"val/miou": pts([0.0, 0.0]), "train/loss": pts([2.0, 1.5, 1.0, 0.5])})
    assert [(name, f.evidence) for name, f in found] == [
        ("val/miou", "val/miou = 0 at all 2 evaluations while loss fell 2 -> 0.5")
    ]


# --- stalled: how the window and its halves are cut, at their edges -------------------------


def test_a_repeated_step_still_splits_by_step() -> None:
    # Steps 0, 0, 1, ..., 99 never go back: the window is steps 50-99, as without the repeat
    # (split by order, it would start at step 49, one of the early 500s).
    values = [500.0] * 51 + [100.0] * 25 + [99.01] * 25
    found = health.stalled(list(zip([0.0] + [float(s) for s in range(100)], values, strict=True)))
    assert found is not None and found.evidence == "loss mean 100 -> 99.01 over steps 50-99"


def test_steps_that_go_back_every_other_point_split_by_order() -> None:
    # 1, 0, 3, 2, ...: a counter that goes back (two writers, say) is split 25 against 25 by
    # order; split by step, the two halves would each take a point of the other.
    values = [500.0] * 50 + [100.0] * 25 + [99.01] * 25
    found = health.stalled([(float(i ^ 1), v) for i, v in enumerate(values)])
    assert found is not None and found.evidence == "loss mean 100 -> 99.01 over steps 51-98"


def test_the_window_is_the_later_half_of_the_steps_covered_not_of_the_points() -> None:
    # A run resumed at step 100 after logging its step 0: steps 0-199, so the window starts at
    # 100 (the midpoint of the first and the last step, not of the second and the last).
    found = health.stalled([(0.0, 1.0)] + [(float(s), 1.0) for s in range(100, 200)])
    assert found is not None and found.evidence == "loss mean 1 -> 1 over steps 100-199"


def test_a_step_exactly_at_either_midpoint_belongs_to_the_later_side() -> None:
    # Steps 0-100: the run's midpoint 50 opens the window, the window's midpoint 75 opens its
    # later half. Step 50 (110) and step 75 (90) each move a mean if put on the other side.
    def loss(step: int) -> float:
        return 500.0 if step < 50 else 110.0 if step == 50 else 90.0 if step == 75 else 100.0

    found = health.stalled([(float(s), loss(s)) for s in range(101)])
    assert found is not None and found.evidence == "loss mean 100.4 -> 99.62 over steps 50-100"


def test_the_window_is_split_at_the_midpoint_of_its_first_and_last_step() -> None:
    # Window: step 50, then 70-100; its midpoint is 75 (not 85, from its second step).
    steps = [*range(50), 50, *range(70, 101)]
    found = health.stalled([(float(s), 2.0 + 0.001 * s) for s in steps])
    assert found is not None and found.evidence == "loss mean 2.068 -> 2.087 over steps 50-100"


@pytest.mark.parametrize(
    ("steps", "judged"),
    [
        ([*range(50), 50, *range(76, 101)], False),  # earlier half of the window: 1 point
        ([*range(50), 50, 51, *range(76, 101)], True),  # 2 points
        ([*range(75), 100], False),  # later half: 1 point
        ([*range(75), 99, 100], True),  # 2 points
    ],
)
def test_each_half_of_the_window_needs_two_points(steps: list[int], judged: bool) -> None:
    found = health.stalled([(float(s), 1.0) for s in steps])
    assert (found.evidence if found else None) == (
        "loss mean 1 -> 1 over steps 50-100" if judged else None
    )


def test_at_least_eight_points_whatever_min_points_says() -> None:
    assert health.stalled(pts([1.0] * 7), min_points=1) is None
    found = health.stalled(pts([1.0] * 8), min_points=1)
    assert found is not None and found.evidence == "loss mean 1 -> 1 over steps 4-7"


@pytest.mark.parametrize("name", ["train/loss", "loss", "train/box_loss"])
def test_histories_are_judged_stalled_over_the_whole_run_not_the_window(name: str) -> None:
    # 1000 steps: 3.0, then 2.0 from step 500, 1.0 from step 700. The last 256 points are all
    # 1.0 (stalled on their own), but over the later half of the run (steps 500-999) the loss
    # halved: no finding, for a total loss and for a loss term alike.
    history = MetricSeries()
    for step in range(1000):
        history.add(3.0 if step < 500 else 2.0 if step < 700 else 1.0, step=step, epoch=None)
    assert [(n, f.evidence) for n, f in judge({name: history.window})] == [
        (name, "loss mean 1 -> 1 over steps 872-999")
    ]
    assert judge_histories({name: history}) == []
