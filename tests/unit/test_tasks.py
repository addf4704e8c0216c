from __future__ import annotations

import math

from collectors.samples import GpuProcess, GpuSample, GpuTick, LogBatch
from gpuherd.tasks import TaskTracker
from gpuherd.tasks.series import MetricSeries, StepRate
from parsers.model import LogFinding, LogMetric

TASK = "/runs/exp1/train.log"


def metric(step=None, epoch=None, taken_at=None, **values):
    names = {k.replace("__", "/"): float(v) for k, v in values.items()}
    return LogMetric(tuple(names.items()), step=step, epoch=epoch, taken_at=taken_at)


def batch(t, metrics=(), findings=(), lines=None, path=TASK, **kw):
    numbered = tuple((i + 1, m) for i, m in enumerate(metrics))
    kw.setdefault("generation", 1)
    return LogBatch(
        path,
        float(t),
        kw.pop("format", "generic"),
        numbered,
        tuple(findings),
        lines_read=len(metrics) if lines is None else lines,
        **kw,
    )


def loss_steps(tracker, start, stop, t0=0.0, loss=lambda s: 1.0 / (s + 1), **kw):
    for s in range(start, stop):
        tracker.add_batch(batch(t0 + s, [metric(step=s, train__loss=loss(s))], **kw))


def kinds(view):
    return [f.kind for f in view.findings]


def test_latest_values_counts_and_status():
    tracker = TaskTracker()
    tracker.add_batch(batch(100, [metric(step=1, train__loss=2.0)], lines=3, unparsed_lines=1))
    tracker.add_batch(batch(101, [metric(step=2, epoch=0.5, train__loss=1.5, lr=0.1)]))
    view = tracker.view(TASK)
    assert view.label == "exp1/train.log" and view.status == "running"
    assert view.step == 2 and view.epoch == 0.5
    assert dict(view.latest) == {"train/loss": 1.5, "lr": 0.1}
    assert view.key_metrics() == (("train/loss", 1.5), ("lr", 0.1))
    assert (view.lines_read, view.unparsed_lines) == (4, 1)
    tracker.add_batch(batch(500, []))  # a heartbeat long after the last line
    assert tracker.view(TASK).status == "idle"
    assert tracker.view("nope") is None


def test_waiting_and_error_states():
    tracker = TaskTracker()
    tracker.add_batch(LogBatch(TASK, 1.0, None, waiting=True))
    assert tracker.view(TASK).status == "waiting"
    tracker.collector_failed(TASK, "train.log: permission denied")
    assert tracker.view(TASK).status == "error"
    assert tracker.view(TASK).error == "train.log: permission denied"
    tracker.collector_recovered(TASK)
    assert tracker.view(TASK).status == "waiting"


def test_chart_series_is_bounded_and_covers_the_whole_run():
    series = MetricSeries(max_points=100, window_points=10)
    for s in range(10_000):
        series.add(float(s), s, None)
    points = series.points()
    assert len(points) <= 101 and len(series.window) == 10
    assert points[0] == (0.0, 0.0) and points[-1] == (9999.0, 9999.0)
    xs = [x for x, _ in points[:-1]]
    gaps = {b - a for a, b in zip(xs, xs[1:], strict=False)}
    assert len(gaps) == 1  # evenly spread
    assert len(series) == 10_000


def test_series_x_falls_back_to_epoch_and_index():
    by_epoch = MetricSeries()
    by_epoch.add(0.5, None, 1.0)
    by_epoch.add(0.4, None, 2.0)
    assert by_epoch.x_kind == "epoch" and by_epoch.points() == ((1.0, 0.5), (2.0, 0.4))
    by_index = MetricSeries()
    by_index.add(0.5, None, None)
    by_index.add(0.4, None, None)
    assert by_index.points() == ((0.0, 0.5), (1.0, 0.4))
    per_epoch_steps = MetricSeries()
    for s in (10, 20, 5):
        per_epoch_steps.add(1.0, s, None)
    assert not per_epoch_steps.x_monotonic


def test_step_rate_ignores_a_backlog_stamped_at_one_time():
    rate = StepRate(min_span_s=2.0)
    for s in range(1000):
        rate.add(50.0, s)
    assert rate.rate() is None
    rate.add(60.0, 1100)
    assert rate.rate() == (1100 - 999) / 10.0


def test_throughput_from_the_log_and_computed():
    tracker = TaskTracker()
    tracker.add_batch(batch(10, [metric(step=1, train__loss=1.0, throughput__it_s=3.5)]))
    view = tracker.view(TASK)
    assert (view.throughput, view.throughput_name) == (3.5, "throughput/it_s")
    other = "/runs/b.log"
    for i in range(5):  # lines with their own timestamps, 2 s apart, 10 steps apart
        tracker.add_batch(
            batch(100 + i, [metric(step=10 * i, taken_at=2.0 * i, train__loss=1)], path=other)
        )
    view = tracker.view(other)
    assert view.throughput_name == "steps_s" and view.throughput == 5.0


def test_backlog_while_catching_up_gives_no_computed_rate():
    tracker = TaskTracker()
    for i in range(5):
        tracker.add_batch(
            batch(100 + i, [metric(step=1000 * i, train__loss=1.0)], offset_bytes=i, size_bytes=10)
        )
    assert tracker.view(TASK).throughput is None
    assert tracker.view(TASK).catching_up


def test_eta_from_the_log_counts_down_and_from_total_steps():
    tracker = TaskTracker()
    tracker.add_batch(batch(100, [metric(step=1, eta_s=300.0, train__loss=1.0)]))
    tracker.add_batch(batch(130, []))
    assert tracker.view(TASK).eta_s == 270.0
    other = "/runs/c.log"
    tracker.associate(other, total_steps=1000)
    for i in range(3):
        tracker.add_batch(batch(200 + 10 * i, [metric(step=100 * i, train__loss=1.0)], path=other))
    view = tracker.view(other)
    assert view.throughput == 10.0 and view.eta_s == (1000 - 200) / 10.0


def test_log_findings_keep_count_line_and_evidence():
    tracker = TaskTracker()
    oom = LogFinding("oom", "torch.OutOfMemoryError: CUDA out of memory.")
    tracker.add_batch(
        batch(
            10,
            [metric(step=1, train__loss=math.nan)],
            findings=[(1, LogFinding("nan", "train/loss = nan at step 1"))],
        )
    )
    tracker.add_batch(batch(11, [], findings=[(7, oom), (9, oom)], lines=9))
    view = tracker.view(TASK)
    assert kinds(view)[:2] in (["oom", "nan"], ["nan", "oom"])
    found = {f.kind: f for f in view.findings}
    assert found["oom"].count == 2 and found["oom"].line_no == 9
    assert found["oom"].severity == "error" and found["oom"].first_seen_at == 11.0
    tracker.add_batch(batch(500, []))
    assert tracker.view(TASK).status == "failed"


def test_stalled_loss_is_found_and_clears_when_it_falls_again():
    tracker = TaskTracker()
    loss_steps(tracker, 0, 60, loss=lambda s: 2.0)
    view = tracker.view(TASK)
    stalled = [f for f in view.findings if f.kind == "stalled"]
    assert stalled and stalled[0].severity == "warning" and "2" in stalled[0].evidence
    loss_steps(tracker, 60, 200, loss=lambda s: 2.0 / (s - 58))
    assert "stalled" not in kinds(tracker.view(TASK))


def test_falling_loss_gives_no_finding():
    tracker = TaskTracker()
    loss_steps(tracker, 0, 100)
    assert tracker.view(TASK).findings == ()


def test_validation_near_chance_while_training_improves():
    tracker = TaskTracker()
    for s in range(5):
        tracker.add_batch(
            batch(s, [metric(step=s * 100, train__acc=0.2 + 0.1 * s, val__acc=0.001)])
        )
    view = tracker.view(TASK)
    assert "chance" in kinds(view)
    assert "class count unknown" in next(f for f in view.findings if f.kind == "chance").evidence
    tracker.associate(TASK, num_classes=1000)
    tracker.add_batch(batch(9, [metric(step=900, train__acc=0.8, val__acc=0.0012)]))
    assert (
        "1000 classes"
        in next(f for f in tracker.view(TASK).findings if f.kind == "chance").evidence
    )


def test_healthy_validation_is_not_chance_and_gap_is_overfitting():
    tracker = TaskTracker()
    for s in range(5):
        tracker.add_batch(batch(s, [metric(step=s, train__acc=0.5 + 0.1 * s, val__acc=0.45)]))
    view = tracker.view(TASK)
    assert "chance" not in kinds(view) and "overfitting" in kinds(view)


def test_zero_map_while_loss_falls():
    tracker = TaskTracker()
    loss_steps(tracker, 0, 40)
    for s in (10, 20, 30):
        tracker.add_batch(batch(40 + s, [metric(step=s, val__map=0.0)]))
    assert "zero_metric" in kinds(tracker.view(TASK))


def gpu_tick(t, util, uuid="GPU-1", pids=()):
    procs = tuple(GpuProcess(p, 1 << 30) for p in pids)
    return GpuTick(
        float(t),
        (
            GpuSample(0, uuid, "H100", gpu_util_pct=util, processes=procs),
            GpuSample(1, "GPU-2", "H100", gpu_util_pct=99.0),
        ),
    )


def test_gpu_swinging_and_low_while_the_task_runs():
    tracker = TaskTracker(active_s=10_000)
    tracker.associate(TASK, gpu_uuids=["GPU-1"])
    loss_steps(tracker, 0, 100)
    for i in range(40):
        tracker.add_gpu_tick(gpu_tick(100 + i, 0.0 if i % 2 else 100.0))
    view = tracker.view(TASK)
    assert "gpu_swing" in kinds(view) and view.gpu_util_pct is not None
    for i in range(60):
        tracker.add_gpu_tick(gpu_tick(200 + i, 12.0))
    assert kinds(tracker.view(TASK)) == ["gpu_low"]


def test_gpu_found_by_pid_and_idle_task_gets_no_gpu_finding():
    tracker = TaskTracker(active_s=30)
    tracker.associate(TASK, pids=[4242])
    tracker.add_batch(batch(100, [metric(step=1, train__loss=1.0)]))
    tracker.add_gpu_tick(gpu_tick(101, 5.0, pids=[4242]))
    assert tracker.view(TASK).gpu_uuids == ("GPU-1",)
    for i in range(40):
        tracker.add_gpu_tick(gpu_tick(1000 + i, 5.0, pids=[4242]))
    assert "gpu_low" not in kinds(tracker.view(TASK))  # the task is idle: not its fault


def test_lightning_rewrite_replays_rows_without_duplicating_history():
    tracker = TaskTracker()
    rows = [metric(step=s, train__loss=1.0 / (s + 1)) for s in range(0, 50, 10)]
    tracker.add_batch(batch(1, rows))
    replay = [
        metric(step=s, train__loss=1.0 / (s + 1), val__loss=0.9)
        if s == 40
        else metric(step=s, train__loss=1.0 / (s + 1))
        for s in range(0, 50, 10)
    ]
    fresh = [metric(step=50, train__loss=0.01)]
    tracker.add_batch(batch(2, replay + fresh, generation=2, truncated=True))
    xs = [x for x, _ in tracker.series(TASK, "train/loss")]
    assert xs == [0, 10, 20, 30, 40, 50]
    assert tracker.view(TASK).runs == 1


def test_rerun_into_the_same_file_starts_a_new_run():
    tracker = TaskTracker()
    loss_steps(tracker, 0, 30)
    tracker.add_batch(batch(100, [], findings=[(1, LogFinding("download", "Downloading"))]))
    assert [f.severity for f in tracker.view(TASK).findings] == ["info"]
    tracker.add_batch(
        batch(
            200,
            [metric(step=0, train__loss=7.0)],
            generation=2,
            truncated=True,
            findings=[(2, LogFinding("download", "Downloading x.safetensors"))],
        )
    )
    view = tracker.view(TASK)
    assert view.runs == 2 and view.step == 0
    assert tracker.series(TASK, "train/loss") == ((0.0, 7.0),)
    assert [(f.kind, f.severity) for f in view.findings] == [("download", "warning")]


def test_copytruncate_continues_the_run():
    tracker = TaskTracker()
    loss_steps(tracker, 0, 10)
    tracker.add_batch(batch(50, [metric(step=10, train__loss=0.05)], generation=2, truncated=True))
    assert len(tracker.series(TASK, "train/loss")) == 11
    assert tracker.view(TASK).runs == 1


def test_rotation_keeps_the_run():
    tracker = TaskTracker()
    loss_steps(tracker, 0, 10)
    tracker.add_batch(batch(50, [metric(step=10, train__loss=0.05)], generation=2, rotated=True))
    view = tracker.view(TASK)
    assert view.generation == 2 and view.runs == 1 and view.step == 10


def test_many_tasks_stay_separate_and_can_be_removed():
    tracker = TaskTracker()
    for i in range(3):
        tracker.add_batch(batch(1, [metric(step=i, train__loss=i)], path=f"/r/{i}.log"))
    assert tracker.task_ids == ("/r/0.log", "/r/1.log", "/r/2.log")
    assert [v.step for v in tracker.views()] == [0, 1, 2]
    tracker.remove("/r/1.log")
    assert tracker.task_ids == ("/r/0.log", "/r/2.log")
    assert tracker.metric_names("/r/0.log") == ("train/loss",)
    assert tracker.series_x_kind("/r/0.log", "train/loss") == "step"
