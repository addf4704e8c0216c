"""The Docker collector without an engine: finding the socket, and failing clearly and fast."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from collectors.base import CollectorError, CollectorUnavailable, Unavailable
from collectors.loop import run_collector
from collectors.machine.containers import DockerCollector, engine_name, engine_socket
from collectors.roles import CONTAINERS, LATEST_ONLY, ROLE_OF_SAMPLE
from collectors.samples import ContainerTick

REPO = Path(__file__).resolve().parents[2]


def listening(path: Path) -> socket.socket:
    path.parent.mkdir(parents=True, exist_ok=True)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.listen()
    return sock


def test_docker_host_names_the_socket(tmp_path: Path) -> None:
    with listening(tmp_path / "engine.sock"):
        url = engine_socket({"DOCKER_HOST": f"unix://{tmp_path}/engine.sock"})
    assert url == f"unix://{tmp_path}/engine.sock"
    assert engine_socket({"DOCKER_HOST": "tcp://10.0.0.5:2375"}) == "tcp://10.0.0.5:2375"


def test_without_docker_host_the_first_default_socket_that_exists(tmp_path: Path) -> None:
    defaults = (
        str(tmp_path / "docker.sock"),
        "{runtime}/docker.sock",
        "{runtime}/podman/podman.sock",
    )
    env = {"XDG_RUNTIME_DIR": str(tmp_path / "run")}
    with listening(tmp_path / "run" / "podman" / "podman.sock"):
        assert engine_socket(env, defaults) == f"unix://{tmp_path}/run/podman/podman.sock"
        with listening(tmp_path / "run" / "docker.sock"):
            assert engine_socket(env, defaults) == f"unix://{tmp_path}/run/docker.sock"


def test_no_socket_is_unavailable_with_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(CollectorUnavailable) as raised:
        engine_socket({"DOCKER_HOST": f"unix://{tmp_path}/none.sock"})
    assert raised.value.msg == (
        f"no container engine: no socket at DOCKER_HOST=unix://{tmp_path}/none.sock. Start "
        "Docker, or point DOCKER_HOST at an engine's socket (podman: "
        "unix://$XDG_RUNTIME_DIR/podman/podman.sock)"
    )
    with pytest.raises(CollectorUnavailable) as raised:
        engine_socket(
            {"XDG_RUNTIME_DIR": str(tmp_path)},
            (str(tmp_path / "a.sock"), "{runtime}/podman/podman.sock"),
        )
    assert f"no socket at {tmp_path}/a.sock; {tmp_path}/podman/podman.sock." in raised.value.msg


def test_no_engine_costs_one_look_and_never_loads_the_library(tmp_path: Path) -> None:
    code = (
        "import sys, time\n"
        "from collectors.base import CollectorUnavailable\n"
        "from collectors.machine.containers import DockerCollector\n"
        f"c = DockerCollector(environ={{'DOCKER_HOST': 'unix://{tmp_path}/x.sock'}})\n"
        "try: c.open()\n"
        "except CollectorUnavailable: print('unavailable')\n"
        "print(sorted(m for m in ('docker', 'requests', 'urllib3') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert out.stdout.splitlines() == ["unavailable", "[]"], out.stderr


def test_the_loop_reports_unavailable_once_and_ends(tmp_path: Path) -> None:
    events: list = []
    collector = DockerCollector(environ={"DOCKER_HOST": f"unix://{tmp_path}/none.sock"})
    thread = threading.Thread(
        target=run_collector, args=(collector, events.append, threading.Event())
    )
    thread.start()
    thread.join(10)
    assert not thread.is_alive()
    assert [type(e) for e in events] == [Unavailable]
    assert events[0].source == "docker" and events[0].error.title == "Containers"


def test_a_socket_nobody_listens_on_fails_the_tick_and_is_tried_again(tmp_path: Path) -> None:
    # An engine that died leaves its socket behind: not unavailable, it may come back.
    path = tmp_path / "stale.sock"
    listening(path).close()
    collector = DockerCollector(environ={"DOCKER_HOST": f"unix://{path}"})
    collector.open()
    for _ in range(2):
        with pytest.raises(CollectorError) as raised:
            collector.sample()
        assert raised.value.msg == (
            f"the container engine at unix://{path} is not running (Connection refused)"
        )
    collector.close()


def test_an_engine_that_does_not_answer_http_fails_the_tick(tmp_path: Path) -> None:
    path = tmp_path / "mute.sock"
    server = listening(path)

    def answer_garbage() -> None:
        conn, _ = server.accept()
        conn.recv(4096)
        conn.sendall(b"not http at all\r\n\r\n")
        conn.close()

    threading.Thread(target=answer_garbage, daemon=True).start()
    collector = DockerCollector(environ={"DOCKER_HOST": f"unix://{path}"})
    collector.open()
    with pytest.raises(CollectorError) as raised:
        collector.sample()
    assert raised.value.msg.startswith(f"the container engine at unix://{path} does not answer")
    collector.close()
    server.close()


def test_the_role_table_knows_container_ticks() -> None:
    assert ROLE_OF_SAMPLE[ContainerTick] == CONTAINERS == DockerCollector.role == "containers"
    assert CONTAINERS in LATEST_ONLY


@pytest.mark.parametrize(
    ("answer", "name"),
    [
        (
            {"Version": "20.10.24+dfsg1", "Components": [{"Name": "Engine"}]},
            "Docker 20.10.24+dfsg1",
        ),
        (
            {"Version": "4.9.3", "Components": [{"Name": "Podman Engine"}, {"Name": "Conmon"}]},
            "Podman Engine 4.9.3",
        ),
        ({}, "Docker"),
    ],
)
def test_engine_name(answer: dict, name: str) -> None:
    assert engine_name(answer) == name


def test_a_connection_refused_for_permission_says_how_to_get_access(tmp_path: Path) -> None:
    # The shape requests gives a denied connect() (an LSM, or a socket whose mode changed
    # after the collector found it): the words are those of the check in `open`.
    import requests
    import urllib3

    denied = requests.exceptions.ConnectionError(
        urllib3.exceptions.ProtocolError(
            "Connection aborted.", PermissionError(13, "Permission denied")
        )
    )
    collector = DockerCollector(environ={"DOCKER_HOST": f"unix://{tmp_path}/engine.sock"})
    collector.url = f"unix://{tmp_path}/engine.sock"
    assert collector._failure(denied) == (
        f"cannot open unix://{tmp_path}/engine.sock: permission denied. Membership of the "
        "`docker` group gives access (log in again after joining it), or set DOCKER_HOST to a "
        "rootless engine's socket (rootless Docker, or podman: "
        "unix://$XDG_RUNTIME_DIR/podman/podman.sock)"
    )
