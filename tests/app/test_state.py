"""MonitorState, the process-row helpers and the chart decimation: pure, no Textual app."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from collectors.roles import GPU, HOST, LOG
from collectors.samples import GpuProcess, GpuTick, ProcessInfo
from tests.app.helpers import T0, UUID0, UUID1, MiB, gpu, host, tick
from tui.processes import (
    SORT_KEYS,
    build_rows,
    filter_rows,
    memory_gaps,
    next_sort_key,
    sort_rows,
)
from tui.state import HISTORY_LEN, LOCAL_HOST, MonitorState
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
    state.add_source("nvml", GPU)
    assert state.mark_failed("nvml", "timeout") is True
    assert state.mark_failed("nvml", "timeout again") is False
    assert state.problems("gpu") == ["timeout again"]
    assert state.mark_recovered("nvml") is True
    assert state.problems("gpu") == [] and state.mark_recovered("nvml") is False


def test_a_source_that_ends_on_a_failure_keeps_showing_it() -> None:
    state = MonitorState()
    state.add_source("replay:gpu", GPU)
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


def test_roles_are_declared_or_taken_from_the_sample_type_never_from_the_name() -> None:
    state = MonitorState()
    state.add_source("gpu-something-host", LOG)
    state.mark_failed("gpu-something-host", "cannot read the log")
    assert state.problems(LOG) == ["cannot read the log"]
    assert state.problems(GPU) == [] and state.problems(HOST) == []
    state.apply_sample("gpu-nvml-host", host())  # declares nothing: its sample's type decides
    assert state.role("gpu-nvml-host") == HOST and state.host_sample == host()
    state.add_source("replay:gpu", None)
    assert state.role("replay:gpu") is None and state.sources(GPU) == []


def test_failures_of_a_source_without_a_panel_role_are_listed_with_its_name() -> None:
    state = MonitorState()
    state.add_source("nvml", GPU)
    state.mark_failed("nvml", "timeout")
    state.mark_failed("docker", "socket gone")
    state.add_source("discovery", "discovery")
    state.mark_crashed("discovery", "crashed: OSError()")
    outside = state.problems_outside({GPU, HOST, LOG})
    assert outside == ["docker: socket gone", "discovery: crashed: OSError()"]
    state.mark_recovered("docker")
    assert state.problems_outside({GPU, HOST, LOG}) == ["discovery: crashed: OSError()"]


def test_two_gpu_sources_are_kept_apart_and_shown_together() -> None:
    state = MonitorState()
    state.add_source("nvml-a", GPU)
    state.add_source("nvml-b", GPU)
    a = tick(gpu(0), t=T0)
    state.apply_sample("nvml-a", a)
    assert state.gpu_tick is a  # one source: its very tick
    state.apply_sample("nvml-b", tick(gpu(1), t=T0 + 0.5))
    state.apply_sample("nvml-a", tick(gpu(0, gpu_util_pct=70.0), t=T0 + 1))
    merged = state.gpu_tick
    assert merged is not None and merged.taken_at == T0 + 1
    assert [(g.uuid, g.gpu_util_pct) for g in merged.devices] == [(UUID0, 70.0), (UUID1, 87.0)]
    assert [t.taken_at for t in state.samples(GPU)] == [T0 + 1, T0 + 0.5]
    assert set(state.history) == {UUID0, UUID1} and len(state.history[UUID0]) == 2
    assert state.gpu_pids() == {4242, 5151}
    state.select_next_gpu()
    assert state.selected_uuid == UUID1


@dataclass(frozen=True)
class RemoteTick:
    host: str
    tick: GpuTick


def test_samples_are_kept_per_host_and_default_to_the_local_one() -> None:
    state = MonitorState()
    state.add_source("remote", "remote-gpu")
    state.apply_sample("remote", RemoteTick("box-a", tick(gpu(0))))
    state.apply_sample("remote", RemoteTick("box-b", tick(gpu(1))))
    state.apply_sample("remote", RemoteTick("box-a", tick(gpu(0), t=T0 + 1)))
    assert [(s.host, s.tick.taken_at) for s in state.samples("remote-gpu")] == [
        ("box-a", T0 + 1),
        ("box-b", T0),
    ]
    state.apply_sample("host", host())
    assert state.latest[("host", LOCAL_HOST)] == host()


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
    rows = build_rows(
        tick(
            gpu(0, processes=(GpuProcess(1, None), GpuProcess(2, 5 * MiB), GpuProcess(3, 9 * MiB)))
        ),
        host(processes=(ProcessInfo(2, "zed", cpu_pct=50.0), ProcessInfo(3, "amy", cpu_pct=5.0))),
    )
    assert [r.pid for r in sort_rows(rows, SORT_KEYS[0])] == [3, 2, 1]
    assert [r.pid for r in sort_rows(rows, next_sort_key(SORT_KEYS[0]))] == [2, 3, 1]
    user = next(k for k in SORT_KEYS if k.name == "user")
    assert [r.pid for r in sort_rows(rows, user)] == [3, 2, 1]
    assert next_sort_key(SORT_KEYS[-1]) == SORT_KEYS[0]


@pytest.mark.parametrize(
    ("needle", "pids"),
    [
        ("", [4242, 5151]),
        ("ALICE", [4242]),
        ("finetune", [5151]),
        ("515", [5151]),
        ("nobody", []),
        ("  bob ", [5151]),
    ],
)
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


def test_a_reason_two_sources_share_is_on_the_banner_once() -> None:
    """The GPU collector and the containers' GPU reader both miss NVML: one banner line."""
    state = MonitorState()
    state.mark_unavailable("nvml", "NVIDIA driver not found")
    state.mark_unavailable("container-gpu", "NVIDIA driver not found")
    state.mark_unavailable("docker", "Docker is not running")
    assert state.notices == ["NVIDIA driver not found", "Docker is not running"]
    assert state.status_of("container-gpu").health == "unavailable"
