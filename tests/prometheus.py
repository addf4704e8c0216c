"""A real Prometheus server on loopback for tests and benchmarks, and small HTTP helpers.

The binary is Debian's `prometheus` package (`.ci/run` installs it). Under `CI=true` a missing
binary fails the test; elsewhere it skips with the reason. The packaged service is never used:
each server runs from a temporary config with its storage in a temporary directory, listens on
127.0.0.1 only, and is killed afterwards.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""No proxy from the environment: every request of the tests stays on loopback."""


def prometheus_binary() -> str:
    """The `prometheus` binary; fails under CI=true, skips elsewhere, when it is missing."""
    found = shutil.which("prometheus")
    if found is None:
        reason = (
            "the prometheus binary is not installed (Debian: apt-get install -y "
            "--no-install-recommends prometheus; .ci/run does)"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def promtool_binary() -> str:
    """The `promtool` binary of the same package; fails under CI=true, skips elsewhere."""
    prometheus_binary()
    found = shutil.which("promtool")
    if found is None:
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)(
            "promtool is not installed (it comes with Debian's prometheus package)"
        )
    assert found is not None
    return found


def fleet_doc_block(language: str, index: int = 0) -> str:
    """The `index`-th fenced block of `language` in docs/fleet.md."""
    import re

    text = (Path(__file__).resolve().parents[1] / "docs" / "fleet.md").read_text()
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)[index]


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str, timeout_s: float = 5.0) -> tuple[int, str]:
    """`(status, body)` of a GET on loopback; HTTP errors are answers too."""
    try:
        with DIRECT.open(url, timeout=timeout_s) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except (urllib.error.URLError, OSError) as error:
        return 0, str(error)  # not listening (yet)


def wait_for(check, timeout_s: float = 30.0, what: str = "condition"):  # type: ignore[no-untyped-def]
    """Poll `check()` until it returns something true; that value."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def scrape_config(
    targets: Sequence[str],
    interval_s: float = 1.0,
    job: str = "gpuherd",
    rule_files: Sequence[str] = (),
) -> str:
    """A minimal prometheus.yml scraping `targets` (host:port) every `interval_s`."""
    listed = ", ".join(f"'{t}'" for t in targets)
    rules = "".join(f"  - '{path}'\n" for path in rule_files)
    return (
        f"global:\n  scrape_interval: {interval_s:g}s\n  evaluation_interval: "
        f"{interval_s:g}s\nscrape_configs:\n  - job_name: {job}\n    scrape_timeout: "
        f"{interval_s:g}s\n    static_configs:\n      - targets: [{listed}]\n"
        + (f"rule_files:\n{rules}" if rules else "")
    )


class Prometheus:
    """One running server: its URL and instant queries."""

    def __init__(self, url: str, process: subprocess.Popen[bytes], log: Path) -> None:
        self.url, self.process, self.log = url, process, log

    def query(self, expr: str) -> list[dict]:  # type: ignore[type-arg]
        """The result vector of an instant query."""
        status, body = get(f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}")
        assert status == 200, body
        return json.loads(body)["data"]["result"]

    def value(self, expr: str) -> float | None:
        """The one value of `expr`, `None` when the vector is empty."""
        result = self.query(expr)
        assert len(result) <= 1, result
        return float(result[0]["value"][1]) if result else None

    def targets_up(self) -> int:
        """How many targets answered their last scrape."""
        return len(self.query("up == 1"))


@contextmanager
def running_prometheus(
    tmp: Path, targets: Sequence[str], interval_s: float = 1.0, rules: str | None = None
) -> Iterator[Prometheus]:
    """A Prometheus on a free loopback port scraping `targets` (with `rules`); killed on exit."""
    binary = prometheus_binary()
    tmp.mkdir(parents=True, exist_ok=True)
    config = tmp / "prometheus.yml"
    rule_files = []
    if rules is not None:
        (tmp / "rules.yml").write_text(rules)
        rule_files.append(str(tmp / "rules.yml"))
    config.write_text(scrape_config(targets, interval_s, rule_files=rule_files))
    port = free_port()
    log = tmp / "prometheus.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={tmp / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
                "--storage.tsdb.retention.time=1h",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    server = Prometheus(f"http://127.0.0.1:{port}", process, log)
    try:
        wait_for(
            lambda: process.poll() is not None or get(f"{server.url}/-/ready")[0] == 200,
            what="prometheus to be ready",
        )
        assert process.poll() is None, log.read_text()
        yield server
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
