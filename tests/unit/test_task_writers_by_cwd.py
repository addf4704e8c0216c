"""A log opened and closed at each write (Lightning's `metrics.csv`), tied to the job that runs
where it is written: real processes, their real working directories in the real /proc."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collectors.machine.writers import LogWriters, WriterCollector, WriterWatch, started_at
from collectors.machine.writers_by_cwd import MAX_LEVELS, levels_below

# Appends a row to its log and closes it again, as Lightning's CSVLogger does, every 50 ms.
CSV_WRITER = r"""
import sys, time
for step in range(100000):
    with open(sys.argv[1], "a") as f:
        f.write(f"0,{step},0.5\n")
    if step == 0:
        print("ready", flush=True)
    time.sleep(0.05)
"""
SLEEPER = r"""
print("ready", flush=True)
import time; time.sleep(120)
"""
# A process that starts `sys.argv[1]` children running SLEEPER in its own directory, as
# Lightning's DDP launcher starts ranks 1.. from rank 0; prints their pids.
PARENT = r"""
import subprocess, sys, time
code = "print('ready', flush=True)\nimport time; time.sleep(120)"
kids = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        for _ in range(int(sys.argv[1]))]
for kid in kids:
    kid.stdout.readline()
print(" ".join(str(kid.pid) for kid in kids), flush=True)
time.sleep(120)
"""


def start(procs: list[subprocess.Popen[str]], cwd: Path, code: str, *args: str) -> tuple[int, str]:
    """A process running `code` in `cwd`; its pid and the first line it printed."""
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True, cwd=cwd
    )
    procs.append(proc)
    assert proc.stdout is not None
    return proc.pid, proc.stdout.readline().strip()


def run_dir(tmp_path: Path, levels: int = 2) -> tuple[Path, Path]:
    """(where the training runs, its log `levels` directories below it)."""
    where = tmp_path / "proj"
    log_dir = where.joinpath(*["lightning_logs", "version_0", "more", "deeper"][:levels])
    log_dir.mkdir(parents=True)
    return where, log_dir / "metrics.csv"


def collector_for(
    log: Path, gpu_pids: list[int], log_format: str | None = "lightning_csv"
) -> tuple[WriterWatch, WriterCollector]:
    watch = WriterWatch()
    watch.follow("t", str(log), log_format)
    watch.set_gpu_pids(gpu_pids)
    return watch, WriterCollector(watch, scan_every_s=0)  # every sample a full scan


def written_after(log: Path, mtime: float) -> None:
    """Wait until `log` is written after `mtime`."""
    deadline = time.monotonic() + 10
    while log.stat().st_mtime <= mtime:
        assert time.monotonic() < deadline, "the writer wrote nothing"
        time.sleep(0.01)


def test_a_log_opened_and_closed_at_each_write_is_tied_to_the_job_running_there(
    tmp_path: Path, procs
) -> None:
    where, log = run_dir(tmp_path)
    pid, _ = start(procs, where, CSV_WRITER, os.path.relpath(log, where))
    _, collector = collector_for(log, [pid])
    first = collector.sample()
    assert first.full_scan and first.logs == ()  # a first look has no earlier write to compare
    written_after(log, log.stat().st_mtime)
    assert collector.sample().logs == (LogWriters("t", (pid,), (pid,)),)
    os.kill(pid, signal.SIGKILL)
    procs[0].wait()
    # gone: the task keeps no writer and can turn finished, as with a writer found by its fd
    assert collector.sample().logs == (LogWriters("t", (), ()),)


@pytest.mark.parametrize(
    ("log_format", "tied"),
    [
        ("lightning_csv", True),
        ("hf_trainer_state", True),
        ("llamafactory", True),
        ("generic", False),
        ("hf_trainer", False),
        ("detectron2_json", False),
        (None, False),
    ],
)
def test_only_logs_whose_writers_reopen_them_are_tied_by_place(
    tmp_path: Path, procs, log_format: str | None, tied: bool
) -> None:
    # a console log (`watch nvidia-smi >> smi.log` beside a training) is held open by its
    # writer, which is no GPU process here: tying it to the training would be wrong
    where, log = run_dir(tmp_path)
    pid, _ = start(procs, where, SLEEPER)
    log.write_text("step=1 loss=0.5\n")
    watch, collector = collector_for(log, [pid], log_format)
    collector.sample()
    os.utime(log, (time.time() + 1, time.time() + 1))
    assert collector.sample().logs == ((LogWriters("t", (pid,), (pid,)),) if tied else ())
    if tied:  # the format turns out otherwise (detected anew): no longer looked for by place
        watch.follow("t", str(log), "generic")
        assert "t" not in watch.reopened()


@pytest.mark.parametrize("levels", [0, 1, MAX_LEVELS, MAX_LEVELS + 1])
def test_the_job_may_run_up_to_max_levels_above_the_log(tmp_path: Path, procs, levels: int) -> None:
    where, log = run_dir(tmp_path, levels)
    pid, _ = start(procs, where, SLEEPER)
    log.write_text("epoch,step,loss\n")
    _, collector = collector_for(log, [pid])
    collector.sample()
    os.utime(log, (time.time() + 1, time.time() + 1))  # a write after the job started
    expected = (LogWriters("t", (pid,), (pid,)),) if levels <= MAX_LEVELS else ()
    assert collector.sample().logs == expected


def test_a_log_not_written_since_the_last_scan_is_not_tied(tmp_path: Path, procs) -> None:
    # an old run's metrics.csv, last written while a new run in the same directory had
    # started already: the new run is the only job there now, yet it writes another file
    where, log = run_dir(tmp_path)
    pid, _ = start(procs, where, SLEEPER)
    time.sleep(0.1)  # well past a clock tick, the precision of a start time
    log.write_text("epoch,step,loss\n0,1,0.5\n")
    _, collector = collector_for(log, [pid])
    assert collector.sample().logs == ()
    assert collector.sample().logs == ()
    os.utime(log, (time.time() + 1, time.time() + 1))
    assert collector.sample().logs == (LogWriters("t", (pid,), (pid,)),)


def test_a_job_started_after_the_write_is_not_tied(tmp_path: Path, procs) -> None:
    where, log = run_dir(tmp_path)
    log.write_text("epoch,step,loss\n")
    _, collector = collector_for(log, [])
    collector.sample()
    with log.open("a") as f:  # the last write, by a run that has exited since
        f.write("0,1,0.5\n")
    time.sleep(0.1)  # well past a clock tick, the precision of a start time
    pid, _ = start(procs, where, SLEEPER)
    started = started_at(pid)
    assert started is not None and started > log.stat().st_mtime
    collector.watch.set_gpu_pids([pid])
    assert collector.sample().logs == ()


def test_two_runs_started_in_one_directory_leave_the_log_untied(tmp_path: Path, procs) -> None:
    where, log = run_dir(tmp_path)
    first, _ = start(procs, where, CSV_WRITER, os.path.relpath(log, where))
    second, _ = start(procs, where, SLEEPER)
    _, collector = collector_for(log, [first, second])
    collector.sample()
    written_after(log, log.stat().st_mtime)
    assert collector.sample().logs == ()


def test_a_job_whose_ranks_descend_from_rank_0_is_tied_with_all_its_gpu_processes(
    tmp_path: Path, procs
) -> None:
    where, log = run_dir(tmp_path)
    log.write_text("epoch,step,loss\n")
    parent, kids = start(procs, where, PARENT, "2")
    ranks = [parent, *map(int, kids.split())]
    _, collector = collector_for(log, ranks)
    collector.sample()
    os.utime(log, (time.time() + 1, time.time() + 1))
    assert collector.sample().logs == (LogWriters("t", (parent,), tuple(sorted(ranks))),)


def test_sibling_workers_of_a_launcher_that_holds_no_gpu_leave_the_log_untied(
    tmp_path: Path, procs
) -> None:
    # torchrun's workers are siblings: nothing here says which of them writes the log
    where, log = run_dir(tmp_path)
    log.write_text("epoch,step,loss\n")
    _, kids = start(procs, where, PARENT, "2")
    _, collector = collector_for(log, [int(kid) for kid in kids.split()])
    collector.sample()
    os.utime(log, (time.time() + 1, time.time() + 1))
    assert collector.sample().logs == ()


def test_a_process_holding_the_log_open_wins_over_the_job_running_there(
    tmp_path: Path, procs
) -> None:
    where, log = run_dir(tmp_path)
    log.write_text("epoch,step,loss\n")
    in_place, _ = start(procs, where, SLEEPER)
    watch, collector = collector_for(log, [in_place])
    collector.sample()
    holder_code = (
        "import sys, time\nf = open(sys.argv[1], 'a')\nprint('ready', flush=True)\ntime.sleep(120)"
    )
    holder, _ = start(procs, tmp_path, holder_code, str(log))  # new since the last scan
    watch.set_gpu_pids([in_place, holder])
    os.utime(log, (time.time() + 1, time.time() + 1))
    assert collector.sample().logs == (LogWriters("t", (holder,), (holder,)),)


def test_a_writer_known_alive_keeps_the_log_when_it_closes_it(tmp_path: Path, procs) -> None:
    where, log = run_dir(tmp_path)
    closer_code = (
        "import sys, time\nf = open(sys.argv[1], 'a')\nprint('ready', flush=True)\n"
        "sys.stdin.readline()\nf.close()\nprint('closed', flush=True)\n"
        "time.sleep(120)"
    )
    closer = subprocess.Popen(
        [sys.executable, "-c", closer_code, str(log)],
        text=True,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=tmp_path,
    )
    procs.append(closer)
    assert closer.stdout is not None and closer.stdin is not None
    closer.stdout.readline()
    in_place, _ = start(procs, where, SLEEPER)
    _, collector = collector_for(log, [closer.pid, in_place])
    assert collector.sample().logs == (LogWriters("t", (closer.pid,), (closer.pid,)),)
    closer.stdin.write("\n")
    closer.stdin.flush()
    assert closer.stdout.readline().strip() == "closed"
    os.utime(log, (time.time() + 1, time.time() + 1))
    assert collector.sample().logs == (LogWriters("t", (closer.pid,), (closer.pid,)),)


@pytest.mark.parametrize(
    ("directory", "cwd", "levels"),
    [
        ("/a/b", "/a/b", 0),
        ("/a/b/c", "/a/b", 1),
        ("/a/b/c/d", "/a/b", 2),
        ("/a/bc", "/a/b", None),  # a sibling whose name starts the same is not below
        ("/a", "/a/b", None),
        ("/x/y", "/", 2),
    ],
)
def test_levels_below(directory: str, cwd: str, levels: int | None) -> None:
    assert levels_below(directory, cwd) == levels
