"""Typed, immutable samples: one object per tick of one source.

Samples are built on a collector thread and read on the UI thread, never changed after creation.
Units are in the field names. `None` means "not available on this device or to this user" and is
shown as `N/A` by `gpuherd.present.format`.
"""

from __future__ import annotations

from dataclasses import dataclass

from parsers.model import LogFinding, LogMetric


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """One process the driver reports on one GPU."""

    pid: int
    """Process id as the driver sees it (the host PID namespace)."""
    used_memory_bytes: int | None
    """GPU memory the driver attributes to the process; `None` when it will not say."""
    kind: str = "compute"
    """`compute`, `graphics`, or `compute+graphics` when the pid is in both lists."""


@dataclass(frozen=True, slots=True)
class GpuSample:
    """Everything gpuherd reads from one GPU in one query round."""

    index: int
    uuid: str
    name: str
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    memory_reserved_bytes: int | None = None
    """Memory the driver reserves for itself (NVML v2 memory info)."""
    gpu_util_pct: float | None = None
    mem_util_pct: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    fan_pct: float | None = None
    pstate: int | None = None
    """Performance state, 0 (fastest) to 15; `None` when unknown."""
    ecc_errors_corrected: int | None = None
    """Volatile corrected ECC errors since the driver loaded."""
    ecc_errors_uncorrected: int | None = None
    mig_mode: bool | None = None
    processes: tuple[GpuProcess, ...] | None = None
    """Compute and graphics processes; `None` when the driver would not list them."""
    error: str | None = None
    """Set when this GPU failed this round (for example lost from the bus); other fields are
    then `None` and the other GPUs still report."""

    @property
    def memory_free_bytes(self) -> int | None:
        """Total minus used, when both are known."""
        if self.memory_used_bytes is None or self.memory_total_bytes is None:
            return None
        return self.memory_total_bytes - self.memory_used_bytes

    @property
    def unattributed_memory_bytes(self) -> int | None:
        """Used memory that no listed process accounts for (driver reservation, hidden pids)."""
        if self.memory_used_bytes is None:
            return None
        listed = sum(p.used_memory_bytes or 0 for p in self.processes or ())
        return max(0, self.memory_used_bytes - listed)


@dataclass(frozen=True, slots=True)
class GpuTick:
    """One NVML query round over every GPU."""

    taken_at: float
    """Unix seconds when the round started."""
    devices: tuple[GpuSample, ...]
    driver_version: str | None = None
    nvml_version: str | None = None
    cuda_driver_version: str | None = None


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    """Host-side details of one process that uses a GPU."""

    pid: int
    user: str | None = None
    command: str | None = None
    cpu_pct: float | None = None
    rss_bytes: int | None = None
    started_at: float | None = None
    """Unix seconds when the process started."""
    container: str | None = None
    """Container name or short id when the process runs in one, from its cgroup."""


@dataclass(frozen=True, slots=True)
class HostSample:
    """Host-wide figures and details of the processes that use GPUs."""

    taken_at: float
    cpu_pct: float | None = None
    cpu_count: int | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    swap_used_bytes: int | None = None
    swap_total_bytes: int | None = None
    load_1m: float | None = None
    load_5m: float | None = None
    load_15m: float | None = None
    disk_read_bytes_s: float | None = None
    """Rates are `None` on the first sample: they need two readings."""
    disk_write_bytes_s: float | None = None
    net_rx_bytes_s: float | None = None
    net_tx_bytes_s: float | None = None
    processes: tuple[ProcessInfo, ...] = ()
    """Details of the GPU processes the host collector was asked to watch and could see."""


@dataclass(frozen=True, slots=True)
class LogBatch:
    """What one read of a followed log found: new metrics and findings, by line number.

    A batch covers one file generation only; the first batch of a new generation (after a
    rotation, truncation or re-creation) says so, and its line numbers start again at 1.
    """

    path: str
    """The followed path: the task id (a glob pattern for checkpoint documents)."""
    taken_at: float
    """Unix seconds when the read began; metrics without a time of their own carry it."""
    format: str | None = None
    """The format the lines were parsed with; `None` until it is detected."""
    metrics: tuple[tuple[int, LogMetric], ...] = ()
    """`(line_no, metric)`, 1-based in the current generation. A `\\r`-updated line still being
    written (a progress bar) can give metrics under the same number in several batches."""
    findings: tuple[tuple[int, LogFinding], ...] = ()
    """`(line_no, finding)` for what single lines and metrics show (OOM, traceback, NaN)."""
    lines_read: int = 0
    """Complete lines read in this batch (a `\\r` progress run is one line)."""
    unparsed_lines: int = 0
    """Lines a parser matched but could not read."""
    too_long_lines: int = 0
    """Lines longer than the line cap, cut to their first 64 KiB (which are parsed)."""
    findings_dropped: int = 0
    """Findings beyond the per-batch cap (a log repeating one warning), counted only."""
    lost_bytes: int = 0
    """Bytes of the log known to be lost before this batch: written between a copytruncate's
    copy and its cut (a writer without `O_APPEND` shows how many by the hole it leaves), or
    seen in the cut file but in no copy found beside it."""
    lost_lines_estimate: int | None = None
    """`lost_bytes` in lines, at the bytes per line read so far; `None` when nothing is lost
    or no line was read yet."""
    generation: int = 0
    """1 for the first file seen at the path, +1 at each rotation, truncation or re-creation;
    0 while no file has been seen."""
    rotated: bool = False
    """This batch starts a new file that replaced the old one by rename and create."""
    truncated: bool = False
    """This batch starts over in the same file, cut or rewritten from the start."""
    recreated: bool = False
    """This batch starts a file created after the old one was deleted."""
    waiting: bool = False
    """The path does not exist (yet); the tail keeps waiting for it."""
    file_path: str | None = None
    """The file actually read (differs from `path` when `path` is a pattern)."""
    offset_bytes: int = 0
    """How far into the file reading has got."""
    size_bytes: int | None = None
    """The file's size at the last look; `None` while it does not exist."""
    modified_at: float | None = None
    """When the file was last written (its mtime, Unix seconds); `None` when not known (a
    replay). A task runs while its log is written, not while an old log is being read."""
    ended_with: int | None = None
    """The exit status of the recorded command whose output this log is, when this batch
    tells that it ended (a replayed `exit` event)."""
    run_end_line: int | None = None
    """The last line of this batch that says the training run ended (`Training completed.`,
    `` `Trainer.fit` stopped ``: `parsers.findings.ends_run`); a run that ended is never
    `stalled`."""
    label: str | None = None
    """The task as its source names it, when not by its path (a tracker's run name:
    `demo/good-run`); the path's last parts otherwise."""
    notice: str | None = None
    """Said once, on the first batch after it happened: why this tail reads its file on a
    timer instead of being woken by writes (inotify refused to watch its directory)."""

    @property
    def starts_generation(self) -> bool:
        """Whether this batch is the first of a replacement file or a restarted one."""
        return self.rotated or self.truncated or self.recreated


@dataclass(frozen=True, slots=True)
class ContainerSample:
    """One running container as the container engine reports it (`docker ps` plus `docker stats`).

    Usage and rate fields are `None` until known: the engine's first reading of a container
    arrives up to a second after it is first listed, and rates need two readings.
    """

    id: str
    """Full 64-character container id, the stable identity."""
    short_id: str
    """The first 12 characters of `id`, as `docker ps` and the host collector's cgroup read show."""
    name: str
    """Container name without the leading `/`."""
    image: str
    """Image as the container was created from it (`busybox:latest`, or an image id)."""
    status: str
    """Engine state: `running`, `paused` or `restarting`."""
    started_at: float | None = None
    """Unix seconds when the container (last) started."""
    cpu_pct: float | None = None
    """CPU use as `docker stats` shows it: 100 is one full core, more with several."""
    memory_used_bytes: int | None = None
    """Memory in use without the inactive page cache, as `docker stats` counts it."""
    memory_limit_bytes: int | None = None
    """The limit the engine reports: the container's `--memory`, else the host's memory."""
    net_rx_bytes_per_s: float | None = None
    """Received over all the container's interfaces; `None` without a network (`--network none`)."""
    net_tx_bytes_per_s: float | None = None
    block_read_bytes_per_s: float | None = None
    block_write_bytes_per_s: float | None = None
    pids: int | None = None
    """Processes and threads in the container."""
    gpu_devices: tuple[str, ...] = ()
    """GPUs the container was given: indices or UUIDs, or `("all",)`; empty when none."""


@dataclass(frozen=True, slots=True)
class ContainerTick:
    """One look at the container engine: every running container, sorted by name."""

    taken_at: float
    """Unix seconds when the containers were listed."""
    containers: tuple[ContainerSample, ...]
    engine: str | None = None
    """The engine and its version (`Docker 20.10.24`, `Podman Engine 4.9.3`), when it says."""


@dataclass(frozen=True, slots=True)
class QueueJobRow:
    """One job of this user's queue as the dashboard shows it (plain fields, no queue types)."""

    id: int
    name: str
    state: str
    """`waiting`, `launching`, `running`, `done`, `failed` or `cancelled`."""
    gpus: int
    """How many GPUs the job asked for."""
    need_bytes: int
    """The need per GPU, margin not included."""
    gpu_indices: tuple[int, ...] = ()
    """The GPUs it was given (NVML indices); empty while it waits."""
    peak_vram_bytes: int | None = None
    """The recorded peak of its own processes, once it has ended."""
    exit_code: int | None = None
    started_at: float | None = None
    """When it started (Unix seconds); `None` before it ran."""
    ended_at: float | None = None
    reason: str | None = None
    """For a waiting job, why it waits in words; for an ended one, why when the exit code
    does not say."""
    cancel_requested: bool = False
    place: int | None = None
    """Place in line of a waiting job (1 = next to start)."""


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    """This user's job queue at one look: its jobs in `queue ls` order, paused or not.

    The type lives here, not in `gpuherd.queue`, so the role table can name it without
    importing gpuherd (collectors sit below gpuherd); the collector that builds it does.
    """

    taken_at: float
    exists: bool
    """Whether the queue database exists; looking never creates it."""
    jobs: tuple[QueueJobRow, ...] = ()
    paused: bool = False
    runner_pid: int | None = None
    """The pid of the process that runs the queue now (`queue run` or `gpuherd --queue`)."""
    runner_note: str | None = None
    """The last thing the dashboard's own runner said (`gpuherd --queue`)."""


# The discovery scan's samples live here, not in `collectors.logs.discovery`: every sink routes
# by sample type (`collectors.roles`), and the walk's module and the tracker readers it loads
# are no part of a dashboard's first frame.
@dataclass(frozen=True, slots=True)
class DiscoveredLog:
    """One followed source: one task."""

    task_id: str
    """The absolute path to follow; for Hugging Face checkpoints the pattern
    `<output_dir>/checkpoint-*/trainer_state.json`, whose newest match is followed."""
    kind: str
    """`given` for a `--log` argument, else the kind of run file (`lightning_csv`, ...)."""
    source: str
    """The `--log` argument or `--watch` directory that found it."""


@dataclass(frozen=True, slots=True)
class DiscoveredLogs:
    """One discovery scan: every task found, and what changed since the previous scan."""

    taken_at: float
    logs: tuple[DiscoveredLog, ...]
    added: tuple[DiscoveredLog, ...] = ()
    removed: tuple[str, ...] = ()
    """Task ids found before and gone now (their run directory was deleted)."""
    incomplete: bool = False
    """The walk stopped at its entry limit; some runs may be missing."""
    started: tuple[str, ...] | None = None
    """Task ids whose tails started with this scan; `None` until the running set has handed
    the scan to its tail supervisor (`gpuherd.engine.running`)."""
    stopped: tuple[str, ...] = ()
    """Task ids whose tails stopped with this scan (their run vanished)."""
    first_scan: bool = False
    """The running set's first scan: what it found was there when the sources started."""
