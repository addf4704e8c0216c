"""The session directory format: file names, CSV columns, schema version, meta keys, event kinds.

The one home of these names (docs/session-format.md describes them, and a test keeps the two
alike). The writer (`gpuherd.session.session`, the recorder) and every reader
(`collectors.session.session_reader`
and the modules it uses, summaries, the note, the replay) import them instead of spelling them.
Standard library only, so any part of gpuherd can import it at no cost.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

SCHEMA_VERSION = 1
"""The `meta.json` `schema` this version writes and reads; a reader refuses a higher one."""
SUMMARY_SCHEMA_VERSION = 1
"""The `schema` of `summary.json`."""

# File names of a session directory.
META_FILE = "meta.json"
GPU_FILE = "gpu.csv"
PROCESSES_FILE = "processes.csv"
HOST_FILE = "host.csv"
METRICS_FILE = "metrics.csv"
CONTAINERS_FILE = "containers.csv"
SLURM_FILE = "slurm.csv"
"""The Slurm jobs seen on the node while recording (a Slurm node only)."""
EVENTS_FILE = "events.jsonl"
COMMAND_LOG_FILE = "command.log"
"""The recorded command's own output, written by its supervisor."""
COMMAND_EXIT_FILE = "command.exit.json"
"""How the recorded command ended, written by its supervisor even when gpuherd is gone."""
SUMMARY_JSON_FILE = "summary.json"
SUMMARY_MD_FILE = "summary.md"
PEAK_TRACE_FILE = "peak_trace.csv"
"""Every fast memory reading, written only when `GPUHERD_PEAK_TRACE` is set (benchmarks)."""
LOCK_FILE = ".lock"
"""Held by the recorder while recording: one recorder per directory."""

SESSION_FILES = (
    META_FILE,
    GPU_FILE,
    PROCESSES_FILE,
    HOST_FILE,
    CONTAINERS_FILE,
    SLURM_FILE,
    METRICS_FILE,
    EVENTS_FILE,
    COMMAND_LOG_FILE,
    COMMAND_EXIT_FILE,
    SUMMARY_JSON_FILE,
    SUMMARY_MD_FILE,
    PEAK_TRACE_FILE,
    LOCK_FILE,
)
"""Every file a session directory may hold, in the order docs/session-format.md lists them."""
REQUIRED_FILES = (META_FILE, GPU_FILE)
"""Without these a directory is not a session."""
RECORDED_FILES = (META_FILE, GPU_FILE, PROCESSES_FILE, HOST_FILE, EVENTS_FILE)
"""A directory where one of these is not empty already holds a session: recording is refused."""
CSV_FILES = (GPU_FILE, PROCESSES_FILE, HOST_FILE, CONTAINERS_FILE, METRICS_FILE)
"""The CSV files a reader checks, in the order their warnings are listed."""

# Columns of each CSV file, in the order the writer writes them.
GPU_WRITTEN = (
    "t",
    "gpu",
    "uuid",
    "name",
    "mem_used_bytes",
    "mem_total_bytes",
    "util_gpu_pct",
    "util_mem_pct",
    "temp_c",
    "power_w",
)
"""Columns every recorder writes; a file without one of them reads it as empty (`N/A`)."""
GPU_COLUMNS = GPU_WRITTEN + (
    "mem_reserved_bytes",
    "power_limit_w",
    "sm_clock_mhz",
    "mem_clock_mhz",
    "fan_pct",
    "pstate",
    "ecc_corrected",
    "ecc_uncorrected",
    "mig_mode",
    "mem_peak_bytes",
    "process_count",
    "error",
)
PROCESS_WRITTEN = ("t", "gpu", "pid", "used_bytes")
PROCESS_COLUMNS = PROCESS_WRITTEN + (
    "kind",
    "user",
    "command",
    "container",
    "cpu_pct",
    "rss_bytes",
    "started_at",
)
HOST_WRITTEN = ("t", "cpu_pct", "mem_used_bytes", "mem_total_bytes")
HOST_COLUMNS = HOST_WRITTEN + (
    "cpu_count",
    "swap_used_bytes",
    "swap_total_bytes",
    "load_1m",
    "load_5m",
    "load_15m",
    "disk_read_bytes_s",
    "disk_write_bytes_s",
    "net_rx_bytes_s",
    "net_tx_bytes_s",
)
CONTAINER_WRITTEN = (
    "t",
    "id",
    "name",
    "image",
    "status",
    "cpu_pct",
    "mem_used_bytes",
    "mem_limit_bytes",
)
CONTAINER_COLUMNS = CONTAINER_WRITTEN + (
    "started_at",
    "net_rx_bytes_s",
    "net_tx_bytes_s",
    "block_read_bytes_s",
    "block_write_bytes_s",
    "pids",
    "gpus",
    "gpu_mem_bytes",
)
METRICS_COLUMNS = ("t", "task", "line", "metric", "value", "step", "epoch")
SLURM_COLUMNS = (
    "t",
    "event",
    "job_id",
    "array_id",
    "user",
    "name",
    "partition",
    "state",
    "time_limit_s",
    "gpus",
    "pid",
    "step",
)
"""`slurm.csv`: one row when a job appears or changes (`job`), leaves (`gone`), or a GPU
process is found to belong to it (`process`); read by `gpuherd summarize` alone."""
PEAK_TRACE_COLUMNS = ("t", "gpu", "used_bytes")

COLUMNS = {
    GPU_FILE: GPU_COLUMNS,
    PROCESSES_FILE: PROCESS_COLUMNS,
    HOST_FILE: HOST_COLUMNS,
    CONTAINERS_FILE: CONTAINER_COLUMNS,
    METRICS_FILE: METRICS_COLUMNS,
    PEAK_TRACE_FILE: PEAK_TRACE_COLUMNS,
}
"""Every CSV file's columns as the writer writes them."""
REQUIRED_COLUMNS = {
    GPU_FILE: ("t", "gpu"),
    PROCESSES_FILE: ("t", "gpu", "pid"),
    HOST_FILE: ("t",),
    CONTAINERS_FILE: ("t", "id"),
    METRICS_FILE: ("t", "task", "metric", "value"),
}
"""Without these a row means nothing: a file that lacks one is refused."""
WRITTEN_COLUMNS = {
    GPU_FILE: GPU_WRITTEN,
    PROCESSES_FILE: PROCESS_WRITTEN,
    HOST_FILE: HOST_WRITTEN,
    CONTAINERS_FILE: CONTAINER_WRITTEN,
    METRICS_FILE: REQUIRED_COLUMNS[METRICS_FILE],
}
"""Columns every recorder writes; a reader notes each one a file lacks."""


@dataclass(frozen=True, slots=True)
class MetaKeys:
    """The top-level keys of `meta.json`: `META.started_at` is `"started_at"`."""

    schema: str = "schema"
    tool: str = "tool"
    host: str = "host"
    driver: str = "driver"
    nvml_version: str = "nvml_version"
    cuda_driver_version: str = "cuda_driver_version"
    started_at: str = "started_at"
    ended_at: str = "ended_at"
    interval_s: str = "interval_s"
    gpus: str = "gpus"
    synthetic: str = "synthetic"
    command: str = "command"
    exit_code: str = "exit_code"
    peak_interval_s: str = "peak_interval_s"
    peak_sampler: str = "peak_sampler"
    run_peaks: str = "run_peaks"
    tasks: str = "tasks"
    write_error: str = "write_error"
    slurm: str = "slurm"


META = MetaKeys()
COMMAND_TASK = "command"
"""The `task` of the recorded command's own output (`command.log`) in `metrics.csv`."""
REQUIRED_META = (META.schema, META.host, META.driver, META.started_at)
"""A `meta.json` without one of these is refused."""


@dataclass(frozen=True, slots=True)
class EventKinds:
    """The `kind` values gpuherd writes to `events.jsonl`: `EVENT.exit` is `"exit"`."""

    collector_failed: str = "collector_failed"
    collector_recovered: str = "collector_recovered"
    collector_unavailable: str = "collector_unavailable"
    collector_finished: str = "collector_finished"
    recorder_bug: str = "recorder_bug"
    sample_not_recorded: str = "sample_not_recorded"
    lock_taken_over: str = "lock_taken_over"
    start: str = "start"
    exit: str = "exit"
    signal: str = "signal"
    duration_reached: str = "duration_reached"
    finding: str = "finding"
    log_restarted: str = "log_restarted"
    log_found: str = "log_found"
    log_dropped: str = "log_dropped"
    log_polling: str = "log_polling"
    """A tail could not be woken by writes (inotify refused) and reads on a timer."""
    disk_full: str = "disk_full"
    write_failed: str = "write_failed"


EVENT = EventKinds()


def names(keys: MetaKeys | EventKinds) -> tuple[str, ...]:
    """Every name `keys` holds (`names(META)`: every `meta.json` key), in declaration order."""
    return tuple(getattr(keys, f.name) for f in fields(keys))
