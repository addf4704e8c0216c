"""MonitorState, the process-row helpers and the chart decimation: pure, no Textual app."""

from __future__ import annotations

import pytest

from collectors.samples import GpuProcess, ProcessInfo
from tests.app.helpers import T0, UUID0, UUID1, MiB, gpu, host, tick
from tui.processes import (
    SORT_KEYS,
    build_rows,
    filter_rows,
    memory_gaps,
    next_sort_key,
    sort_rows,
)
from tui.state import HISTORY_LEN, MonitorState, guess_role
from tui.widgets.plot import decimate


def test_history_is_bounded_and_keeps_gaps_as_none() -> None:
    state = MonitorState()
    for i in range(HISTORY_LEN + 25):
        used = None if i == HISTORY_LEN else (i % 100) * MiB
        state.apply_sample("nvml", tick(gpu(0, memory_used_bytes=used), t=T0 + i))
    history = state.history[UUID0]
    assert len(history) == HISTORY_LEN
    assert history.taken_at[0] == T0 + 25 and history.taken_at[-1] == T0 + HISTORY_LEN + 24
    assert history.mem_used_pct[HISTORY_LEN - 25] is None


def test_outage_is_new_once_and_recovery_clears_it() -> None:
    state = MonitorState()
    assert state.mark_failed("nvml", "timeout") is True
    assert state.mark_failed("nvml", "timeout again") is False
    assert state.problems("gpu") == ["timeout again"]
    assert state.mark_recovered("nvml") is True
    assert state.problems("gpu") == [] and state.mark_recovered("nvml") is False


def test_a_source_that_ends_on_a_failure_keeps_showing_it() -> None:
    state = MonitorState()
    state.mark_failed("replay:gpu", "gpu.csv, line 7: bad value")
    state.mark_finished("replay:gpu")
    assert state.problems("gpu") == ["gpu.csv, line 7: bad value"]
    assert state.finished("gpu")


def test_lost_and_recovered_gpus_are_reported_once() -> None:
    state = MonitorState()
    first = state.apply_sample("nvml", tick(gpu(0), gpu(1, error="GPU is lost")))
    again = state.apply_sample("nvml", tick(gpu(0), gpu(1, error="GPU is lost"), t=T0 + 1))
    back = state.apply_sample("nvml", tick(gpu(0), gpu(1), t=T0 + 2))
    assert [g.uuid for g in first.lost] == [UUID1] and again.lost == () and again.back == ()
    assert [g.uuid for g in back.back] == [UUID1] and UUID1 not in state.gpu_errors


def test_roles_come_from_names_until_a_sample_says_otherwise() -> None:
    assert guess_role("nvml") == "gpu" and guess_role("replay:gpu") == "gpu"
    assert guess_role("host") == "host" and guess_role("replay:host") == "host"
    assert guess_role("docker") == "other"
    state = MonitorState()
    state.apply_sample("mystery", host())
    assert state.role("mystery") == "host"


def test_selection_follows_the_gpus_present() -> None:
    state = MonitorState()
    state.apply_sample("nvml", tick(gpu(0), gpu(1)))
    assert state.selected_uuid == UUID0
    state.select_next_gpu()
    assert state.selected_uuid == UUID1
    state.select_next_gpu()
    assert state.selected_uuid == UUID0
    state.select_next_gpu(-1)
    assert state.selected_uuid == UUID1
    state.apply_sample("nvml", tick(gpu(0), t=T0 + 1))
    assert state.selected_uuid == UUID0


def test_gpu_pids_cover_every_gpu_and_streaming_ends_with_the_source() -> None:
    state = MonitorState()
    assert state.gpu_pids() == set() and not state.gpu_streaming()
    state.apply_sample("nvml", tick(gpu(0), gpu(1, processes=(GpuProcess(9, None),))))
    assert state.gpu_pids() == {4242, 5151, 9}
    assert state.gpu_streaming()
    state.mark_finished("nvml")
    assert not state.gpu_streaming()


def test_rows_join_host_details_and_use_the_tick_time_for_elapsed() -> None:
    rows = build_rows(tick(gpu(0), t=T0 + 10), host())
    by_pid = {r.pid: r for r in rows}
    assert by_pid[4242].user == "alice" and by_pid[4242].elapsed_s == 3735.0
    assert by_pid[4242].key == f"{UUID0}/4242"
    hidden = build_rows(tick(gpu(0)), host(processes=(ProcessInfo(5151, "bob"),)))
    assert {r.pid: r.user for r in hidden} == {4242: None, 5151: "bob"}
    assert build_rows(None, host()) == []


def test_every_sort_key_orders_unknown_values_last() -> None:
    rows = build_rows(tick(gpu(0, processes=(GpuProcess(1, None), GpuProcess(2, 5 * MiB),
                                             GpuProcess(3, 9 * MiB)))),
                      host(processes=(ProcessInfo(2, "zed", cpu_pct=50.0),
                                      ProcessInfo(3, "amy", cpu_pct=5.0))))
    assert [r.pid for r in sort_rows(rows, SORT_KEYS[0])] == [3, 2, 1]
    assert [r.pid for r in sort_rows(rows, next_sort_key(SORT_KEYS[0]))] == [2, 3, 1]
    user = next(k for k in SORT_KEYS if k.name == "user")
    assert [r.pid for r in sort_rows(rows, user)] == [3, 2, 1]
    assert next_sort_key(SORT_KEYS[-1]) == SORT_KEYS[0]


@pytest.mark.parametrize(("needle", "pids"), [
    ("", [4242, 5151]), ("ALICE", [4242]), ("finetune", [5151]), ("515", [5151]),
    ("nobody", []), ("  bob ", [5151]),
])
def test_filter_matches_user_command_and_pid(needle: str, pids: list[int]) -> None:
    rows = build_rows(tick(gpu(0)), host())
    assert [r.pid for r in filter_rows(rows, needle)] == pids


def test_memory_gaps_skip_lost_gpus_and_tiny_remainders() -> None:
    devices = [
        gpu(0, memory_used_bytes=10 * MiB, processes=(GpuProcess(1, 10 * MiB - 1),)),
        gpu(1, memory_used_bytes=615 * MiB, processes=()),
        gpu(2, error="GPU is lost", memory_used_bytes=None, processes=None),
        gpu(3, processes=None),
    ]
    gaps = memory_gaps(devices)
    assert [(g.gpu_index, g.listed) for g in gaps] == [(1, True), (3, False)]
    assert gaps[0].unattributed_bytes == 615 * MiB


def test_decimate_keeps_peaks_and_the_newest_x() -> None:
    xs = [float(i) for i in range(10)]
    ys = [0.0, 0, 9, 0, 0, 0, 0, 0, 7, 0]
    out_x, out_y = decimate(xs, ys, 4)
    assert out_x == [2.0, 5.0, 8.0, 9.0] and out_y == [9.0, 0.0, 7.0, 0.0]
    assert decimate(xs[:3], ys[:3], 4) == (xs[:3], ys[:3])
