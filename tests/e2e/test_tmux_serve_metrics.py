"""`--serve-metrics` beside the dashboard: the replay on screen and its metrics on loopback."""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.tmux_pane import REPO, Pane, joined
from tests.prometheus import free_port, get, wait_for

SESSION = REPO / "tests" / "data" / "sessions" / "e2e"


@pytest.fixture(autouse=True)
def _no_real_queue(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Live exporters read this machine's job queue: never the person's own in a test.
    monkeypatch.setenv("GPUHERD_STATE_DIR", str(tmp_path / "queue-state"))
    monkeypatch.setenv("GPUHERD_LEDGER_DIR", str(tmp_path / "queue-ledger"))


pytestmark = [
    pytest.mark.tmux,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]


def scraped(port: int) -> dict[tuple[str, str], float]:
    status, body = get(f"http://127.0.0.1:{port}/metrics")
    if status != 200:
        return {}
    return {
        (s.name, s.labels.get("gpu", "") + s.labels.get("user", "")): s.value
        for family in text_string_to_metric_families(body)
        for s in family.samples
    }


def test_the_dashboard_serves_what_it_shows(pane: Pane) -> None:
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "gpuherd",
        "replay",
        str(SESSION),
        "--speed",
        "1000",
        "--serve-metrics",
        str(port),
    ]
    pane.start(
        f"cd {shlex.quote(str(REPO))} && {shlex.join(argv)}; echo GPUHERD_EXIT=$?; sleep 30",
        160,
        50,
    )
    screen = pane.wait_for(lambda s: "carol" in s and "replay finished" in s, timeout_s=30)
    assert "e2e-box" in screen
    assert f"serving metrics on http://127.0.0.1:{port}/metrics" in screen  # on the banner
    found = wait_for(
        lambda: scraped(port).get(("gpuherd_gpu_memory_used_bytes", "0")),
        what="the dashboard's metrics",
    )
    assert found == 45259506243  # gpu.csv's last row of GPU 0, as on the screen
    metrics = scraped(port)
    assert metrics[("gpuherd_process_gpu_memory_bytes", "0carol")] == 44615261149
    assert metrics[("gpuherd_process_gpu_memory_bytes", "1dave")] == 3221225472
    pane.keys("q")
    screen = pane.wait_for(lambda s: "GPUHERD_EXIT=" in s)
    assert "GPUHERD_EXIT=0" in screen and "Traceback" not in screen
    assert get(f"http://127.0.0.1:{port}/metrics")[0] == 0  # stopped with the dashboard


TRAIN = (
    "import time\n"
    "for step in range(1, 4):\n"
    "    print(f'step: {step} loss: {3.0 / step:.3f}', flush=True)\n"
    "    time.sleep(0.2)\n"
    "time.sleep(60)\n"
)


def test_record_tui_serves_the_recorded_command_as_a_task(pane: Pane, tmp_path) -> None:
    port = free_port()
    session = tmp_path / "session"
    argv = [
        sys.executable,
        "-m",
        "gpuherd",
        "record",
        "--tui",
        str(session),
        "--peak-interval",
        "0",
        "--serve-metrics",
        str(port),
        "--",
        sys.executable,
        "-c",
        TRAIN,
    ]
    pane.start(
        f"cd {shlex.quote(str(REPO))} && {shlex.join(argv)}; echo GPUHERD_EXIT=$?; sleep 30",
        160,
        50,
    )
    pane.wait_for(
        lambda s: f"serving metrics on http://127.0.0.1:{port}/metrics" in s, timeout_s=30
    )

    def loss() -> float | None:
        status, body = get(f"http://127.0.0.1:{port}/metrics")
        return (
            next(
                (
                    s.value
                    for f in text_string_to_metric_families(body)
                    for s in f.samples
                    if s.name == "gpuherd_task_loss" and s.labels["task"] == "command"
                ),
                None,
            )
            if status == 200
            else None
        )

    assert wait_for(lambda: loss() == 1.0, what="the command's last loss")
    pane.keys("q")  # leaves the dashboard; the recording (and its exporter) goes on
    pane.wait_for(lambda s: "kill -INT" in joined(s), timeout_s=20, unwrap=True)
    assert loss() == 1.0, "still served after the dashboard left"
    pane.keys("C-c")  # now stops the command, closes the session and the exporter
    screen = pane.wait_for(lambda s: "GPUHERD_EXIT=" in s, timeout_s=40)
    assert "Traceback" not in screen and (session / "summary.md").exists()
    assert get(f"http://127.0.0.1:{port}/metrics")[0] == 0
