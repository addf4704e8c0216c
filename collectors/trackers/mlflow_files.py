"""Follow one run of MLflow's file store: `mlruns/<experiment>/<run>/metrics/<key>` and `meta.yaml`.

Each metric file is appended a `<timestamp ms> <value> <step>` line per `log_metric`; a key with
`/` is nested directories. The lines are read by offset and parsed by the same parser as
`gpuherd parse` uses on one such file (`parsers.path_formats.MlflowMetricParser`). The run's
name and status come from its `meta.yaml`, the experiment's name from the one above it.
"""

from __future__ import annotations

import os

from collectors.trackers.common import READ_BUDGET_BYTES, RunRead
from parsers.path_formats import MlflowMetricParser

RUN_STATUS = {"1": "RUNNING", "2": "SCHEDULED", "3": "FINISHED", "4": "FAILED", "5": "KILLED"}
"""`meta.yaml` writes the status as the number of MLflow's `RunStatus` enum."""


def read_meta(path: str) -> dict[str, str]:
    """The top-level `key: value` pairs of an MLflow `meta.yaml` (plain scalars, as it writes)."""
    found: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line[:1].isspace() or ":" not in line:
                    continue
                key, _sep, value = line.partition(":")
                found[key.strip()] = value.strip().strip("'\"")
    except OSError:
        pass
    return found


def is_run_dir(path: str) -> bool:
    """Whether `path` is a run of a file store: a `meta.yaml` with a `run_id` beside `metrics/`."""
    return os.path.isdir(os.path.join(path, "metrics")) and "run_id" in read_meta(
        os.path.join(path, "meta.yaml")
    )


class _MetricFile:
    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0
        self.size = 0
        self.partial = b""
        self.parser = MlflowMetricParser(path)


class MlflowFileRun:
    """The metrics of one file-store run, read by offset from each metric file."""

    def __init__(self, run_dir: str) -> None:
        self.run_dir = run_dir
        self._files: dict[str, _MetricFile] = {}
        self._meta_stamp: float | None = None
        self._label: str | None = None
        self._status: str | None = None
        self.unparsed = 0

    def read(self, budget_bytes: int = READ_BUDGET_BYTES) -> RunRead:
        """New points of every metric file, and the run's name and status."""
        self._read_meta()
        metrics = self._list()
        out = RunRead(label=self._label, status=self._status, in_order=False)
        for metric in metrics:
            if budget_bytes <= 0:
                out.more = True
                break
            budget_bytes -= self._read_file(metric, out, budget_bytes)
        # the file written most (the largest), where the writer is looked for: meta.yaml is
        # written at the start and the end alone
        written = max(metrics, key=lambda m: (m.size, m.path), default=None)
        out.file_path = (
            written.path
            if written is not None and written.size
            else os.path.join(self.run_dir, "meta.yaml")
        )
        out.read_bytes = sum(f.offset for f in self._files.values())
        out.size_bytes = sum(f.size for f in self._files.values())
        out.more = out.more or out.read_bytes < out.size_bytes
        return out

    def _read_meta(self) -> None:
        meta_path = os.path.join(self.run_dir, "meta.yaml")
        try:
            stamp = os.stat(meta_path).st_mtime
        except OSError:
            return
        if stamp == self._meta_stamp:
            return
        self._meta_stamp = stamp
        meta = read_meta(meta_path)
        experiment = read_meta(os.path.join(os.path.dirname(self.run_dir), "meta.yaml"))
        run_name = meta.get("run_name") or meta.get("run_id") or os.path.basename(self.run_dir)
        exp_name = experiment.get("name")
        self._label = f"{exp_name}/{run_name}" if exp_name else run_name
        self._status = RUN_STATUS.get(meta.get("status", ""), meta.get("status"))

    def _list(self) -> list[_MetricFile]:
        root = os.path.join(self.run_dir, "metrics")
        for folder, _dirs, names in os.walk(root):
            for name in names:
                path = os.path.join(folder, name)
                if path not in self._files:
                    self._files[path] = _MetricFile(path)
        return [self._files[path] for path in sorted(self._files)]

    def _read_file(self, metric: _MetricFile, out: RunRead, budget: int) -> int:
        try:
            with open(metric.path, "rb") as handle:
                stat = os.fstat(handle.fileno())
                metric.size = stat.st_size
                out.modified_at = max(out.modified_at or 0.0, stat.st_mtime)
                if metric.offset >= metric.size:
                    return 0
                handle.seek(metric.offset)
                data = handle.read(budget)
        except OSError:
            return 0
        metric.offset += len(data)
        text = metric.partial + data
        cut = text.rfind(b"\n") + 1
        metric.partial = text[cut:]
        for line in text[:cut].decode("utf-8", "replace").splitlines():
            try:
                found = metric.parser.feed(line)
            except ValueError:
                self.unparsed += 1
                continue
            if found is not None:
                out.metrics.append(found)
        return len(data)
