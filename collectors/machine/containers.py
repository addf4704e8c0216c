"""Running containers and their live stats, from Docker or podman's Docker-compatible socket.

The only module that imports `docker`, and only in `open`, once a socket is known to exist: a
machine without an engine pays one `stat` call. A stats request without streaming blocks while
the engine takes two readings a second apart (and a one-shot request still waits up to a second
for the engine's next collection cycle), so each running container gets one streaming reader
thread that keeps its last two readings; a tick lists the containers and computes the rates
from those readings (`collectors.machine.container_stats`), without waiting on any of them.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from collectors.base import CollectorError, CollectorUnavailable
from collectors.machine.container_stats import (
    StatsReading,
    container_sample,
    gpu_devices,
    parse_stats,
)
from collectors.machine.container_stats import parse_engine_time as engine_time
from collectors.roles import CONTAINERS
from collectors.samples import ContainerSample, ContainerTick

DEFAULT_SOCKETS = (
    "/var/run/docker.sock",
    "{runtime}/docker.sock",
    "{runtime}/podman/podman.sock",
    "/run/podman/podman.sock",
)
"""Where an engine listens when `DOCKER_HOST` is not set: Docker, rootless Docker, rootless and
rootful podman. The first that exists is used."""
REQUEST_TIMEOUT_S = 5.0
"""A listing or inspect that takes longer fails the tick (the engine hangs)."""
STREAM_TIMEOUT_S = 30.0
"""A stats stream silent this long is dropped and started again (the engine sends every 1 s)."""


class NoEngine(CollectorUnavailable):
    """No engine's socket exists here: the machine simply has no containers to show."""


@dataclass(frozen=True, slots=True)
class _Info:
    """What a container's inspect says that does not change while it runs."""

    started_at: float | None
    gpu_devices: tuple[str, ...]


def engine_socket(environ: Mapping[str, str], defaults: tuple[str, ...] = DEFAULT_SOCKETS) -> str:
    """The engine's URL: `DOCKER_HOST`, else the first default socket that exists.

    Raises `CollectorUnavailable` when there is none, or when the socket cannot be opened by
    this user: neither fixes itself while gpuherd runs.
    """
    host = environ.get("DOCKER_HOST", "")
    if host and not host.startswith("unix://"):
        return host  # tcp:// or ssh://: only connecting tells
    runtime = environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
    paths = [host[len("unix://") :]] if host else [p.format(runtime=runtime) for p in defaults]
    existing = [p for p in paths if os.path.exists(p)]
    if not existing:
        where = f"DOCKER_HOST={host}" if host else "; ".join(paths)
        raise NoEngine(
            f"no container engine: no socket at {where}. Start Docker, or point DOCKER_HOST at "
            "an engine's socket (podman: unix://$XDG_RUNTIME_DIR/podman/podman.sock)",
            title="Containers",
        )
    for path in existing:
        if os.access(path, os.R_OK | os.W_OK):
            return f"unix://{path}"
    raise CollectorUnavailable(denied_msg(existing[0]), title="Containers")


def engine_name(version: Mapping[str, Any]) -> str:
    """`Docker 20.10.24` or `Podman Engine 4.9.3`, from the engine's `/version` answer."""
    names = [str(c.get("Name")) for c in version.get("Components") or () if isinstance(c, dict)]
    product = next((n for n in names if "podman" in n.lower()), "Docker")
    return f"{product} {version.get('Version') or ''}".strip()


def denied_msg(where: str) -> str:
    """The words for a socket this user may not open."""
    return (
        f"cannot open {where}: permission denied. Membership of the `docker` group gives "
        "access (log in again after joining it), or set DOCKER_HOST to a rootless engine's "
        "socket (rootless Docker, or podman: unix://$XDG_RUNTIME_DIR/podman/podman.sock)"
    )


def _cause(error: BaseException) -> BaseException:
    """The innermost OS-level error behind a docker or requests exception, if any."""
    seen: set[int] = set()
    todo: list[Any] = [error]
    while todo:
        e = todo.pop()
        if not isinstance(e, BaseException) or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, OSError) and e.errno is not None:
            return e
        todo += [e.__cause__, e.__context__, *e.args, getattr(e, "reason", None)]
    return error


def _docker() -> Any:
    """The docker library, loaded on first use: the dashboard's start-up does not pay for it."""
    import docker  # noqa: TID251 (this is the module that talks to the engine)

    return docker


def _transport_errors() -> tuple[type[BaseException], ...]:
    """What a request raises when the engine or the connection fails (not a bug of ours)."""
    import requests
    import urllib3

    return (
        _docker().errors.DockerException,
        requests.RequestException,
        urllib3.exceptions.HTTPError,
        OSError,
    )


class _Reader:
    """One container's stats stream on a daemon thread, keeping its last two readings.

    It ends by itself when the container stops (the engine then sends empty frames) or is
    removed (the stream ends), when the engine goes away, or, within a frame (a second) of
    `stop`, when told to.
    """

    def __init__(
        self,
        client: Any,
        container_id: str,
        pair: tuple[StatsReading | None, StatsReading | None] = (None, None),
    ) -> None:
        self.pair = pair
        """(previous, latest) reading; replaced whole, so another thread reads it safely."""
        self.readings = 0
        self.stopped = False
        """The container was seen not running: its cached inspect is stale."""
        self.error: str | None = None
        """Why the stream ended early, if it did (the reader is started again while listed)."""
        self._stop = threading.Event()
        self._client, self._id = client, container_id
        self.thread = threading.Thread(
            target=self._run, name=f"docker:stats:{container_id[:12]}", daemon=True
        )
        self.thread.start()

    @property
    def alive(self) -> bool:
        """Whether the stream is still being read."""
        return self.thread.is_alive()

    def stop(self) -> None:
        """Ask the thread to end after the next frame (it never blocks the caller)."""
        self._stop.set()

    def _run(self) -> None:
        not_found: type[BaseException] = _docker().errors.NotFound
        failed: tuple[type[BaseException], ...] = (*_transport_errors(), ValueError)  # not JSON
        try:
            for frame in self._client.stats(self._id, stream=True, decode=True):
                reading = parse_stats(frame) if isinstance(frame, dict) else None
                if reading is None:
                    self.stopped = True
                    return
                self.pair = (self.pair[1], reading)
                self.readings += 1
                if self._stop.is_set():
                    return
        except not_found:
            self.stopped = True  # removed while being read: the next listing drops it
        except failed as error:
            self.error = f"{type(error).__name__}: {error}"
        finally:
            self._client.close()


class DockerCollector:
    """Lists running containers and their stats into a `ContainerTick` (a `Collector`).

    `open` only finds the socket (`CollectorUnavailable` when there is none or it is denied).
    The engine is connected to on the first tick and again after it went away: a tick while it
    does not answer (stopped, restarting) raises `CollectorError`, and the next one that gets an
    answer recovers, starting the stats readers again.
    """

    name = "docker"
    role = CONTAINERS

    def __init__(
        self,
        interval_s: float = 1.0,
        environ: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.interval_s = interval_s
        self.environ = environ if environ is not None else os.environ
        self._clock = clock
        self.url: str | None = None
        self.engine: str | None = None
        self._client: Any = None
        self._readers: dict[str, _Reader] = {}
        self._info: dict[str, _Info] = {}

    def open(self) -> None:
        """Find the engine's socket and load the docker library; nothing is connected yet."""
        self.url = engine_socket(self.environ)
        try:
            _transport_errors()
        except ImportError as error:
            raise CollectorUnavailable(
                f"the docker package cannot be loaded: {error}", title="Containers"
            ) from None

    def close(self) -> None:
        """Stop every stats reader and let the connection go."""
        self._disconnect()

    @property
    def readers(self) -> dict[str, _Reader]:
        """The live stats readers by full container id (for tests and benchmarks)."""
        return dict(self._readers)

    def wait_readings(self, count: int, timeout_s: float) -> bool:
        """Wait until every listed container has `count` readings (or its reader ended)."""
        deadline = time.monotonic() + timeout_s
        while True:
            pending = [r for r in self._readers.values() if r.alive and r.readings < count]
            if not pending:
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)

    def sample(self) -> ContainerTick:
        """List the running containers with their latest stats; `CollectorError` if no answer."""
        taken_at = self._clock()
        try:
            client = self._connect()
            listed = client.containers()
            samples = [s for entry in listed if (s := self._sample(client, entry)) is not None]
        except _transport_errors() as error:
            self._disconnect()
            raise CollectorError(self._failure(error), title="Containers") from None
        self._forget(present={entry.get("Id") for entry in listed})
        samples.sort(key=lambda s: (s.name, s.id))
        return ContainerTick(taken_at, tuple(samples), self.engine)

    def _failure(self, error: BaseException) -> str:
        cause = _cause(error)
        if isinstance(cause, PermissionError):
            return denied_msg(str(self.url))
        if isinstance(cause, (FileNotFoundError, ConnectionRefusedError)):
            return f"the container engine at {self.url} is not running ({cause.strerror})"
        return f"the container engine at {self.url} does not answer: {cause}"

    def _connect(self) -> Any:
        if self._client is None:
            client = _docker().APIClient(
                base_url=self.url, version="auto", timeout=REQUEST_TIMEOUT_S
            )
            self.engine = engine_name(client.version())
            self._client = client
        return self._client

    def _disconnect(self) -> None:
        for reader in self._readers.values():
            reader.stop()
        self._readers.clear()
        self._info.clear()
        if self._client is not None:
            self._client.close()
            self._client = None

    def _sample(self, client: Any, entry: Mapping[str, Any]) -> ContainerSample | None:
        """One listed container's sample; `None` when it was removed since the listing."""
        cid = str(entry.get("Id") or "")
        if not cid:
            return None
        reader = self._readers.get(cid)
        if reader is not None and reader.stopped:
            self._info.pop(cid, None)  # it stopped (and maybe started again): inspect anew
        info = self._info.get(cid)
        if info is None:
            errors = _docker().errors
            try:
                inspect = client.inspect_container(cid)
            except errors.NotFound:
                return None  # removed since the listing
            except errors.APIError:
                # The engine refused this container only (a 500 mid-restart): it is listed
                # without its start time and GPUs, and asked again at the next tick.
                info = _Info(None, ())
            else:
                info = self._info[cid] = _Info(
                    engine_time(inspect.get("State", {}).get("StartedAt")), gpu_devices(inspect)
                )
        if reader is None or not reader.alive:
            reader = self._readers[cid] = self._start_reader(cid, reader)
        prev, cur = reader.pair
        return container_sample(entry, info.started_at, info.gpu_devices, prev, cur)

    def _start_reader(self, cid: str, old: _Reader | None) -> _Reader:
        # A client per stream: each holds its connection for as long as it reads, and a
        # shared pool would log "connection pool is full" past ten containers.
        client = _docker().APIClient(
            base_url=self.url,
            version=self._client.api_version,
            timeout=STREAM_TIMEOUT_S,
            max_pool_size=1,
        )
        keep = old.pair if old is not None and not old.stopped else (None, None)
        return _Reader(client, cid, keep)

    def _forget(self, present: set[Any]) -> None:
        for cid in [c for c in self._readers if c not in present]:
            self._readers.pop(cid).stop()
        for cid in [c for c in self._info if c not in present]:
            del self._info[cid]
