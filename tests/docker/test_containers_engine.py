"""The Docker collector against a real engine: stats beside `docker stats`, limits, churn."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from collectors.base import Failed
from collectors.machine.containers import DockerCollector
from collectors.samples import ContainerSample, ContainerTick
from tests.docker_env import BUSY_PCT, Containers, LoopRun, docker, stats_cpu_pct
from tests.recorded import wait_until

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
MiB = 1 << 20


def find(tick: ContainerTick | None, name: str) -> ContainerSample | None:
    if tick is None:
        return None
    return next((c for c in tick.containers if c.name == name), None)


def sampled(run: LoopRun, name: str, field: str = "cpu_pct") -> ContainerSample:
    """Wait for a tick where container `name` has `field` known; that sample."""
    wait_until(lambda: getattr(find(run.latest(), name), field, None) is not None, 30)
    found = find(run.latest(), name)
    assert found is not None
    return found


def test_busy_cpu_is_within_ten_points_of_docker_stats(containers: Containers) -> None:
    busy = containers.busy()
    idle = containers.idle()
    with LoopRun(DockerCollector(interval_s=0.2)) as run:
        sampled(run, busy.name)
        theirs = stats_cpu_pct(busy)  # takes two of the engine's 1-second readings
        ours = sampled(run, busy.name).cpu_pct
        quiet = sampled(run, idle.name).cpu_pct
    assert ours is not None and quiet is not None
    # One `yes` fills what the engine gives it: 50 to 100 % of a quiet 2-core VM, less beside
    # other work (BUSY_PCT).
    assert theirs > BUSY_PCT
    assert abs(ours - theirs) <= 10, (ours, theirs)
    assert quiet < 5
    assert not [e for e in run.events if isinstance(e, Failed)]


def test_memory_limit_is_shown_exactly_and_no_limit_is_the_hosts_memory(
    containers: Containers,
) -> None:
    limited = containers.idle("limited", "--memory", "64m")
    free = containers.idle("free")
    host_total = int(docker("info", "--format", "{{.MemTotal}}").stdout)
    with LoopRun(DockerCollector(interval_s=0.2)) as run:
        small = sampled(run, limited.name, "memory_limit_bytes")
        large = sampled(run, free.name, "memory_limit_bytes")
    assert small.memory_limit_bytes == 64 * MiB
    assert large.memory_limit_bytes == host_total
    assert small.memory_used_bytes is not None and 0 < small.memory_used_bytes < 64 * MiB
    assert small.pids == 1
    assert small.status == "running" and small.image.startswith("gpuherd-test-busybox")
    assert small.id == limited.id and small.short_id == limited.short_id
    assert small.gpu_devices == ()
    assert small.net_rx_bytes_per_s is None  # --network none: no interface to count


def test_containers_stopped_or_removed_mid_run_disappear_without_an_error(
    containers: Containers,
) -> None:
    stays, stopped = containers.idle("stays"), containers.idle("stop")
    removed = containers.idle("rm")
    collector = DockerCollector(interval_s=0.2)
    with LoopRun(collector) as run:
        for c in (stays, stopped, removed):
            sampled(run, c.name, "memory_used_bytes")
        assert len(collector.readers) >= 3
        docker("stop", "-t", "0", stopped.name)
        docker("rm", "-f", removed.name)
        wait_until(
            lambda: (
                find(run.latest(), stopped.name) is None
                and find(run.latest(), removed.name) is None
            ),
            30,
        )
        after = run.latest()
        assert find(after, stays.name) is not None
        assert stopped.id not in collector.readers and removed.id not in collector.readers
        # Their stream threads end within a frame of the engine (a second), not at exit.
        wait_until(
            lambda: (
                not [
                    t
                    for t in threading.enumerate()
                    if t.name
                    in (f"docker:stats:{stopped.short_id}", f"docker:stats:{removed.short_id}")
                ]
            ),
            10,
        )
        assert sampled(run, stays.name, "memory_used_bytes").memory_used_bytes
    assert not [e for e in run.events if isinstance(e, Failed)]


def test_a_container_started_later_is_listed_and_read(containers: Containers) -> None:
    with LoopRun(DockerCollector(interval_s=0.2)) as run:
        wait_until(lambda: run.latest() is not None, 30)
        late = containers.busy("late")
        found = sampled(run, late.name)
    assert found.cpu_pct is not None and found.cpu_pct > BUSY_PCT


def test_the_engine_restarted_fails_the_ticks_then_recovers(private_engine) -> None:
    env = private_engine.env
    name = "gpuherd-test-restart"
    docker(
        "run",
        "-d",
        "--restart",
        "always",
        "--network",
        "none",
        "--stop-timeout",
        "1",
        "--name",
        name,
        "gpuherd-test-busybox:1",
        "sleep",
        "3600",
        env=env,
    )
    with LoopRun(DockerCollector(interval_s=0.2, environ=env)) as run:
        first = sampled(run, name, "memory_used_bytes")
        private_engine.stop()
        wait_until(lambda: any(isinstance(e, Failed) for e in run.events), 30)
        failed = next(e for e in run.events if isinstance(e, Failed))
        # Caught as the engine shuts down (its socket still there, resetting) or once it is
        # gone: either way the first failure names the engine and says it is down.
        assert re.fullmatch(
            rf"the container engine at {re.escape(env['DOCKER_HOST'])} (is not running \(No "
            r"such file or directory\)|does not answer: .+)",
            failed.error.msg,
        ), failed.error.msg
        private_engine.start()
        events_before = len(run.events)
        # The engine starts the container again (--restart always); its stats stream again.
        wait_until(
            lambda: (
                (c := find(run.latest(), name)) is not None
                and c.memory_used_bytes is not None
                and c.started_at != first.started_at
                and len(run.events) > events_before
            ),
            60,
        )
    kinds = [type(e).__name__ for e in run.events]
    assert "Recovered" in kinds[kinds.index("Failed") :]
    assert "Unavailable" not in kinds and "Crashed" not in kinds
    again = find(run.latest(), name)
    assert again is not None and again.started_at is not None
    assert first.started_at is not None and again.started_at > first.started_at


def test_a_socket_this_user_may_not_open_says_how_to_get_access(docker_engine: str) -> None:
    code = (
        "import sys; from collectors.base import CollectorUnavailable\n"
        "from collectors.machine.containers import DockerCollector\n"
        "try: DockerCollector().open()\n"
        "except CollectorUnavailable as e: print(e.msg)\n"
        "print('docker' in sys.modules)\n"
    )
    socket = Path("/var/run/docker.sock")
    if not socket.exists():
        pytest.skip("the engine does not listen on /var/run/docker.sock")
    if os.geteuid() != 0:
        pytest.skip("running the collector as another user needs root")
    out = None
    # The venv's interpreter may sit under a directory only root can enter (/root/.pyenv);
    # the system one then runs the same code (the path to the check is standard library).
    for python in (sys.executable, "/usr/bin/python3"):
        try:
            out = subprocess.run(
                [python, "-c", code],
                capture_output=True,
                text=True,
                cwd=REPO,
                user=65534,
                group=65534,
                extra_groups=[],
                timeout=60,
                env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
            )
            break
        except PermissionError:
            continue
    assert out is not None, "no Python interpreter the user nobody may run"
    assert out.returncode == 0, out.stderr
    msg, imported = out.stdout.splitlines()
    assert msg.startswith(
        "cannot open /var/run/docker.sock: permission denied. Membership of "
        "the `docker` group gives access"
    )
    assert "DOCKER_HOST" in msg
    assert imported == "False"  # denied before loading the library
