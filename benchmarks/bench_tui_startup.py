"""Time from launch to the first full frame of a terminal monitor, in a real tmux pane.

A "full frame" is the moment every `--expect` pattern (a regular expression) is on the screen
at once, read with `tmux capture-pane` every `--poll` seconds (without tmux, or with
`--terminal pty`, the patterns are matched in the pty's output with escape codes removed).
For gpuherd the defaults wait for a GPU name in the GPU panel and a process row in the table.
The same is measured for a command that only prints a word, the cost of the terminal itself,
and reported beside it.

Examples, from the repository root:

    # here, no GPU: the dashboard replaying the end-to-end fixture session
    python benchmarks/bench_tui_startup.py --runs 5 -- \
        python -m gpuherd --replay tests/data/sessions/e2e

    # on the GPU machine, live, with a process on the GPU (e.g. a torch job); the pattern
    # for the row is GPU index, pid and user at the start of a table line
    python benchmarks/bench_tui_startup.py --runs 5 --expect 'NVIDIA' \
        --expect '│\\s+0\\s+\\d+\\s+\\w+' -- python -m gpuherd

    # here, no GPU: the live path over a fake NVML (one H100, this process on it)
    python benchmarks/bench_tui_startup.py --runs 15 --expect NVIDIA \
        --expect '│\\s+0\\s+\\d+\\s+\\w+' -- python -m tests.e2e.live_fake_nvml

    # two trees of gpuherd (this one and an older copy in .old), runs alternating between
    # them; the command runs in each tree's directory, so `python -m gpuherd` is that tree's
    python benchmarks/bench_tui_startup.py --runs 15 --tree old=.old --tree new=. \
        --expect NVIDIA --expect '│\\s+0\\s+\\d+\\s+\\w+' -- python -m gpuherd

    # on the GPU machine, gpuherd and nvitop in one run, alternating (nvitop installed from the
    # wheels in .whl-nvitop: `python3 -m pip install -q --no-index --no-deps --target
    # /tmp/nvitop-site .whl-nvitop/*.whl`); nvitop's process rows read `GPU PID TYPE USER`,
    # and it names a GPU without its "NVIDIA " (`H200`)
    python benchmarks/bench_tui_startup.py --runs 10 --expect NVIDIA \
        --expect '│\\s+0\\s+\\d+\\s+\\w+' \
        --beside 'nvitop=env PYTHONPATH=/tmp/nvitop-site python3 -m nvitop' \
        --beside-expect 'nvitop=H100|H200|A100|NVIDIA' \
        --beside-expect 'nvitop=│\\s+\\d+\\s+\\d+\\s+[CGX]+\\s+\\S' \
        -- python3 -m gpuherd

Prints a table (with --tree or --beside, one line per tree or command), and one JSON object
with --json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_EXPECT = [r"NVIDIA|H100|H200|A100", r"│\s+\d+\s+\d+\s+\S+\s+\S"]
"""A GPU name, and a table row starting with GPU index, pid and user."""


class Tmux:
    def __init__(self, socket: str) -> None:
        self.socket = socket

    def __call__(self, *args: str) -> str:
        out = subprocess.run(
            ["tmux", "-u", "-L", self.socket, *args],
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=10,
        )
        return out.stdout


def first_frame_s(
    command: str,
    patterns: list[re.Pattern[str]],
    width: int,
    height: int,
    timeout_s: float,
    poll_s: float,
    index: int,
    cwd: Path = ROOT,
) -> float | None:
    """Seconds from `tmux new-session` until every pattern is on screen; None on timeout."""
    tmux = Tmux(f"bench-tui-start-{os.getpid()}-{index}")
    try:
        started = time.perf_counter()
        tmux(
            "new-session",
            "-d",
            "-s",
            "b",
            "-x",
            str(width),
            "-y",
            str(height),
            "-c",
            str(cwd),
            f"{command}; sleep 30",
        )
        while time.perf_counter() - started < timeout_s:
            screen = tmux("capture-pane", "-p", "-t", "b")
            if all(p.search(screen) for p in patterns):
                return time.perf_counter() - started
            time.sleep(poll_s)
        return None
    finally:
        tmux("kill-server")


ESCAPES = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[PX^_\]].*?(?:\x07|\x1b\\)|\x1b.")


def first_frame_pty_s(
    command: str,
    patterns: list[re.Pattern[str]],
    width: int,
    height: int,
    timeout_s: float,
    poll_s: float,
    index: int,
    cwd: Path = ROOT,
) -> float | None:
    """As `first_frame_s` on a bare pty (no tmux): patterns are matched in the output stream
    with escape sequences removed, which finds text drawn in one run (a GPU name, a table row).
    """
    import fcntl
    import pty
    import select
    import signal
    import struct
    import termios

    started = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))
        os.chdir(cwd)
        os.environ["TERM"] = "xterm-256color"
        os.execvp("/bin/sh", ["/bin/sh", "-c", f"exec {command}"])
    seen = ""
    try:
        while time.perf_counter() - started < timeout_s:
            ready, _, _ = select.select([fd], [], [], poll_s)
            if ready:
                try:
                    chunk = os.read(fd, 65536).decode("utf-8", "replace")
                except OSError:
                    return None  # the command exited before drawing a full frame
                seen = (seen + ESCAPES.sub("", chunk))[-200_000:]
                if all(p.search(seen) for p in patterns):
                    return time.perf_counter() - started
        return None
    finally:
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
        os.close(fd)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--expect",
        action="append",
        default=[],
        metavar="REGEX",
        help="pattern that must be on screen (repeatable); default: a GPU name and a process row",
    )
    parser.add_argument("--width", type=int, default=160)
    parser.add_argument("--height", type=int, default=50)
    parser.add_argument("--timeout", type=float, default=20.0, help="seconds per run")
    parser.add_argument("--poll", type=float, default=0.01, help="seconds between captures")
    parser.add_argument(
        "--terminal",
        choices=("auto", "tmux", "pty"),
        default="auto",
        help="tmux pane (default when installed) or a bare pty",
    )
    parser.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="LABEL=DIR",
        help="run the command in DIR (repeatable): runs alternate between the "
        "trees, each tree first equally often, and each gets a median",
    )
    parser.add_argument(
        "--beside",
        action="append",
        default=[],
        metavar="LABEL=COMMAND",
        help="another monitor measured in the same run (repeatable), its runs "
        "alternating with the trees'",
    )
    parser.add_argument(
        "--beside-expect",
        action="append",
        default=[],
        metavar="LABEL=REGEX",
        help="a pattern of that monitor's full frame (repeatable; default: "
        "the command's own patterns)",
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    args = parser.parse_args()
    argv = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not argv:
        parser.error("give the command after --")
    measure = first_frame_s
    if args.terminal == "pty" or (args.terminal == "auto" and shutil.which("tmux") is None):
        measure = first_frame_pty_s
    elif shutil.which("tmux") is None:
        print("bench_tui_startup: tmux is not installed (use --terminal pty)", file=sys.stderr)
        return 2
    command = shlex.join(argv)
    patterns = [re.compile(p, re.MULTILINE) for p in (args.expect or DEFAULT_EXPECT)]
    baseline = [
        measure(
            "echo READY", [re.compile("READY")], args.width, args.height, 5.0, args.poll, 1000 + i
        )
        for i in range(3)
    ]
    trees = [_tree(parser, spec) for spec in args.tree] or [
        ("gpuherd" if args.beside else "", ROOT)
    ]
    runs = [(label, cwd, command, patterns) for label, cwd in trees]
    runs += _beside(parser, args.beside, args.beside_expect, patterns)
    times: dict[str, list[float | None]] = {label: [] for label, *_ in runs}
    for i in range(args.runs):
        k = i % len(runs)
        # each tree or command first as often
        for j, (label, cwd, line, expect) in enumerate(runs[k:] + runs[:k]):
            # A tmux server of its own per run: a name reused at once may reach the last one
            # while it is still shutting down.
            times[label].append(
                measure(
                    line,
                    expect,
                    args.width,
                    args.height,
                    args.timeout,
                    args.poll,
                    i * len(runs) + j,
                    cwd,
                )
            )
    base = statistics.median([t for t in baseline if t is not None] or [0.0])
    print(
        f"# {command}  ({args.width}x{args.height}, {args.runs} runs, "
        f"{'pty' if measure is first_frame_pty_s else 'tmux'})"
    )
    print(f"terminal baseline (echo READY): {base * 1000:.0f} ms")
    for label in times:
        print(_summary(f"{label}: " if label else "", times[label]))
    if args.json:
        several = len(times) > 1 or "" not in times
        medians = {label: _median(t) for label, t in times.items()}
        print(
            json.dumps(
                {
                    "command": command,
                    "runs_s": times if several else times[""],
                    "baseline_s": base,
                    "median_s": medians if several else medians[""],
                }
            )
        )
    return 0 if all(t is not None for ts in times.values() for t in ts) else 1


def _tree(parser: argparse.ArgumentParser, spec: str) -> tuple[str, Path]:
    label, sep, directory = spec.partition("=")
    path = (Path.cwd() / directory).resolve()
    if not sep or not label or not path.is_dir():
        parser.error(f"--tree {spec}: give LABEL=DIR with an existing directory")
    return label, path


def _beside(
    parser: argparse.ArgumentParser,
    specs: list[str],
    expects: list[str],
    default: list[re.Pattern[str]],
) -> list[tuple[str, Path, str, list[re.Pattern[str]]]]:
    """The `--beside` monitors: (label, directory, command line, full-frame patterns)."""
    patterns: dict[str, list[re.Pattern[str]]] = {}
    for spec in expects:
        label, sep, regex = spec.partition("=")
        if not sep or not label:
            parser.error(f"--beside-expect {spec}: give LABEL=REGEX")
        patterns.setdefault(label, []).append(re.compile(regex, re.MULTILINE))
    runs = []
    for spec in specs:
        label, sep, line = spec.partition("=")
        if not sep or not label or not line:
            parser.error(f"--beside {spec}: give LABEL=COMMAND")
        runs.append((label, ROOT, line, patterns.pop(label, default)))
    if patterns:
        parser.error(f"--beside-expect for no --beside: {', '.join(patterns)}")
    return runs


def _median(times: list[float | None]) -> float | None:
    ok = [t for t in times if t is not None]
    return statistics.median(ok) if ok else None


def _summary(prefix: str, times: list[float | None]) -> str:
    ok = [t for t in times if t is not None]
    if not ok:
        return f"{prefix}first full frame: never (every run timed out; check --expect)"
    return (
        f"{prefix}first full frame: median {statistics.median(ok) * 1000:.0f} ms, "
        f"min {min(ok) * 1000:.0f} ms, max {max(ok) * 1000:.0f} ms"
        + ("" if len(ok) == len(times) else f"; {len(times) - len(ok)} runs timed out")
    )


if __name__ == "__main__":
    sys.exit(main())
