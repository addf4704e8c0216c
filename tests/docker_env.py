"""A real Docker engine for tests and benchmarks: is one there, a registry-free image, containers.

The image is `docker import` of a tar holding Debian's static busybox with links for `sh`,
`sleep` and `yes`, so nothing is pulled from a registry. Every container is named with the
`gpuherd-test-` prefix and removed by whoever started it; a private engine (its own socket,
data and exec roots) serves the tests that stop and restart an engine, since other people's
tests use the machine's engine at the same time.
"""

from __future__ import annotations

import io
import itertools
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from collectors.base import CollectorEvent, Sampled
from collectors.loop import run_collector

IMAGE = "gpuherd-test-busybox:1"
PREFIX = "gpuherd-test-"
BUSYBOX = Path("/bin/busybox")
APPLETS = ("sh", "sleep", "yes")
ENGINE_FLAGS = ("--storage-driver=vfs", "--iptables=false", "--bridge=none")
"""What a nested or CI machine's engine needs: no overlay mounts, no firewall, no bridge."""
BUSY_PCT = 5.0
"""A container spinning one core reads above this CPU percent, however loaded the machine: on a
shared 2-core host with a dozen runnable processes it still gets about 15 %, while an idle one
reads 0 to 1 %. (20 % failed with the suite on several workers beside other people's work.)"""
_names = itertools.count(1)


def in_ci() -> bool:
    """Whether this is a CI run (`CI=true`), where the Docker tests are required."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def docker(
    *args: str, env: Mapping[str, str] | None = None, check: bool = True, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run the `docker` command; `check` raises with its stderr when it fails."""
    out = subprocess.run(
        ["docker", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=None if env is None else {**os.environ, **env},
    )
    if check and out.returncode != 0:
        raise RuntimeError(f"docker {' '.join(args)}: {out.stderr.strip()}")
    return out


def engine_problem(env: Mapping[str, str] | None = None) -> str | None:
    """Why no Docker engine can be used here (`None`: `docker info` answers)."""
    if shutil.which("docker") is None:
        return "the docker command is not installed (Debian: apt-get install docker.io)"
    if not BUSYBOX.exists():
        return f"{BUSYBOX} is missing (Debian: apt-get install busybox-static)"
    out = docker("info", "--format", "{{.ServerVersion}}", env=env, check=False, timeout=30)
    if out.returncode != 0:
        return f"no Docker engine answers `docker info`: {out.stderr.strip()[:300]}"
    return None


def image_tar() -> bytes:
    """A root filesystem of busybox and its applet links, as a tar."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(BUSYBOX, arcname="bin/busybox")
        for applet in APPLETS:
            link = tarfile.TarInfo(f"bin/{applet}")
            link.type, link.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(link)
    return buffer.getvalue()


def build_image(image: str = IMAGE, env: Mapping[str, str] | None = None) -> str:
    """Import the busybox image into the engine unless it has it already; its name."""
    if docker("image", "inspect", image, env=env, check=False).returncode != 0:
        with tempfile.NamedTemporaryFile(suffix=".tar") as tar:
            tar.write(image_tar())
            tar.flush()
            docker("import", "-c", 'CMD ["/bin/sh"]', tar.name, image, env=env)
    return image


def unique_name(label: str) -> str:
    """A container name no other test run uses: prefix, label, pid and a counter."""
    return f"{PREFIX}{label}-{os.getpid()}-{next(_names)}"


@dataclass
class Container:
    """A started container: its full id and name."""

    id: str
    name: str

    @property
    def short_id(self) -> str:
        """The 12-character id `docker ps` shows."""
        return self.id[:12]


@dataclass
class Containers:
    """Starts containers and removes every one of them at `remove_all` (a fixture finalizer)."""

    env: Mapping[str, str] | None = None
    image: str = IMAGE
    started: list[Container] = field(default_factory=list)

    def run(self, label: str, command: Sequence[str], *options: str) -> Container:
        """`docker run -d` with no network and a one-second stop timeout; the container."""
        name = unique_name(label)
        out = docker(
            "run",
            "-d",
            "--network",
            "none",
            "--stop-timeout",
            "1",
            "--name",
            name,
            *options,
            self.image,
            *command,
            env=self.env,
        )
        container = Container(out.stdout.strip(), name)
        self.started.append(container)
        return container

    def busy(self, label: str = "busy", *options: str) -> Container:
        """A container spinning one core (`yes > /dev/null`)."""
        return self.run(label, ["sh", "-c", "yes > /dev/null"], *options)

    def idle(self, label: str = "idle", *options: str) -> Container:
        """A container that sleeps."""
        return self.run(label, ["sleep", "3600"], *options)

    def remove_all(self) -> None:
        """Remove every container started here, running or not."""
        names = [c.name for c in self.started]
        self.started.clear()
        if names:
            docker("rm", "-f", *names, env=self.env, check=False, timeout=120)


def host_pid(container: Container, env: Mapping[str, str] | None = None) -> int:
    """The host pid of the container's first process."""
    return int(docker("inspect", "-f", "{{.State.Pid}}", container.name, env=env).stdout)


def stats_cpu_pct(container: Container, env: Mapping[str, str] | None = None) -> float:
    """`docker stats --no-stream`'s CPU percent of one container."""
    out = docker("stats", "--no-stream", "--format", "{{.CPUPerc}}", container.name, env=env)
    return float(out.stdout.strip().rstrip("%"))


class PrivateEngine:
    """A `dockerd` of its own (root only): own socket, data and exec roots, short shutdown.

    `start` and `stop` may be called again and again; `close` stops it and removes its files.
    """

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}engine-"))
        self.socket = self.root / "docker.sock"
        self.env = {"DOCKER_HOST": f"unix://{self.socket}"}
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60.0) -> None:
        """Start the engine and wait until `docker info` answers."""
        log = (self.root / "dockerd.log").open("ab")
        self.proc = subprocess.Popen(
            [
                "dockerd",
                "--host",
                self.env["DOCKER_HOST"],
                "--data-root",
                str(self.root / "data"),
                "--exec-root",
                str(self.root / "exec"),
                "--pidfile",
                str(self.root / "docker.pid"),
                "--shutdown-timeout",
                "2",
                *ENGINE_FLAGS,
            ],
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while engine_problem(self.env) is not None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = (self.root / "dockerd.log").read_text(errors="replace")[-2000:]
                self.stop()
                raise RuntimeError(f"the private dockerd did not start:\n{tail}")
            time.sleep(0.2)

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop the engine (SIGTERM) and wait for it to exit."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def close(self) -> None:
        """Stop the engine and remove its directory."""
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


class LoopRun:
    """`run_collector` on a thread, every event it emits kept in order."""

    def __init__(self, collector: object) -> None:
        self.collector = collector
        self.events: list[CollectorEvent] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=run_collector,
            args=(collector, self.events.append, self.stop),
            name="test:docker-loop",
            daemon=True,
        )

    def __enter__(self) -> LoopRun:
        self.thread.start()
        return self

    def samples(self) -> list:
        """Every sample emitted so far."""
        return [e.sample for e in list(self.events) if isinstance(e, Sampled)]

    def latest(self):
        """The newest sample, or `None`."""
        found = self.samples()
        return found[-1] if found else None

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)
        assert not self.thread.is_alive(), "the collector loop did not stop"


class PrivatePodman:
    """podman's Docker-compatible API on a socket of its own (root only): its own storage, vfs.

    `podman system service` serves the Docker Engine API; `podman(...)` runs the podman command
    against the same storage, for what the API need not do (import, run).
    """

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix=f"{PREFIX}podman-"))
        self.socket = self.root / "podman.sock"
        self.env = {"DOCKER_HOST": f"unix://{self.socket}"}
        self.options = [
            "--root",
            str(self.root / "storage"),
            "--runroot",
            str(self.root / "run"),
            "--storage-driver",
            "vfs",
            "--cgroup-manager",
            "cgroupfs",
            "--events-backend",
            "file",
        ]
        self.proc: subprocess.Popen[bytes] | None = None

    def podman(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run `podman` on this storage; raises with its stderr when it fails."""
        out = subprocess.run(
            ["podman", *self.options, *args], capture_output=True, text=True, timeout=timeout
        )
        if out.returncode != 0:
            raise RuntimeError(f"podman {' '.join(args)}: {out.stderr.strip()}")
        return out

    def start(self, timeout_s: float = 60.0) -> None:
        """Start the API service and wait until it answers; import the test image."""
        log = (self.root / "service.log").open("ab")
        self.proc = subprocess.Popen(
            ["podman", *self.options, "system", "service", "--time=0", self.env["DOCKER_HOST"]],
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while engine_problem(self.env) is not None:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("the podman API service did not start")
            time.sleep(0.2)
        with tempfile.NamedTemporaryFile(suffix=".tar") as tar:
            tar.write(image_tar())
            tar.flush()
            self.podman("import", tar.name, IMAGE)

    def run(self, name: str, command: Sequence[str], *options: str) -> str:
        """`podman run -d` with no network; its id.

        podman sets open-files and process limits that a sandbox may refuse (`error setting
        rlimits`, seen even for the limits this process has): the test containers get small
        ones, plenty for a shell and `yes`.
        """
        ulimits = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024"]
        return self.podman(
            "run", "-d", "--network", "none", *ulimits, "--name", name, *options, IMAGE, *command
        ).stdout.strip()

    def close(self) -> None:
        """Remove every container, stop the service and remove the storage."""
        try:
            subprocess.run(
                ["podman", *self.options, "rm", "-f", "-a", "-t", "0"],
                capture_output=True,
                timeout=120,
            )
        finally:
            if self.proc is not None and self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(30)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
            shutil.rmtree(self.root, ignore_errors=True)
