"""CPU (percent of one core) and RSS of terminal monitors, each in its own tmux pane.

Each command runs alone, in turn, in a 160x50 pane of a private tmux server (so the terminal is
real and is redrawn as a person would see it), or with `--terminal pty` (the default when tmux
is missing) on a bare pseudo-terminal of that size whose output is read and dropped. After
`--warmup` seconds, the user+system time of the command's whole process tree is read from
/proc/<pid>/stat, again `--seconds` later, and the difference is divided by the window: 1.0 %
means one hundredth of one core. RSS is the tree's resident memory at the end (VmRSS summed),
with the main process's peak (VmHWM).

Examples, from the repository root:

    # here, no GPU: the dashboard replaying a recorded session
    python benchmarks/bench_tui_cpu.py --seconds 30 \
        --cmd "python -m gpuherd --replay tests/data/sessions/e2e --speed 1"

    # on the GPU machine, beside the anchors, in one run
    python benchmarks/bench_tui_cpu.py --seconds 30 \
        --cmd "python -m gpuherd" --cmd "nvitop --interval 1" \
        --cmd "gpustat -i 1" --cmd "nvidia-smi -l 1"

A command that exits before the window ends is reported as failed, not measured. Prints a table,
and one JSON object per command with --json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class Result:
    command: str
    ok: bool
    cpu_pct: float | None = None
    """Share of one core over the measured window."""
    startup_cpu_s: float | None = None
    """CPU seconds spent before the window (start-up and first frames)."""
    rss_mb: float | None = None
    peak_rss_mb: float | None = None
    processes: int = 0
    window_s: float = 0.0
    note: str = ""


def stat_of(pid: int) -> tuple[int, float] | None:
    """(parent pid, CPU seconds incl. reaped children) of one process, or None if it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces; fields resume after the last ')'.
    fields = raw[raw.rindex(")") + 2 :].split()
    ppid = int(fields[1])
    utime, stime, cutime, cstime = (int(fields[i]) for i in (11, 12, 13, 14))
    return ppid, (utime + stime + cutime + cstime) / CLK_TCK


def tree(root: int) -> dict[int, float]:
    """CPU seconds of `root` and every descendant alive now."""
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            info = stat_of(int(entry))
            if info is not None:
                parents[int(entry)], cpu[int(entry)] = info
    members = {root}
    grew = True
    while grew:
        grew = False
        for pid, ppid in parents.items():
            if ppid in members and pid not in members:
                members.add(pid)
                grew = True
    return {pid: cpu[pid] for pid in members if pid in cpu}


def status_kib(pid: int, key: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


class TmuxPane:
    """The command in a pane of a private tmux server: a real terminal that redraws."""

    def __init__(self, command: str, width: int, height: int, name: str) -> None:
        self.socket = name
        # `exec` makes the command itself the pane's process, so its tree is exactly the command.
        self._tmux(
            "new-session",
            "-d",
            "-s",
            "b",
            "-x",
            str(width),
            "-y",
            str(height),
            "-c",
            str(ROOT),
            f"exec {command}",
        )
        pid_text = self._tmux("display-message", "-p", "-t", "b", "#{pane_pid}")
        self.pid = int(pid_text) if pid_text.isdigit() else None

    def _tmux(self, *args: str) -> str:
        out = subprocess.run(
            ["tmux", "-u", "-L", self.socket, *args],
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=10,
        )
        return out.stdout.strip()

    def close(self) -> None:
        self._tmux("kill-server")


class PtyTerminal:
    """The command on a bare pseudo-terminal of the given size, for machines without tmux.

    A thread reads and discards the output, as a terminal would consume it; that reading is
    this script's CPU, not the command's.
    """

    def __init__(self, command: str, width: int, height: int, name: str) -> None:
        import pty

        pid, fd = pty.fork()
        if pid == 0:  # the child: size the terminal, then become the command
            import fcntl
            import struct
            import termios

            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))
            os.chdir(ROOT)
            os.environ["TERM"] = "xterm-256color"
            os.execvp("/bin/sh", ["/bin/sh", "-c", f"exec {command}"])
        self.pid: int | None = pid
        self.fd = fd
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        try:
            while os.read(self.fd, 65536):
                pass
        except OSError:
            return  # the command exited and the pty closed

    def close(self) -> None:
        assert self.pid is not None
        try:
            os.kill(self.pid, signal.SIGTERM)
            for _ in range(50):
                if os.waitpid(self.pid, os.WNOHANG)[0]:
                    break
                time.sleep(0.1)
            else:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(self.fd)


def measure(
    command: str,
    seconds: float,
    warmup: float,
    width: int,
    height: int,
    index: int = 0,
    terminal: str = "tmux",
) -> Result:
    result = Result(command, ok=False)
    kind = TmuxPane if terminal == "tmux" else PtyTerminal
    term = kind(command, width, height, f"bench-tui-cpu-{os.getpid()}-{index}")
    try:
        pid = term.pid
        if pid is None:
            result.note = "the terminal did not start the command"
            return result
        time.sleep(warmup)
        before, t0 = tree(pid), time.monotonic()
        if pid not in before:
            result.note = "exited during warm-up"
            return result
        time.sleep(seconds)
        after, t1 = tree(pid), time.monotonic()
        if pid not in after:
            result.note = "exited during the window"
            return result
        # A process born inside the window counts from zero; one that died is lost (rare here).
        spent = sum(after[p] - before.get(p, 0.0) for p in after)
        result.ok = True
        result.window_s = round(t1 - t0, 2)
        result.cpu_pct = round(100.0 * spent / (t1 - t0), 2)
        result.startup_cpu_s = round(sum(before.values()), 3)
        result.rss_mb = round(sum(status_kib(p, "VmRSS") for p in after) / 1024, 1)
        result.peak_rss_mb = round(status_kib(pid, "VmHWM") / 1024, 1)
        result.processes = len(after)
        return result
    finally:
        term.close()


def machine() -> str:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model or platform.processor()} x{os.cpu_count()}, Python {platform.python_version()}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--cmd",
        action="append",
        default=[],
        metavar="COMMAND",
        help="shell command to measure (repeatable; run one after another)",
    )
    parser.add_argument("--seconds", type=float, default=30.0, help="measured window")
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds before the window")
    parser.add_argument("--width", type=int, default=160)
    parser.add_argument("--height", type=int, default=50)
    parser.add_argument(
        "--terminal",
        choices=("auto", "tmux", "pty"),
        default="auto",
        help="tmux pane (default when tmux is installed) or a bare pty",
    )
    parser.add_argument("--json", action="store_true", help="also print one JSON line each")
    parser.add_argument(
        "rest",
        nargs=argparse.REMAINDER,
        help="-- COMMAND...: one more command, given as separate arguments",
    )
    args = parser.parse_args()
    commands = list(args.cmd)
    if args.rest:
        rest = args.rest[1:] if args.rest[0] == "--" else args.rest
        commands.append(" ".join(rest))
    if not commands:
        parser.error("give at least one --cmd COMMAND (or -- COMMAND ...)")
    terminal = args.terminal
    if terminal == "auto":
        terminal = "tmux" if shutil.which("tmux") else "pty"
    elif terminal == "tmux" and shutil.which("tmux") is None:
        print("bench_tui_cpu: tmux is not installed (use --terminal pty)", file=sys.stderr)
        return 2
    print(
        f"# {machine()}; {terminal} {args.width}x{args.height}; window {args.seconds:g} s "
        f"after {args.warmup:g} s warm-up"
    )
    results = [
        measure(c, args.seconds, args.warmup, args.width, args.height, i, terminal)
        for i, c in enumerate(commands)
    ]
    print(f"{'command':<60} {'CPU %':>7} {'start CPU s':>11} {'RSS MB':>7} {'peak MB':>7}")
    for r in results:
        if r.ok:
            print(
                f"{r.command[:60]:<60} {r.cpu_pct:>7.2f} {r.startup_cpu_s:>11.3f} "
                f"{r.rss_mb:>7.1f} {r.peak_rss_mb:>7.1f}"
            )
        else:
            print(f"{r.command[:60]:<60} FAILED: {r.note}")
    if args.json:
        for r in results:
            print(json.dumps(asdict(r)))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
