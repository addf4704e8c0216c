"""`gpuherd monitor`, `replay` and `demo`: the live dashboard, or a replay of a recorded session.

Sources are built and checked here, before the terminal is taken over, so a corrupt session
directory is a message on stderr and exit status 2 (usage), never a traceback inside the TUI.
Textual is imported only once everything is ready to show.

Without an NVIDIA driver, live mode still starts: the NVML collector reports itself unavailable,
the dashboard shows "NVIDIA driver not found: ..." with a pointer to `gpuherd demo` on a
banner, hides the GPU panels and keeps the host panel running; the same line is printed on
stderr when the dashboard exits.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from collectors.base import Collector, CollectorEvent, GpuherdError
from collectors.machine.host import PidWatch, in_host_pid_namespace
from collectors.roles import DISCOVERY, WRITERS, role_of
from gpuherd.common import exit_codes
from gpuherd.common.options import MonitorOptions
from gpuherd.present.format import visible
from gpuherd.sources import LiveSources, LogSources, SourceOptions, TailSupervisor, live_sources

if TYPE_CHECKING:
    from collectors.machine.nvml import NvmlBackend
    from gpuherd.engine.gate import EarlyCollectors
    from gpuherd.queue.watch import QueueWatch
    from gpuherd.record.dashboard import DashboardRecording
    from gpuherd.tasks.hints import TaskHint

DEMO_PACKAGE, DEMO_DIR = "gpuherd", "data/demo"
CHECK_ALL_MAX_BYTES = 16 << 20
"""Sessions up to this size (CSV bytes) are read through once before the replay starts."""


class DemoMissing(GpuherdError):
    """This build of gpuherd carries no demo session."""


@dataclass
class Plan:
    """Everything the dashboard needs, built before Textual starts."""

    collectors: Sequence[Collector[Any]]
    hostname: str
    pid_watch: PidWatch | None = None
    replay_label: str | None = None
    notices: list[str] = field(default_factory=list)
    """Lines for the banner from the start (replay warnings, a private PID namespace)."""
    logs: LogSources | None = None
    """Training logs to follow (`--log`, `--watch`); closed when the dashboard exits."""
    task_hints: list[TaskHint] = field(default_factory=list)
    recording: DashboardRecording | None = None
    """`record --tui`: started before the dashboard, closed after it (`monitor_record`)."""
    taps: list[Callable[[CollectorEvent], None]] = field(default_factory=list)
    """Also get every collector event, on the collector's thread (the metrics exporter)."""
    queue: QueueWatch | None = None
    """Looks at this user's job queue (live dashboard only); the panel shows once one exists."""
    gpu_source: str | None = None
    """The name of the GPU collector (live mode), whose ticks a `--queue` runner takes."""
    sources: LiveSources | None = None
    """The live sources (live mode): the composition root's one set for this process."""
    running: EarlyCollectors | None = None
    """The running set of `collectors` (`gpuherd.engine`), once `run_app` started it."""

    @property
    def tail(self) -> TailSupervisor | None:
        """Starts a tail for each log the discovery collector finds."""
        return self.logs.tails if self.logs is not None else None


def run(args: MonitorOptions, nvml_backend: NvmlBackend | None = None) -> int:
    """Run the dashboard (live, `args.replay` or `args.demo`) until `q`; the exit status.

    `nvml_backend` is the NVML seam for tests (`None`: the real driver).
    """
    try:
        with _demo_directory(args) as demo:
            plan = build_plan(args, demo, nvml_backend)
            with _metrics(args, plan), _queue(args, plan):
                return show(plan)
    except GpuherdError as error:
        print(visible(f"gpuherd: {error.shown}"), file=sys.stderr)
        return exit_codes.USAGE


def _metrics(args: MonitorOptions, plan: Plan) -> AbstractContextManager[Any]:
    """`--serve-metrics`: the exporter, fed by the dashboard's tap (docs/fleet.md)."""
    if getattr(args, "serve_metrics", None) is None:
        return nullcontext()
    from gpuherd.export.exporter import beside  # prometheus-client loads only when asked

    return beside(
        args,
        plan.hostname,
        plan.task_hints,
        plan.taps,
        plan.notices,
        live=plan.replay_label is None,
    )


@contextmanager
def _queue(args: MonitorOptions, plan: Plan) -> Iterator[None]:
    """`--queue`: run the queue beside the dashboard, fed by its GPU ticks (docs/queue.md).

    The runner lock is taken here, before the terminal is taken over, so a second runner is
    one line on stderr and exit status 2. What the runner said is repeated on stderr at exit.
    """
    if not getattr(args, "queue", False) or plan.queue is None or plan.gpu_source is None:
        yield
        return
    from gpuherd.queue.beside import run_beside
    from gpuherd.queue.ledger import default_ledger_dir

    beside = None
    try:
        with run_beside(
            plan.queue.state_dir,
            default_ledger_dir(),
            plan.gpu_source,
            settle_s=args.settle,
            margin_bytes=args.margin_bytes,
            grace_s=args.grace,
        ) as beside:
            plan.taps.append(beside.tap)
            plan.queue.note = beside.note
            yield
    finally:
        for line in beside.lines if beside is not None else ():
            print(visible(f"gpuherd: queue: {line}"), file=sys.stderr)


def build_plan(
    args: MonitorOptions, demo: Path | None = None, nvml_backend: NvmlBackend | None = None
) -> Plan:
    """Collectors and labels for live mode, `replay DIR` or `demo` (given its directory)."""
    if demo is not None:
        return _replay_plan(demo, args.speed, loop=True, label_prefix="DEMO")
    if args.replay:
        return _replay_plan(Path(args.replay), args.speed, loop=False, label_prefix="REPLAY")
    plan = live_plan(args.interval, nvml_backend, logs=args.log, watch=args.watch)
    from gpuherd.queue.watch import queue_source  # no SQLite until the dashboard is live

    plan.queue = queue_source()
    plan.collectors = [*plan.collectors, plan.queue]
    return plan


def live_plan(
    interval_s: float,
    nvml_backend: NvmlBackend | None = None,
    *,
    logs: Sequence[str] = (),
    watch: Sequence[str] = (),
    exclude: Sequence[str] = (),
) -> Plan:
    """This machine's source set, built once by the composition root (`gpuherd.sources`).

    The NVML, host and container collectors, and with `logs` or `watch` discovery (its scans
    start the tails) and the writer collector. `exclude` names directories never scanned (a
    recording's own session directory). `nvml_backend` is the NVML seam (a fake in tests and
    GPU-less benchmarks); `None` is the real driver.
    """
    sources = live_sources(
        SourceOptions(
            interval_s=interval_s,
            logs=logs or (),
            watch=watch or (),
            exclude=exclude,
            nvml_backend=nvml_backend,
        )
    )
    collectors = sources.collectors()
    plan = Plan(
        collectors=collectors,
        hostname=socket.gethostname(),
        pid_watch=sources.pid_watch,
        gpu_source=collectors[0].name,
        sources=sources,
    )
    if sources.has_logs:
        plan.logs = LogSources(
            sources, [c for c in collectors if role_of(c) in (DISCOVERY, WRITERS)]
        )
    if not in_host_pid_namespace(Path("/proc")):
        plan.notices.append(
            "gpuherd runs in its own PID namespace (a container?): GPU "
            "processes are listed by pid only, without user or command"
        )
    return plan


def _replay_plan(directory: Path, speed: float, *, loop: bool, label_prefix: str) -> Plan:
    # Reading every row first reports a bad line deep in a file before the dashboard starts,
    # at about 0.06 s per MB; a long session starts at once instead, and a bad line met later
    # shows on the GPU panel (file and line named) when the replay reaches it.
    from collectors.replay.replay import SessionReplay  # live mode does not pay for the reader
    from gpuherd.tasks.hints import replay_hints  # nor for the tasks' model before its frame

    check_all = _csv_bytes(directory) <= CHECK_ALL_MAX_BYTES
    replay = SessionReplay(directory, speed=speed, loop=loop, check_all=check_all)
    host = replay.session.meta.get("host") or "unknown host"
    shown = "" if label_prefix == "DEMO" else f" {directory}"
    return Plan(
        collectors=replay.collectors(),
        hostname=str(host),
        replay_label=f"{label_prefix}{shown} x{speed:g}",
        notices=list(replay.warnings),
        task_hints=replay_hints(replay.session),
    )


def _csv_bytes(directory: Path) -> int:
    try:
        return sum(f.stat().st_size for f in directory.glob("*.csv") if f.is_file())
    except OSError:
        return 0  # the reader will name what it cannot read


@contextmanager
def _demo_directory(args: MonitorOptions) -> Iterator[Path | None]:
    """The bundled demo session as a real directory while the app runs; `None` without --demo."""
    if not getattr(args, "demo", False):
        yield None
        return
    import importlib.resources  # 15 ms that live mode's start-up does without

    from collectors.session.session_format import META_FILE  # so is the session format

    resource = importlib.resources.files(DEMO_PACKAGE).joinpath(DEMO_DIR)
    if not resource.joinpath(META_FILE).is_file():
        raise DemoMissing(
            "no demo session is bundled with this build of gpuherd (gpuherd/data/demo/ is "
            "missing); replay a recorded session with `gpuherd replay DIR` instead",
            title="Demo",
        )
    with importlib.resources.as_file(resource) as path:
        yield Path(path)


def terminal_problem() -> str | None:
    """Why the dashboard cannot run here, or `None`.

    Textual draws on stderr and reads keys from stdin; without a terminal it would spray escape
    codes into a pipe and never see `q`.
    """
    if sys.stdin.isatty() and sys.stderr.isatty():
        return None
    return "the dashboard needs a terminal"


def show(plan: Plan) -> int:
    """Run the dashboard over `plan` until `q`; the exit status."""
    problem = terminal_problem()
    if problem is not None:
        print(
            f"gpuherd: {problem}; for scripts use `gpuherd snapshot --json`, or `gpuherd "
            "record DIR` to record headless",
            file=sys.stderr,
        )
        return exit_codes.USAGE
    app = run_app(plan)
    return exit_codes.OK if app.return_code in (None, 0) else int(app.return_code)


def _tap(plan: Plan) -> Callable[[CollectorEvent], None] | None:
    taps = [*([plan.recording.tap] if plan.recording is not None else []), *plan.taps]
    if len(taps) < 2:
        return taps[0] if taps else None

    def tap(event: CollectorEvent) -> None:
        for each in taps:
            each(event)

    return tap


def _also(
    tap: Callable[[CollectorEvent], None] | None, then: Callable[[CollectorEvent], None]
) -> Callable[[CollectorEvent], None]:
    if tap is None:
        return then

    def both(event: CollectorEvent) -> None:
        tap(event)
        then(event)

    return both


Guard = Callable[[Any], AbstractContextManager[Any]]
"""Wraps the running app (given the app), e.g. to turn SIGTERM into `q`."""


def run_app(plan: Plan, guard: Guard | None = None, close_logs: bool = True) -> Any:
    """Run the dashboard over `plan` until it quits; the finished app.

    The caller has checked for a terminal. The collectors start first, then Textual is
    imported (here and nowhere else on the way): the import takes about a third of a second,
    in which NVML opens and the first GPU tick and the details of its processes are read, so
    the dashboard's first frame shows them instead of a frame or two later.
    With `close_logs` false the caller closes `plan.logs` (a recording that goes on after the
    dashboard still needs its tails).
    """
    from gpuherd.engine.gate import EarlyCollectors  # no Textual in it
    from tui.first_paint_term import FirstPaint  # nor in this

    # Live only: a plain frame of the GPUs and their processes while Textual loads.
    first = FirstPaint.start(plan.hostname) if plan.replay_label is None else None
    logs = plan.logs
    early = EarlyCollectors.start(
        plan.collectors,
        tap=_also(_tap(plan), first.tap) if first is not None else _tap(plan),
        pid_watch=plan.pid_watch,
        tails=plan.tail,
        writers=logs.writers if logs is not None else None,
    )
    plan.running = early
    try:
        from tui.app import make_app  # the interactive path is the only one that loads Textual

        app = make_app(
            plan.collectors,
            hostname=plan.hostname,
            replay_label=plan.replay_label,
            notices=plan.notices,
            task_hints=plan.task_hints,
            recording=plan.recording,
            early=early,
        )
        if first is not None:
            first.hand_over()
        with guard(app) if guard is not None else nullcontext():
            app.run()
    finally:
        if first is not None:
            first.close()  # only if Textual never took the terminal over
        early.abandon()  # only if the app never took the collectors over
        if plan.logs is not None and close_logs:
            plan.logs.close()
    # The alternate screen is gone now; repeat why a source could not run so it stays visible.
    for line in app.state.notices:
        print(visible(f"gpuherd: {line}"), file=sys.stderr)
    return app
