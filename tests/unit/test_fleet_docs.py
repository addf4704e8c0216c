"""docs/fleet.md against the exporter: its metric table, its Grafana JSON, its YAML."""

from __future__ import annotations

import io
import json
import re
import subprocess
from pathlib import Path

import pytest
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry
from ruamel.yaml import YAML

from collectors.base import CollectorError, Failed, Sampled
from collectors.samples import GpuProcess, GpuSample, GpuTick, HostSample, LogBatch, ProcessInfo
from gpuherd.export.queue_metrics import QueueState
from gpuherd.export.scrape import ScrapeCollector
from gpuherd.export.state import ExportState
from gpuherd.tasks.hints import TaskHint
from parsers.model import LogFinding, LogMetric
from tests.prometheus import fleet_doc_block, promtool_binary

DOC = Path(__file__).resolve().parents[2] / "docs" / "fleet.md"
NAME = re.compile(r"\b(gpuherd_[a-z_]+|DCGM_FI_[A-Z_]+|fleet:[a-z_]+)\b")


def every_series_name() -> set[str]:
    """The sample names of a scrape where every part has something to say."""
    state = ExportState("box", [TaskHint("/r/a/train.log", gpu_uuids=("GPU-a",))])
    state.emit(
        Sampled(
            "nvml",
            GpuTick(
                10.0,
                (
                    GpuSample(
                        0,
                        "GPU-a",
                        "H100",
                        memory_used_bytes=1,
                        memory_total_bytes=2,
                        memory_reserved_bytes=1,
                        gpu_util_pct=1.0,
                        temperature_c=1.0,
                        power_w=1.0,
                        processes=(GpuProcess(7, 1),),
                    ),
                ),
            ),
        )
    )
    state.emit(Sampled("host", HostSample(10.0, processes=(ProcessInfo(7, user="u"),))))
    state.emit(
        Sampled(
            "log:/r/a/train.log",
            LogBatch(
                "/r/a/train.log",
                10.0,
                "keyvalue",
                (
                    (
                        1,
                        LogMetric(
                            values=(
                                ("train/loss", 1.0),
                                ("val/acc", 0.5),
                                ("throughput/it_s", 2.0),
                                ("eta_s", 9.0),
                            ),
                            step=1,
                        ),
                    ),
                ),
                ((1, LogFinding("nan", "x")),),
                lines_read=1,
            ),
        )
    )
    state.emit(Failed("log:/r/b.log", CollectorError("gone")))
    state.add_peaks(GpuTick(10.0, ()), {"GPU-a": 2})
    calls = []

    def queue() -> QueueState:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("first scrape fails, so the error counter has a series")
        return QueueState({"waiting": 1}, {"GPU-a": 1})

    registry = CollectorRegistry(auto_describe=False)
    registry.register(ScrapeCollector(state, queue, lambda line: None))
    generate_latest(registry)
    text = generate_latest(registry).decode()
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


def test_the_metric_table_lists_exactly_what_the_exporter_serves() -> None:
    table = set(re.findall(r"^\| `(gpuherd_[a-z_]+)` \|", DOC.read_text(), re.M))
    assert table == every_series_name()
    assert len(table) == 25


def test_the_grafana_dashboard_parses_and_names_only_real_series() -> None:
    dashboard = json.loads(fleet_doc_block("json"))
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    assert len(dashboard["panels"]) == 9 and len(exprs) == 15
    names = {name for expr in exprs for name in NAME.findall(expr)}
    recorded = set(re.findall(r"record: (fleet:[a-z_]+)", fleet_doc_block("yaml", 1)))
    served = every_series_name()
    assert names - served - recorded == set()
    assert {
        "gpuherd_gpu_memory_peak_bytes",
        "gpuherd_task_loss",
        "fleet:gpu_memory_free_bytes",
    } <= names
    query = next(v for v in dashboard["templating"]["list"] if v["name"] == "host")["query"]
    assert NAME.findall(query) == ["gpuherd_gpu_info"]


def test_the_yaml_blocks_parse_and_their_rules_use_real_series() -> None:
    yaml = YAML(typ="safe")
    config = yaml.load(io.StringIO(fleet_doc_block("yaml", 0)))
    assert [job["job_name"] for job in config["scrape_configs"]] == [
        "gpuherd",
        "gpuherd-tls",
        "dcgm",
    ]
    rules = yaml.load(io.StringIO(fleet_doc_block("yaml", 1)))
    exprs = [rule["expr"] for group in rules["groups"] for rule in group["rules"]]
    used = {name for expr in exprs for name in NAME.findall(expr) if name.startswith("gpuherd_")}
    assert used and used <= every_series_name()


@pytest.mark.prometheus
def test_promtool_accepts_the_scrape_config_and_the_rules(tmp_path: Path) -> None:
    promtool = promtool_binary()
    (tmp_path / "prometheus.yml").write_text(fleet_doc_block("yaml", 0))
    (tmp_path / "gpuherd-rules.yml").write_text(fleet_doc_block("yaml", 1))
    for args in (["check", "config", "prometheus.yml"], ["check", "rules", "gpuherd-rules.yml"]):
        done = subprocess.run([promtool, *args], cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr
