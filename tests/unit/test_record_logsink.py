"""Log batches into metrics.csv rows and finding events, through the real session writer."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors.samples import LogBatch
from collectors.session.rows import cell
from gpuherd.record.logsink import LogSink
from gpuherd.session.session import SessionWriter
from parsers.model import LogFinding, LogMetric


def metric(loss: float, step: int | None = None, taken_at: float | None = None) -> LogMetric:
    return LogMetric((("train/loss", loss), ("lr", 0.001)), step=step, epoch=0.5, taken_at=taken_at)


def batch(
    t: float, *items: tuple[int, LogMetric], findings=(), path: str = "train.log", **flags
) -> LogBatch:
    return LogBatch(
        path,
        t,
        "generic",
        metrics=tuple(items),
        findings=tuple(findings),
        lines_read=len(items),
        **flags,
    )


def rows(root: Path) -> list[dict[str, str]]:
    with open(root / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_one_row_per_metric_with_line_step_and_epoch(tmp_path: Path) -> None:
    writer = SessionWriter(tmp_path / "s")
    sink = LogSink({"train.log": "command"})
    sink(writer, batch(100.0, (1, metric(2.5, step=10)), (2, metric(2.0, 20, taken_at=99.5))))
    writer.close()
    got = [
        (r["t"], r["task"], r["line"], r["metric"], r["value"], r["step"], r["epoch"])
        for r in rows(tmp_path / "s")
    ]
    assert got == [
        ("100.0", "command", "1", "train/loss", "2.5", "10", "0.5"),
        ("100.0", "command", "1", "lr", "0.001", "10", "0.5"),
        ("99.5", "command", "2", "train/loss", "2.0", "20", "0.5"),
        ("99.5", "command", "2", "lr", "0.001", "20", "0.5"),
    ]


def test_a_progress_line_gives_one_row_a_second_and_its_last_state(tmp_path: Path) -> None:
    writer = SessionWriter(tmp_path / "s")
    sink = LogSink()
    # A tqdm bar rewrites line 3 every 0.2 s, then the log moves on to line 4.
    for k in range(8):
        sink(writer, batch(10.0 + 0.2 * k, (3, metric(3.0 - 0.1 * k))))
    sink(writer, batch(12.0, (4, metric(1.0))))
    sink(writer, batch(12.1, (4, metric(0.9))))
    sink.flush(writer)
    writer.close()
    losses = [(r["line"], r["value"]) for r in rows(tmp_path / "s") if r["metric"] == "train/loss"]
    assert losses == [("3", "3.0"), ("3", "2.5"), ("3", "2.3"), ("4", "1.0"), ("4", "0.9")]


def test_findings_become_events_and_tasks_are_counted(tmp_path: Path) -> None:
    writer = SessionWriter(tmp_path / "s")
    sink = LogSink()
    oom = LogFinding("oom", "torch.OutOfMemoryError: CUDA out of memory.")
    sink(writer, batch(5.0, findings=[(42, oom)]))
    sink(writer, batch(6.0, (1, metric(1.0)), truncated=True, generation=2))
    writer.close()
    events = [
        json.loads(line) for line in (tmp_path / "s" / "events.jsonl").read_text().splitlines()
    ]
    assert events[0] == {
        "t": 5.0,
        "kind": "finding",
        "task": "train.log",
        "line": 42,
        "finding": "oom",
        "evidence": oom.evidence,
    }
    assert {k: events[1][k] for k in ("kind", "task", "how")} == {
        "kind": "log_restarted",
        "task": "train.log",
        "how": "truncated",
    }
    [task] = sink.tasks_meta()
    assert (task["findings"], task["metric_rows"], task["format"]) == (1, 2, "generic")
    assert sink.offsets == {"train.log": 0}


def test_nan_and_inf_are_written_as_values(tmp_path: Path) -> None:
    writer = SessionWriter(tmp_path / "s")
    sink = LogSink()
    sink(
        writer,
        batch(1.0, (1, LogMetric((("train/loss", float("nan")), ("grad_norm", float("inf")))))),
    )
    writer.close()
    assert [r["value"] for r in rows(tmp_path / "s")] == ["nan", "inf"]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    label=st.text(min_size=1, max_size=12),
    lines=st.lists(
        st.tuples(
            st.lists(st.tuples(st.text(max_size=10), st.floats()), min_size=1, max_size=4),
            st.none() | st.integers(-(10**12), 10**12),
            st.none() | st.floats(),
            st.none() | st.floats(allow_nan=False, allow_infinity=False),
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_rows_are_written_exactly_as_the_csv_module_writes_them(tmp_path_factory, label, lines):
    # The sink formats rows itself for speed; the bytes must equal what csv.writer makes of the
    # cells (`collectors.session.rows.cell`), whatever the names (commas, quotes, newlines) and
    # values.
    root = tmp_path_factory.mktemp("s")
    writer = SessionWriter(root / "s")
    sink = LogSink({"train.log": label})
    items = tuple(
        (n, LogMetric(tuple(values), step, epoch, t))
        for n, (values, step, epoch, t) in enumerate(lines, 1)
    )
    sink(writer, batch(1795673266.125, *items))
    writer.close()
    expected = io.StringIO()
    out = csv.writer(expected, lineterminator="\n")
    out.writerow(("t", "task", "line", "metric", "value", "step", "epoch"))
    for n, (values, step, epoch, t) in enumerate(lines, 1):
        for name, value in values:
            out.writerow(
                [
                    cell(v)
                    for v in (
                        1795673266.125 if t is None else t,
                        label,
                        n,
                        name,
                        value,
                        step,
                        epoch,
                    )
                ]
            )
    assert (root / "s" / "metrics.csv").read_bytes() == expected.getvalue().encode(
        "utf-8", "backslashreplace"
    )
