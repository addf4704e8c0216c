"""`gpuherd snapshot` against a real engine: a GPU process is named by its container."""

from __future__ import annotations

import json
import re

import pytest

from collectors.machine.nvml import ProcessEntry
from gpuherd.common.options import SnapshotOptions
from gpuherd.snapshot.snapshot import run
from tests.docker_env import Container, Containers, docker
from tests.fakes import FakeGpu, FakeNvml, GiB
from tests.recorded import wait_until

pytestmark = pytest.mark.docker


def started_in(container: Container, *command: str) -> int:
    """Start `command` in the running container (`docker exec -d`); its host pid."""
    docker("exec", "-d", container.name, *command)
    found: list[int] = []

    def listed() -> bool:
        rows = docker("top", container.name).stdout.splitlines()[1:]
        found[:] = [int(r.split()[1]) for r in rows if r.endswith(" ".join(command))]
        return bool(found)

    wait_until(listed, 20)
    return found[0]


def test_a_process_started_in_a_container_is_attributed_by_name(
    containers: Containers, capsys: pytest.CaptureFixture[str]
) -> None:
    box = containers.idle("snap")
    pid = started_in(box, "sleep", "4321")
    # No GPU here: the driver's side is scripted, the process, its cgroup and the engine are real.
    fake = FakeNvml(
        [
            FakeGpu(uuid="GPU-a", used=12 * GiB, compute=[ProcessEntry(pid, 10 * GiB)]),
            FakeGpu(uuid="GPU-b"),
        ]
    )
    assert run(SnapshotOptions(json=True), backend=fake) == 0
    data = json.loads(capsys.readouterr().out)
    (proc,) = data["gpus"][0]["processes"]
    assert proc["pid"] == pid and proc["command"] == "sleep 4321"
    assert proc["container"] == box.short_id
    assert proc["container_name"] == box.name
    mine = [c for c in data["containers"] if c["name"] == box.name]
    assert len(mine) == 1
    assert mine[0]["id"] == box.id and mine[0]["status"] == "running"
    assert mine[0]["gpu_memory_bytes"] == 10 * GiB and mine[0]["gpu_pids"] == [pid]
    assert mine[0]["memory_used_bytes"] is not None and mine[0]["pids"] == 2
    assert data["containers_error"] is None and data["container_engine"].startswith("Docker ")

    assert run(SnapshotOptions(json=False), backend=fake) == 0
    table = capsys.readouterr().out
    assert re.search(rf"\b{pid}\b.*sleep 4321 \[{re.escape(box.name)}\]", table)
    assert re.search(
        rf"^{re.escape(box.name)}\s+gpuherd-test-busybox:1\s+running\s.*\s10\.0 GiB$", table, re.M
    )
