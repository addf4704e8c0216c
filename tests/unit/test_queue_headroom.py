"""The headroom rule over scripted GPU timelines and over recorded sessions."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.samples import GpuSample, GpuTick
from collectors.session.session_reader import SessionReader
from gpuherd.queue.headroom import (
    GpuReading,
    HeadroomWindow,
    Launch,
    Reservation,
    decide,
    reserved_by_gpu,
)
from gpuherd.queue.jobs import Job, JobSpec, JobState

T0 = 1_764_130_000.0
GIB = 1 << 30
MARGIN = GIB
SESSIONS = Path(__file__).resolve().parents[1] / "data" / "sessions"


def uuid(index: int) -> str:
    return f"GPU-0000000{index}-aaaa-bbbb-cccc-dddddddddddd"


def reading(
    t: float,
    index: int = 0,
    free: int = 79 * GIB,
    util: float | None = 0.0,
    total: int = 80 * GIB,
    problem: str | None = None,
) -> GpuReading:
    return GpuReading(T0 + t, uuid(index), index, total, free, util, problem)


def job(
    job_id: int,
    need: int,
    *,
    position: int | None = None,
    gpus: int = 1,
    max_util: float = 10.0,
    after: int | None = None,
    created_at: float = T0,
    state: JobState = JobState.WAITING,
) -> Job:
    spec = JobSpec(
        argv=("train.py",), cwd="/", gpus=gpus, vram_bytes=need, max_util_pct=max_util, after=after
    )
    return Job(
        id=job_id,
        position=job_id if position is None else position,
        spec=spec,
        state=state,
        created_at=created_at,
    )


def steady(seconds: range, **per_gpu: dict) -> HeadroomWindow:
    """A window fed one round per second; `per_gpu` maps "g0" to reading() keywords."""
    window = HeadroomWindow()
    gpus = per_gpu or {"g0": {}}
    for t in seconds:
        window.add([reading(t, int(name[1:]), **kw) for name, kw in gpus.items()])
    return window


def one(window: HeadroomWindow, jobs: list[Job], now_s: float, **kw) -> tuple:
    decision = decide(window, jobs, kw.pop("reservations", []), T0 + now_s, **kw)
    return decision.launches, decision.waiting


# --- thresholds, both sides -------------------------------------------------------------------


def test_free_exactly_need_plus_margin_qualifies_and_one_byte_less_does_not() -> None:
    need = 20 * GIB
    window = steady(range(11), g0={"free": need + MARGIN})
    launches, waiting = one(window, [job(1, need)], 10)
    assert launches == (Launch(1, (uuid(0),), (0,)),) and waiting == {}

    window = steady(range(11), g0={"free": need + MARGIN - 1})
    launches, waiting = one(window, [job(1, need)], 10)
    assert launches == ()
    assert waiting == {1: "GPU 0: 21.0 GiB free; needs 20 GiB + 1 GiB margin"}


def test_util_must_be_under_the_limit_not_at_it() -> None:
    window = steady(range(11), g0={"util": 10.0})
    launches, waiting = one(window, [job(1, GIB)], 10)
    assert launches == ()
    assert waiting == {1: "GPU 0: 10 % busy (limit 10 %)"}

    window = steady(range(11), g0={"util": 9.99})
    assert one(window, [job(1, GIB)], 10)[0] == (Launch(1, (uuid(0),), (0,)),)


def test_busy_reason_names_the_percent_and_limit() -> None:
    window = steady(range(11), g0={"util": 85.0})
    assert one(window, [job(1, GIB)], 10)[1] == {1: "GPU 0: 85 % busy (limit 10 %)"}


def test_unknown_utilization_lets_memory_decide() -> None:
    window = steady(range(11), g0={"util": None})
    assert one(window, [job(1, 20 * GIB)], 10)[0] == (Launch(1, (uuid(0),), (0,)),)


# --- the settle period ------------------------------------------------------------------------


def test_settle_exactly_covered_qualifies_one_reading_short_does_not() -> None:
    covered = steady(range(0, 11))
    assert one(covered, [job(1, 20 * GIB)], 10)[0] == (Launch(1, (uuid(0),), (0,)),)

    short = steady(range(1, 11))
    launches, waiting = one(short, [job(1, 20 * GIB)], 10)
    assert launches == ()
    assert waiting == {1: "GPU 0: 79 GiB free for 9 s of 10 s; needs 20 GiB + 1 GiB margin"}


def test_a_gpu_seen_for_4_s_of_10_says_so() -> None:
    window = steady(range(6, 11), g0={"free": 30 * GIB + GIB // 10})
    launches, waiting = one(window, [job(1, 20 * GIB)], 10)
    assert launches == ()
    assert waiting == {1: "GPU 0: 30.1 GiB free for 4 s of 10 s; needs 20 GiB + 1 GiB margin"}


def test_a_dip_in_the_middle_of_the_window_restarts_it() -> None:
    window = HeadroomWindow()
    for t in range(16):
        window.add([reading(t, free=10 * GIB if t == 5 else 40 * GIB)])
    # At t=10 the window [0, 10] holds the dip at 5: held since 6, so 4 s.
    decision = decide(window, [job(1, 20 * GIB)], [], T0 + 10)
    assert decision.launches == ()
    assert decision.waiting[1].startswith("GPU 0: 40 GiB free for 4 s of 10 s")
    # Readings after `now` are not used, so the same window answers for an earlier `now`.
    assert decide(window, [job(1, 20 * GIB)], [], T0 + 15).launches == ()
    window.add([reading(16, free=40 * GIB)])
    assert decide(window, [job(1, 20 * GIB)], [], T0 + 16).launches == (
        Launch(1, (uuid(0),), (0,)),
    )


def test_a_busy_reading_in_the_middle_restarts_it_too() -> None:
    window = HeadroomWindow()
    for t in range(11):
        window.add([reading(t, util=50.0 if t == 7 else 0.0)])
    assert decide(window, [job(1, GIB)], [], T0 + 10).waiting == {
        1: "GPU 0: 79 GiB free for 2 s of 10 s; needs 1 GiB + 1 GiB margin"
    }


def test_a_gap_longer_than_max_gap_breaks_the_period() -> None:
    window = HeadroomWindow(max_gap_s=5.0)
    for t in (0, 1, 2, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18):
        window.add([reading(t)])
    assert decide(window, [job(1, GIB)], [], T0 + 12).launches == ()  # 2 -> 8 is 6 s
    assert decide(window, [job(1, GIB)], [], T0 + 18).launches == (Launch(1, (uuid(0),), (0,)),)


def test_a_gpu_that_stopped_reporting_does_not_qualify() -> None:
    window = steady(range(11))
    # Up to max_gap_s (5 s) of silence the last reading still stands.
    assert decide(window, [job(1, GIB)], [], T0 + 15).launches == (Launch(1, (uuid(0),), (0,)),)
    assert decide(window, [job(1, GIB)], [], T0 + 15.5).waiting == {1: "GPU 0: no reading for 5 s"}


def test_a_lost_gpu_does_not_qualify_and_missing_from_a_round_counts_as_lost() -> None:
    window = HeadroomWindow()
    for t in range(11):
        if t == 10:
            window.add([reading(t, 0, util=90.0)])  # GPU 1 dropped out of the round
        else:
            window.add([reading(t, 0, util=90.0), reading(t, 1, free=40 * GIB)])
    launches, waiting = one(window, [job(1, 20 * GIB)], 10)
    assert launches == ()
    assert waiting == {1: "GPU 0: 90 % busy (limit 10 %)"}  # the nearer miss is named
    launches, waiting = one(window, [job(1, 20 * GIB, max_util=100)], 10)
    assert launches == (Launch(1, (uuid(0),), (0,)),)

    lost = GpuTick(
        T0 + 11, (GpuSample(0, uuid(0), "H100", memory_total_bytes=80 * GIB, error="GPU is lost"),)
    )
    window.add(HeadroomWindow.readings_from_tick(lost))
    launches, waiting = one(window, [job(1, 20 * GIB, max_util=100)], 11)
    assert launches == ()
    assert waiting == {1: "GPU 0: GPU is lost"}


def test_a_gpu_lost_before_its_size_was_known_is_not_called_too_small() -> None:
    window = HeadroomWindow()
    tick = GpuTick(T0, (GpuSample(0, "unknown-0", "unknown", error="Unknown Error"),))
    window.add(HeadroomWindow.readings_from_tick(tick))
    assert one(window, [job(1, 20 * GIB)], 0)[1] == {1: "GPU 0: Unknown Error"}


def test_readings_from_tick_free_is_total_minus_used() -> None:
    tick = GpuTick(
        T0,
        (
            GpuSample(
                0,
                uuid(0),
                "H100",
                memory_used_bytes=5 * GIB,
                memory_total_bytes=80 * GIB,
                gpu_util_pct=3.0,
            ),
            GpuSample(1, uuid(1), "H100", memory_used_bytes=None, memory_total_bytes=80 * GIB),
            GpuSample(2, "unknown-2", "unknown", error="Unknown Error"),
        ),
    )
    assert HeadroomWindow.readings_from_tick(tick) == [
        GpuReading(T0, uuid(0), 0, 80 * GIB, 75 * GIB, 3.0),
        GpuReading(T0, uuid(1), 1, 80 * GIB, 0, None, "memory not reported"),
        GpuReading(T0, "unknown-2", 2, 0, 0, None, "Unknown Error"),
    ]


def test_the_window_keeps_only_the_settle_period_plus_one_reading() -> None:
    window = HeadroomWindow(settle_s=10.0)
    for t in range(1000):
        window.add([reading(t, 0), reading(t, 1)])
    kept = window.readings(uuid(0))
    assert [r.taken_at - T0 for r in kept] == [float(t) for t in range(989, 1000)]
    window.add([reading(500, 0)])  # late: ignored
    assert window.readings(uuid(0)) == kept


# --- choosing GPUs ----------------------------------------------------------------------------


def test_best_fit_picks_the_gpu_with_least_headroom_left() -> None:
    window = steady(
        range(11), g0={"free": 70 * GIB}, g1={"free": 22 * GIB}, g2={"free": 21 * GIB - 1}
    )
    assert one(window, [job(1, 20 * GIB)], 10)[0] == (Launch(1, (uuid(1),), (1,)),)
    assert one(window, [job(1, 40 * GIB)], 10)[0] == (Launch(1, (uuid(0),), (0,)),)


def test_best_fit_uses_the_lowest_free_over_the_window() -> None:
    # GPU 1 has more free now but dipped to 30 GiB: it is the tighter fit.
    window = HeadroomWindow()
    for t in range(11):
        window.add(
            [reading(t, 0, free=35 * GIB), reading(t, 1, free=30 * GIB if t == 3 else 60 * GIB)]
        )
    assert one(window, [job(1, 20 * GIB)], 10)[0] == (Launch(1, (uuid(1),), (1,)),)


def test_two_gpus_are_picked_by_best_fit_and_listed_in_index_order() -> None:
    window = steady(
        range(11),
        g0={"free": 70 * GIB},
        g1={"free": 30 * GIB},
        g2={"free": 25 * GIB},
        g3={"util": 85.0},
    )
    assert one(window, [job(1, 20 * GIB, gpus=2)], 10)[0] == (
        Launch(1, (uuid(1), uuid(2)), (1, 2)),
    )


def test_two_gpus_needed_one_qualifies() -> None:
    window = steady(range(11), g0={"free": 70 * GIB}, g1={"util": 85.0})
    launches, waiting = one(window, [job(1, 20 * GIB, gpus=2)], 10)
    assert launches == ()
    assert waiting == {1: "needs 2 GPUs, 1 qualifies; GPU 1: 85 % busy (limit 10 %)"}


def test_a_job_larger_than_any_gpu_says_so() -> None:
    window = steady(range(11), g0={}, g1={})
    assert one(window, [job(1, 100 * GIB)], 10)[1] == {
        1: "needs 100 GiB + 1 GiB margin, more than any GPU here holds (80 GiB)"
    }
    assert one(window, [job(1, 20 * GIB, gpus=3)], 10)[1] == {1: "needs 3 GPUs, this host shows 2"}
    mixed = steady(range(11), g0={}, g1={"total": 40 * GIB, "free": 39 * GIB})
    assert one(mixed, [job(1, 50 * GIB, gpus=2)], 10)[1] == {
        1: "needs 2 GPUs with 50 GiB + 1 GiB margin; only 1 of 2 are that large"
    }


def test_no_readings_yet() -> None:
    assert one(HeadroomWindow(), [job(1, GIB)], 0)[1] == {1: "no GPU readings yet"}


# --- reservations -----------------------------------------------------------------------------


def test_other_users_reservations_subtract_from_their_gpu() -> None:
    window = steady(range(11), g0={"free": 50 * GIB}, g1={"free": 40 * GIB})
    theirs = [Reservation(uuid(1), 10 * GIB, "bob/7"), Reservation(uuid(1), 9 * GIB, "bob/8")]
    # GPU 1: 40 - 19 = 21 GiB left, exactly 20 + 1: still the best fit.
    assert one(window, [job(1, 20 * GIB)], 10, reservations=theirs)[0] == (
        Launch(1, (uuid(1),), (1,)),
    )
    theirs.append(Reservation(uuid(1), 1, "carol/1"))
    assert one(window, [job(1, 20 * GIB)], 10, reservations=theirs)[0] == (
        Launch(1, (uuid(0),), (0,)),
    )
    theirs.append(Reservation(uuid(0), 30 * GIB, "carol/2"))
    assert one(window, [job(1, 20 * GIB)], 10, reservations=theirs)[1] == {
        1: "GPU 1: 21.0 GiB free after 19.0 GiB reserved; needs 20 GiB + 1 GiB margin"
    }
    # The nearest miss is named: GPU 1 lacks one byte, GPU 0 a whole GiB.
    theirs.pop(2)
    theirs.append(Reservation(uuid(1), GIB, "carol/1"))
    assert one(window, [job(1, 20 * GIB)], 10, reservations=theirs)[1] == {
        1: "GPU 0: 20 GiB free after 30 GiB reserved; needs 20 GiB + 1 GiB margin"
    }


def test_launches_in_one_decision_reserve_for_the_next_jobs() -> None:
    window = steady(range(11), g0={"free": 45 * GIB})
    launches, waiting = one(window, [job(1, 20 * GIB), job(2, 20 * GIB), job(3, 20 * GIB)], 10)
    assert launches == (Launch(1, (uuid(0),), (0,)), Launch(2, (uuid(0),), (0,)))
    assert waiting == {3: "GPU 0: 5 GiB free after 40 GiB reserved; needs 20 GiB + 1 GiB margin"}


def test_a_reason_given_before_a_launch_is_given_again_after_it() -> None:
    window = steady(range(11), g0={"free": 45 * GIB})
    jobs = [job(1, 50 * GIB), job(2, 20 * GIB), job(3, 50 * GIB)]
    launches, waiting = one(window, jobs, 10)
    assert launches == (Launch(2, (uuid(0),), (0,)),)
    assert waiting == {
        1: "GPU 0: 45 GiB free; needs 50 GiB + 1 GiB margin",
        3: "GPU 0: 25 GiB free after 20 GiB reserved; needs 50 GiB + 1 GiB margin",
    }


def test_alike_jobs_get_the_same_reason() -> None:
    window = steady(range(4, 11), g0={"free": 45 * GIB})
    waiting = one(window, [job(i, 20 * GIB) for i in range(1, 5)], 10)[1]
    assert set(waiting.values()) == {
        "GPU 0: 45 GiB free for 6 s of 10 s; needs 20 GiB + 1 GiB margin"
    }
    assert sorted(waiting) == [1, 2, 3, 4]


def test_reserved_by_gpu_sums_per_uuid() -> None:
    assert reserved_by_gpu(
        [Reservation("a", 1, "x"), Reservation("b", 2, "y"), Reservation("a", 3, "z")]
    ) == {"a": 4, "b": 2}


# --- order, `after`, backfilling --------------------------------------------------------------


def test_queue_order_is_position_not_id() -> None:
    window = steady(range(11), g0={"free": 25 * GIB})
    jobs = [job(1, 20 * GIB, position=2), job(2, 20 * GIB, position=1)]
    launches, waiting = one(window, jobs, 10)
    assert launches == (Launch(2, (uuid(0),), (0,)),)
    assert set(waiting) == {1}


def test_after_waits_for_the_job_to_be_done() -> None:
    window = steady(range(11))
    for state, words in (
        (JobState.RUNNING, "waits for job 1 (running)"),
        (JobState.LAUNCHING, "waits for job 1 (launching)"),
        (JobState.WAITING, "waits for job 1 (waiting)"),
        (
            JobState.FAILED,
            "waits for job 1 (failed): it starts only if that job is run again and succeeds",
        ),
    ):
        first = job(1, 90 * GIB, state=state)  # never fits, so a waiting job 1 stays
        assert one(window, [first, job(2, GIB, after=1)], 10)[1][2] == words
    assert one(window, [job(2, GIB, after=1)], 10)[1] == {2: "waits for job 1 (not in the queue)"}
    done = job(1, GIB, state=JobState.DONE)
    assert one(window, [done, job(2, GIB, after=1)], 10)[0] == (Launch(2, (uuid(0),), (0,)),)


def test_a_later_small_job_passes_a_blocked_big_job_while_the_big_one_is_young() -> None:
    window = steady(range(11), g0={"free": 30 * GIB})
    now = T0 + 10
    big = job(1, 60 * GIB, created_at=now - 1799.5)
    launches, waiting = one(window, [big, job(2, 10 * GIB)], 10)
    assert launches == (Launch(2, (uuid(0),), (0,)),)
    assert waiting == {1: "GPU 0: 30 GiB free; needs 60 GiB + 1 GiB margin"}


def test_after_30_min_the_first_job_holds_the_line() -> None:
    window = steady(range(11), g0={"free": 30 * GIB})
    now = T0 + 10
    big = job(1, 60 * GIB, created_at=now - 1800)
    launches, waiting = one(window, [big, job(2, 10 * GIB), job(3, GIB, after=9)], 10)
    assert launches == ()
    assert waiting == {
        1: "GPU 0: 30 GiB free; needs 60 GiB + 1 GiB margin",
        2: "waits behind job 1, first in line for 30 min",
        3: "waits for job 9 (not in the queue)",
    }
    # A job that can never fit on this host does not hold anyone back.
    huge = job(1, 90 * GIB, created_at=now - 7200)
    assert one(window, [huge, job(2, 10 * GIB)], 10)[0] == (Launch(2, (uuid(0),), (0,)),)
    # Neither does one that waits for another job.
    chained = job(1, 60 * GIB, created_at=now - 7200, after=5)
    assert one(window, [chained, job(2, 10 * GIB)], 10)[0] == (Launch(2, (uuid(0),), (0,)),)


def test_only_waiting_jobs_are_launched() -> None:
    window = steady(range(11))
    jobs = [job(1, GIB, state=s) for s in JobState if s is not JobState.WAITING]
    assert one(window, jobs, 10) == ((), {})


# --- a property over arbitrary timelines ------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 80), st.integers(0, 80), st.sampled_from([0.0, 50.0])),
        min_size=1,
        max_size=25,
    ),
    st.lists(st.integers(0, 40), min_size=1, max_size=6),
    st.integers(0, 30),
)
def test_launches_always_fit_every_reading_of_the_settle_period(
    rounds: list[tuple[int, int, float]], needs: list[int], reserved_gib: int
) -> None:
    window = HeadroomWindow()
    for t, (free0, free1, util) in enumerate(rounds):
        window.add([reading(t, 0, free=free0 * GIB, util=util), reading(t, 1, free=free1 * GIB)])
    now = T0 + len(rounds) - 1
    reservations = [Reservation(uuid(0), reserved_gib * GIB, "other")]
    jobs = [job(i + 1, n * GIB) for i, n in enumerate(needs)]
    decision = decide(window, jobs, reservations, now)
    taken = {uuid(0): reserved_gib * GIB, uuid(1): 0}
    for launch in decision.launches:
        taken[launch.gpu_uuids[0]] += jobs[launch.job_id - 1].spec.vram_bytes
    for gpu in (0, 1):
        if not any(launch.gpu_indices == (gpu,) for launch in decision.launches):
            continue
        period = [r for r in window.readings(uuid(gpu)) if r.taken_at >= now - 10]
        assert len(rounds) >= 11
        assert all(r.free_bytes - taken[uuid(gpu)] >= MARGIN for r in period)
        assert all(r.util_pct is None or r.util_pct < 10 for r in period)
    assert set(decision.waiting) | {x.job_id for x in decision.launches} == set(
        range(1, len(needs) + 1)
    )


# --- replay of recorded sessions --------------------------------------------------------------


def first_launch(
    session: str, need: int, *, max_util: float = 10.0, gpus: int = 1, settle_s: float = 10.0
) -> tuple[float, Launch] | None:
    """Feed a recorded session tick by tick; when does a job of this need first start?"""
    window = HeadroomWindow(settle_s=settle_s)
    reader = SessionReader(SESSIONS / session)
    for tick in reader.gpu_ticks():
        window.add(HeadroomWindow.readings_from_tick(tick))
        decision = decide(
            window,
            [job(1, need, max_util=max_util, gpus=gpus)],
            [],
            tick.taken_at,
            settle_s=settle_s,
        )
        if decision.launches:
            return tick.taken_at, decision.launches[0]
    return None


def by_hand(session: str, gpu: int, need: int, max_util: float, settle_s: float) -> float | None:
    """The same answer read straight from gpu.csv: first t where every row of this GPU in
    [t - settle, t] has free >= need + margin and util under the limit, and one row at or
    before t - settle."""
    rows = []
    with (SESSIONS / session / "gpu.csv").open() as f:
        for row in csv.DictReader(f):
            if int(row["gpu"]) == gpu:
                free = int(row["mem_total_bytes"]) - int(float(row["mem_used_bytes"]))
                util = float(row["util_gpu_pct"]) if row.get("util_gpu_pct") else None
                rows.append((float(row["t"]), free, util))
    for t, _, _ in rows:
        before = [r[0] for r in rows if r[0] <= t - settle_s]
        if not before:
            continue
        start = max(before)
        period = [r for r in rows if start <= r[0] <= t]
        if all(
            free >= need + MARGIN and (util is None or util < max_util) for _, free, util in period
        ):
            return t
    return None


def test_replay_e2e_the_idle_a100_qualifies_after_exactly_the_settle_period() -> None:
    t, launch = first_launch("e2e", 20 * GIB)
    assert t == by_hand("e2e", 1, 20 * GIB, 10.0, 10.0) == 1764130010.0
    assert launch.gpu_indices == (1,)
    assert launch.gpu_uuids == ("GPU-e2e11111-aaaa-bbbb-cccc-ddddeeeeffff",)


def test_replay_e2e_the_busy_h100_never_qualifies_under_10_pct() -> None:
    # 37 GiB + margin is more than the A100's 36.5 GiB free: only the H100 could take it.
    assert first_launch("e2e", 37 * GIB) is None


def test_replay_e2e_without_the_util_rule_the_h100_qualifies_once_memory_settles() -> None:
    need = 40 * GIB
    expected = by_hand("e2e", 0, need, 101.0, 10.0)
    assert expected == 1764130030.0  # free >= 41 GiB from t=20 to t=36
    t, launch = first_launch("e2e", need, max_util=101.0)
    assert (t, launch.gpu_indices) == (expected, (0,))


def test_replay_e2e_two_gpus_only_when_both_qualify() -> None:
    t, launch = first_launch("e2e", 30 * GIB, max_util=101.0, gpus=2)
    assert t == max(
        by_hand("e2e", 0, 30 * GIB, 101.0, 10.0), by_hand("e2e", 1, 30 * GIB, 101.0, 10.0)
    )
    assert launch.gpu_indices == (0, 1)


def test_replay_tasks_the_gpu_is_busy_four_seconds_in_five() -> None:
    assert first_launch("tasks", 10 * GIB, max_util=50.0) is None
    assert by_hand("tasks", 0, 10 * GIB, 50.0, 10.0) is None
    t, _ = first_launch("tasks", 10 * GIB, max_util=95.0)
    assert t == by_hand("tasks", 0, 10 * GIB, 95.0, 10.0) == 1764130010.0


def test_replay_handmade_busy_gpu_1_is_skipped_then_chosen_by_best_fit_without_the_rule() -> None:
    # Two 150.75 GB cards: GPU 0 idle with 0.6 GiB used, GPU 1 97-99 % busy with 20-22 GiB used.
    t, launch = first_launch("handmade", 110 * GIB, settle_s=2.0)
    assert t == by_hand("handmade", 0, 110 * GIB, 10.0, 2.0) == 1764130002.0
    assert launch.gpu_uuids == ("GPU-aaaa",)
    assert by_hand("handmade", 1, 110 * GIB, 10.0, 2.0) is None
    # Without the utilization rule both qualify; GPU 1 has less room left: the better fit.
    t, launch = first_launch("handmade", 110 * GIB, settle_s=2.0, max_util=101.0)
    assert t == by_hand("handmade", 1, 110 * GIB, 101.0, 2.0) == 1764130002.0
    assert launch.gpu_uuids == ("GPU-bbbb",)


@pytest.mark.parametrize("session", ["e2e", "tasks", "handmade"])
def test_replay_reasons_are_given_until_the_launch(session: str) -> None:
    window = HeadroomWindow()
    for tick in SessionReader(SESSIONS / session).gpu_ticks():
        window.add(HeadroomWindow.readings_from_tick(tick))
        decision = decide(window, [job(1, 200 * GIB)], [], tick.taken_at)
        assert decision.launches == ()
        assert decision.waiting[1].startswith("needs 200 GiB + 1 GiB margin, more than any")
