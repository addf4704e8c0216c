"""The collector on podman's Docker-compatible socket, named by DOCKER_HOST."""

from __future__ import annotations

import pytest

from collectors.base import Failed
from collectors.machine.containers import DockerCollector
from tests.docker_env import BUSY_PCT, LoopRun, PrivatePodman, unique_name
from tests.docker_env import docker as docker_cli
from tests.recorded import wait_until

pytestmark = pytest.mark.docker
MiB = 1 << 20


def named(run: LoopRun, name: str):
    latest = run.latest()
    return None if latest is None else next((c for c in latest.containers if c.name == name), None)


def test_podman_containers_are_listed_with_their_stats(private_podman: PrivatePodman) -> None:
    busy, idle = unique_name("pod-busy"), unique_name("pod-idle")
    busy_id = private_podman.run(busy, ["sh", "-c", "yes > /dev/null"], "--memory", "64m")
    private_podman.run(idle, ["sleep", "3600"])
    with LoopRun(DockerCollector(interval_s=0.5, environ=private_podman.env)) as run:
        wait_until(lambda: getattr(named(run, busy), "memory_limit_bytes", None) is not None, 30)
        first = named(run, busy)
        assert run.latest().engine.startswith("Podman Engine ")
        assert first.id == busy_id and first.image == f"localhost/{'gpuherd-test-busybox:1'}"
        assert first.memory_limit_bytes == 64 * MiB and first.pids == 1
        # podman's compatible API streams a reading every 5 s: the rate needs two.
        wait_until(lambda: getattr(named(run, busy), "cpu_pct", None) is not None, 30)
        theirs = docker_cli(
            "stats", "--no-stream", "--format", "{{.CPUPerc}}", busy, env=private_podman.env
        ).stdout.strip()
        ours = named(run, busy).cpu_pct
        private_podman.podman("stop", "-t", "0", idle)
        wait_until(lambda: named(run, idle) is None, 30)
        assert named(run, busy) is not None
    assert ours > BUSY_PCT, (ours, theirs)
    assert not [e for e in run.events if isinstance(e, Failed)]
