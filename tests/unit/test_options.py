"""Each command hands its engine a frozen, typed options object built from its flags."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gpuherd.cli import COMMANDS, parse_args, typed_options
from gpuherd.common.options import MonitorOptions, RecordOptions, ServeMetricsOptions
from gpuherd.common.queue_defaults import GRACE_S, MARGIN_BYTES, SETTLE_S, STOP_GRACE_S
from gpuherd.present.format import MIB
from gpuherd.queue.options import QueueOptions


def test_every_command_has_typed_options() -> None:
    for name, module in COMMANDS.items():
        assert callable(getattr(module, "options", None)), name


def test_the_dashboard_keeps_the_queue_defaults_without_queue() -> None:
    options = typed_options(parse_args(["monitor", "--interval", "2"]))
    assert options == MonitorOptions(interval=2.0)
    assert (options.settle, options.margin_bytes, options.grace) == (
        SETTLE_S,
        MARGIN_BYTES,
        GRACE_S,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.interval = 5.0  # type: ignore[misc]


def test_the_queue_flags_reach_the_dashboard_typed() -> None:
    options = typed_options(
        parse_args(["--queue", "--settle", "0", "--margin", "512MiB", "--grace", "30"])
    )
    assert isinstance(options, MonitorOptions)
    assert (options.queue, options.settle, options.margin_bytes, options.grace) == (
        True,
        0.0,
        512 * MIB,
        30.0,
    )


def test_a_replay_and_the_demo_leave_the_live_flags_at_their_defaults(tmp_path: Path) -> None:
    replay = typed_options(parse_args(["replay", str(tmp_path)]))
    assert replay == MonitorOptions(replay=str(tmp_path))
    demo = typed_options(parse_args(["demo", "--speed", "4"]))
    assert demo == MonitorOptions(demo=True, speed=4.0)


def test_record_and_serve_metrics_carry_every_flag(tmp_path: Path) -> None:
    record = typed_options(
        parse_args(
            [
                "record",
                str(tmp_path / "s"),
                "--log",
                "a.log",
                "--duration",
                "5m",
                "--",
                "python",
                "t.py",
            ]
        )
    )
    assert record == RecordOptions(
        record=str(tmp_path / "s"), duration="5m", log=("a.log",), child_command=("python", "t.py")
    )
    serve = typed_options(parse_args(["serve-metrics", "9400", "--watch", str(tmp_path)]))
    assert serve == ServeMetricsOptions(listen="9400", watch=(str(tmp_path),))


def test_queue_actions_are_typed() -> None:
    cancel = typed_options(parse_args(["queue", "cancel", "7"]))
    assert cancel == QueueOptions(queue_command="cancel", job=7, grace=STOP_GRACE_S)
