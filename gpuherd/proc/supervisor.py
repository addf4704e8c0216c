"""`python -m gpuherd.proc.supervisor`: runs one command so that it never depends on gpuherd.

gpuherd starts this in a session of its own, so that kill -9 of gpuherd, the OOM killer, a
closed terminal or a broken pipe on gpuherd's stdout never reach it. It starts the command in a
process group of its own (gpuherd forwards signals to that group), owns the command's stdout
and stderr, writes them to the log a whole line at a time and echoes them to the stdout and
stderr it was given, and when the command ends writes the exit record and exits with the
command's status. Output of a process the command left behind is still copied until that
process closes its stdout and stderr, so it never dies of SIGPIPE.

Standard library only: it starts in a few tens of milliseconds.

    python -m gpuherd.proc.supervisor --log PATH [--exit-file PATH] [--status-fd N]
        [--no-echo] -- CMD ARGS...
"""

from __future__ import annotations

import argparse
import math
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from gpuherd.proc.linelog import LineJoiner, LogFile
from gpuherd.proc.status import (
    EXITED,
    LOG_FAILED,
    START_FAILED,
    STARTED,
    ExitRecordFile,
    StatusPipe,
    exit_status,
    start_error,
)

CHUNK_BYTES = 64 * 1024
DRAIN_CHUNKS = 16
"""At the command's exit, at most this many chunks per stream are read before the exit is
reported: what the command wrote, even if a process it left behind keeps writing."""
CHILD_POLL_S = 0.05
"""Without a pidfd (Linux before 5.3), how often the command's exit is checked."""
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _Echo:
    """One of our own streams (the terminal gpuherd was given); given up once it goes away."""

    def __init__(self, fd: int | None) -> None:
        self.fd = fd

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view.nbytes and self.fd is not None:
            try:
                view = view[os.write(self.fd, view) :]
            except BlockingIOError:
                select.select([], [self.fd], [])  # someone made the terminal non-blocking
            except OSError:
                # EPIPE, EIO, EBADF: the pipe's reader or the terminal is gone (`| head`, a
                # closed tmux pane). Keep logging, so the command never blocks on a full pipe.
                self.fd = None


class Pump:
    """Copies the command's stdout and stderr to the log and to our own streams."""

    def __init__(self, pipes: Sequence[tuple[int, int | None]], log: LogFile) -> None:
        self.log = log
        self._poller = select.poll()
        self._streams: dict[int, tuple[LineJoiner, _Echo]] = {}
        for fd, echo_fd in pipes:
            os.set_blocking(fd, False)
            self._poller.register(fd, select.POLLIN)
            self._streams[fd] = (LineJoiner(log), _Echo(echo_fd))

    @property
    def open(self) -> bool:
        """Whether a stream has not ended yet."""
        return bool(self._streams)

    def watch(self, fd: int) -> None:
        """Also wake `wait` when `fd` becomes readable (a pidfd)."""
        self._poller.register(fd, select.POLLIN)

    def unwatch(self, fd: int) -> None:
        """Stop waking on `fd`."""
        self._poller.unregister(fd)

    def wait(self, timeout_s: float | None) -> None:
        """Wait for output (or `timeout_s`), then read, write and sync whatever is due."""
        due = self.due_in(time.monotonic())
        if due is not None:
            timeout_s = due if timeout_s is None else min(timeout_s, due)
        ready = self._poller.poll(None if timeout_s is None else math.ceil(timeout_s * 1000))
        now = time.monotonic()
        for joiner, _ in self._streams.values():
            joiner.flush_if_quiet(now)
        self.log.sync_if_due()
        for fd, _ in ready:
            if fd in self._streams:
                self._read(fd, now)

    def drain(self) -> None:
        """Read what the pipes hold now, without waiting for more."""
        now = time.monotonic()
        for fd in list(self._streams):
            for _ in range(DRAIN_CHUNKS):
                if not self._read(fd, now):
                    break

    def due_in(self, now: float) -> float | None:
        """Seconds until a partial line or a sync is due; `None` when nothing is."""
        dues = [joiner.due_in(now) for joiner, _ in self._streams.values()]
        dues.append(self.log.sync_due_in())
        return min((due for due in dues if due is not None), default=None)

    def _read(self, fd: int, now: float) -> bool:
        """Copy one chunk from `fd`; False when it held nothing or has ended."""
        joiner, echo = self._streams[fd]
        try:
            chunk = os.read(fd, CHUNK_BYTES)
        except BlockingIOError:
            return False
        except OSError:
            chunk = b""  # cannot happen on a pipe we own; treat it as the end
        if not chunk:
            joiner.flush()
            self._poller.unregister(fd)
            os.close(fd)
            del self._streams[fd]
            return False
        echo.write(chunk)
        joiner.feed(chunk, now)
        return True


class _Forwarder:
    """SIGINT, SIGTERM and SIGHUP sent to the supervisor go to the command's process group."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.ended = False
        """Set before the command is reaped, so its pid is never signalled once reused."""

    def handle(self, signum: int, frame: FrameType | None) -> None:
        if not self.ended:
            try:
                os.killpg(self.pid, signum)
            except ProcessLookupError:
                pass  # the group is gone; the exit is seen by the loop


@contextmanager
def _forwarding(forwarder: _Forwarder) -> Iterator[None]:
    previous = {signum: signal.signal(signum, forwarder.handle) for signum in FORWARDED}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _has_exited(pid: int) -> bool:
    """Whether the command has ended, without reaping it (its pid stays reserved)."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _pump_until_done(
    proc: subprocess.Popen[bytes], pump: Pump, on_exit: Callable[[int], None]
) -> int:
    """Copy output until the command has exited and every writer closed the pipes."""
    forwarder = _Forwarder(proc.pid)
    pidfd = _pidfd(proc.pid)
    if pidfd is not None:
        pump.watch(pidfd)
    code: int | None = None
    with _forwarding(forwarder):
        while code is None or pump.open:
            pump.wait(None if code is not None or pidfd is not None else CHILD_POLL_S)
            if code is None and _has_exited(proc.pid):
                forwarder.ended = True
                code = exit_status(proc.wait())
                if pidfd is not None:
                    pump.unwatch(pidfd)
                    os.close(pidfd)
                pump.drain()
                on_exit(code)
    return code


def supervise(
    argv: Sequence[str],
    log_path: Path,
    exit_path: Path | None,
    status: StatusPipe,
    echo: bool = True,
) -> int:
    """Run `argv` to its end as described above; its exit status (127/126: it could not start)."""
    log = LogFile(
        log_path,
        on_error=lambda error: status.send(
            LOG_FAILED, errno=error.errno, error=error.strerror or str(error)
        ),
    )
    record: dict[str, Any] = {"command": list(argv), "started_at": time.time()}
    exit_file = None if exit_path is None else ExitRecordFile(exit_path)

    def finish(code: int, error: str | None = None) -> None:
        log.sync()
        record.update(ended_at=time.time(), exit_code=code, log_dropped_bytes=log.dropped_bytes)
        if error is not None:
            record["error"] = error
        message = {key: value for key, value in record.items() if key != "command"}
        if exit_file is not None:
            try:
                exit_file.write(record)
            except OSError as failure:
                message["warning"] = f"could not write {exit_file.path.name}: {failure.strerror}"
        status.send(START_FAILED if error is not None else EXITED, **message)
        status.close()  # gpuherd sees the end of its pipe, even while the pipes stay open

    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as error:
        message, code = start_error(argv[0], error)
        finish(code, error=message)
        log.close()
        return code
    record["pid"] = proc.pid
    status.send(STARTED, pid=proc.pid)
    assert proc.stdout is not None and proc.stderr is not None
    pump = Pump(
        [(proc.stdout.fileno(), 1 if echo else None), (proc.stderr.fileno(), 2 if echo else None)],
        log,
    )
    code = _pump_until_done(proc, pump, finish)
    log.close()
    return code


@dataclass(frozen=True, slots=True)
class Invocation:
    """The supervisor's own command line, typed: the command and where its output goes."""

    command: list[str]
    log: Path
    exit_file: Path | None
    status_fd: int | None
    echo: bool


def _parse(argv: Sequence[str]) -> Invocation:
    argv = list(argv)
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        raise SystemExit("gpuherd.proc.supervisor: give the command after `--`")
    cut = argv.index("--")
    parser = argparse.ArgumentParser(prog="python -m gpuherd.proc.supervisor")
    parser.add_argument("--log", required=True, type=Path)
    parser.add_argument("--exit-file", type=Path)
    parser.add_argument("--status-fd", type=int)
    parser.add_argument("--no-echo", action="store_true")
    parsed = parser.parse_args(argv[:cut])
    return Invocation(
        argv[cut + 1 :], parsed.log, parsed.exit_file, parsed.status_fd, echo=not parsed.no_echo
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; the command's exit status."""
    invocation = _parse(sys.argv[1:] if argv is None else argv)
    # Python ignores SIGPIPE already; say so here, since everything rests on it: a reader of
    # our stdout that goes away must cost the echo, never the supervisor.
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    return supervise(
        invocation.command,
        invocation.log,
        invocation.exit_file,
        StatusPipe(invocation.status_fd),
        echo=invocation.echo,
    )


if __name__ == "__main__":
    sys.exit(main())
