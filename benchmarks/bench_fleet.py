"""The fleet view over 50 simulated hosts: refresh time and CPU, through a real Prometheus.

Goal: a refresh is on screen within 1 s of its query, and the view stays <= 3 % of one core.

One process serves 50 exporters on 50 loopback ports, each replaying a recorded session in a loop
at its recorded pace under its own host name (`sim-00` ... `sim-49`; the `e2e` session's two GPUs
and the `tasks` session's GPU and two tasks, alternately: 75 GPUs). Debian's Prometheus scrapes
them every second. `gpuherd fleet --interval 1` then runs in a real tmux pane; after a settling
period, its process CPU (user + system) is measured over `--seconds`, and the pane's title line is
read twice a second for "updated ... in N ms" (from the start of the query to the rows on the
table). The query alone (HTTP round trip and decoding, no screen) is also timed in this process.

Run from the repository root (needs tmux and the prometheus binary):

    python benchmarks/bench_fleet.py [--hosts 50] [--seconds 30]

Prints one JSON line, then a table.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.e2e.tmux_pane import Pane  # noqa: E402
from tests.prometheus import free_port, running_prometheus, wait_for  # noqa: E402

SESSIONS = [ROOT / "tests/data/sessions/e2e", ROOT / "tests/data/sessions/tasks"]


def simulate(hosts: int, port_file: Path) -> None:
    """Serve `hosts` replaying exporters until killed; their ports go to `port_file`."""
    from collectors.replay.replay import SessionReplay
    from gpuherd.export.address import parse_listen
    from gpuherd.export.exporter import Exporter
    from gpuherd.export.headless import Feed, running_set, sink
    from gpuherd.tasks.hints import replay_hints

    ports = []
    for i in range(hosts):
        replay = SessionReplay(SESSIONS[i % 2], speed=1.0, loop=True)
        hints = replay_hints(replay.session)
        port = free_port()
        exporter = Exporter(
            parse_listen(str(port)), f"sim-{i:02d}", hints=hints, report=lambda line: None
        )
        running = running_set(Feed(f"sim-{i:02d}", list(replay.collectors())))
        running.attach(sink(exporter))
        exporter.start()
        running.run()
        ports.append(port)
    port_file.write_text(json.dumps(ports))
    threading.Event().wait()


def query_times(url: str, count: int) -> list[float]:
    from gpuherd.fleet.promql import PrometheusClient
    from gpuherd.fleet.source import FleetSource

    source = FleetSource(PrometheusClient(url), stale_after_s=10)
    out = []
    for _ in range(count):
        out.append(source.fetch().query_s)
        time.sleep(0.2)
    return out


def measure(url: str, hosts: int, seconds: float, settle_s: float) -> dict[str, object]:
    pane = Pane(f"bench-fleet-{time.monotonic_ns()}")
    command = (
        f"cd {shlex.quote(str(ROOT))} && exec env -u COLUMNS -u LINES "
        f"{shlex.quote(sys.executable)} -m gpuherd fleet --prometheus {url} "
        "--interval 1 --stale-after 10"
    )
    pane.start(command, 200, 90)
    try:
        pane.wait_for(lambda s: f"{hosts} hosts" in s, timeout_s=60)
        pid = int(pane.tmux("display", "-p", "-t", "e2e", "#{pane_pid}").strip())
        process = psutil.Process(pid)
        time.sleep(settle_s)
        before, started = process.cpu_times(), time.monotonic()
        refresh_ms: list[int] = []
        updates: set[str] = set()
        while time.monotonic() - started < seconds:
            title = pane.text().splitlines()[0]
            found = re.search(r"updated (\S+ \S+) in (\d+) ms", title)
            if found and found.group(1) not in updates:
                updates.add(found.group(1))
                refresh_ms.append(int(found.group(2)))
            time.sleep(0.5)
        after, elapsed = process.cpu_times(), time.monotonic() - started
        rows = sum(1 for line in pane.text().splitlines() if line.startswith(" sim-"))
    finally:
        pane.tmux("kill-server")
    cpu = (after.user - before.user) + (after.system - before.system)
    return {
        "cpu_pct_one_core": round(100 * cpu / elapsed, 2),
        "window_s": round(elapsed, 1),
        "refreshes_seen": len(updates),
        "rows_on_screen": rows,
        "refresh_ms_median": statistics.median(refresh_ms) if refresh_ms else None,
        "refresh_ms_max": max(refresh_ms) if refresh_ms else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--settle", type=float, default=10.0)
    parser.add_argument("--simulate", metavar="PORT_FILE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.simulate:
        simulate(args.hosts, Path(args.simulate))
        return
    with tempfile.TemporaryDirectory() as tmp:
        port_file = Path(tmp) / "ports.json"
        sim = subprocess.Popen(
            [sys.executable, __file__, "--hosts", str(args.hosts), "--simulate", str(port_file)],
            cwd=ROOT,
        )
        try:
            ports = wait_for(
                lambda: port_file.exists() and json.loads(port_file.read_text()),
                timeout_s=120,
                what="the simulated hosts",
            )
            targets = [f"127.0.0.1:{port}" for port in ports]
            with running_prometheus(Path(tmp) / "prom", targets, interval_s=1.0) as prom:
                wait_for(
                    lambda: prom.targets_up() == args.hosts, timeout_s=60, what="every host scraped"
                )
                queries = query_times(prom.url, 20)
                result = measure(prom.url, args.hosts, args.seconds, args.settle)
                series = prom.value("count({__name__=~'gpuherd_.+'})")
        finally:
            sim.terminate()
            sim.wait(30)
    result.update(
        {
            "machine": f"{platform.node()} {platform.machine()} {psutil.cpu_count()} CPUs, "
            f"Python {platform.python_version()}",
            "hosts": args.hosts,
            "series_in_prometheus": series,
            "query_ms_median": round(1000 * statistics.median(queries), 1),
            "query_ms_max": round(1000 * max(queries), 1),
        }
    )
    print(json.dumps(result))
    print(f"hosts {args.hosts}, GPU rows on screen {result['rows_on_screen']}, series {series:.0f}")
    print(f"query alone: median {result['query_ms_median']} ms, max {result['query_ms_max']} ms")
    print(
        f"query to rows on the table: median {result['refresh_ms_median']} ms, max "
        f"{result['refresh_ms_max']} ms over {result['refreshes_seen']} refreshes"
    )
    print(f"fleet view CPU: {result['cpu_pct_one_core']} % of one core over {result['window_s']} s")


if __name__ == "__main__":
    main()
