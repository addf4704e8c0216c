"""Commands print what others wrote with its control characters made visible.

Real files named and filled by "another user" (escape sequences, C1 CSI, a right-to-left
override), read by the real commands in a subprocess: stdout and stderr carry the visible
form and never the characters themselves.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TASKS = REPO / "tests" / "data" / "sessions" / "tasks"
EVIL = "\x1b[2J\x1b[31mowned\x9b1;1H\u202e"
SHOWN = "\\x1b[2J\\x1b[31mowned\\x9b1;1H\\u202e"
RAW = ("\x1b", "\x9b", "\u202e")


def gpuherd(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuherd", *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        errors="surrogateescape",
    )


def raw(text: str) -> list[str]:
    return [repr(c) for c in RAW if c in text]


def test_parse_shows_a_log_named_and_filled_with_escapes_visibly(tmp_path: Path) -> None:
    log = tmp_path / f"{EVIL}.log"
    log.write_text(f"step=1 loss=0.5\nRuntimeError: CUDA out of memory. {EVIL}\n")
    missing = tmp_path / f"gone{EVIL}.log"
    done = gpuherd("parse", str(log), str(missing))
    assert done.returncode == 1
    assert raw(done.stdout) == [] and raw(done.stderr) == []
    assert done.stderr == f"gpuherd parse: {tmp_path}/gone{SHOWN}.log: no such file\n"
    finding = next(line for line in done.stdout.splitlines() if " ! " in line)
    assert finding.endswith("CUDA out of memory. owned\\x9b1;1H\\u202e")  # ANSI stripped


def test_parse_names_a_log_with_cut_lines_visibly(tmp_path: Path) -> None:
    from collectors.logs.logtail_lines import DEFAULT_MAX_LINE_BYTES

    log = tmp_path / f"{EVIL}.log"
    log.write_text("step=1 loss=0.5\n" + "x" * (DEFAULT_MAX_LINE_BYTES + 1) + "\n")
    done = gpuherd("parse", str(log))
    assert raw(done.stderr) == []
    cap = f"{DEFAULT_MAX_LINE_BYTES // 1024} KiB"
    assert (
        f"gpuherd parse: {tmp_path}/{SHOWN}.log: 1 line(s) longer than {cap}; the first "
        f"{cap} of each read\n"
    ) in done.stderr


def evil_session(tmp_path: Path) -> Path:
    """The `tasks` session with its second task's log renamed and its finding's evidence
    written by someone else."""
    session = Path(shutil.copytree(TASKS, tmp_path / "s"))
    path = "/runs/detr/train.log"
    evil_path = f"/runs/detr/{EVIL}.log"
    for name in ("metrics.csv", "meta.json", "events.jsonl"):
        file = session / name
        text = file.read_text()
        swap = evil_path if name.endswith(".csv") else json.dumps(evil_path)[1:-1]
        text = text.replace(path, swap)
        if name == "events.jsonl":
            text = text.replace("loss=nan lr=0.0001", f"loss=nan {json.dumps(EVIL)[1:-1]}")
        file.write_text(text)
    return session


def test_summarize_prints_and_writes_task_names_and_evidence_visibly(tmp_path: Path) -> None:
    session = evil_session(tmp_path)
    short = gpuherd("summarize", str(session))
    assert short.returncode == 0, short.stderr
    assert f"task /runs/detr/{SHOWN}.log" in short.stdout
    assert raw(short.stdout) == [] and raw(short.stderr) == []
    markdown = gpuherd("summarize", str(session), "--md")
    assert f"loss=nan {SHOWN}" in markdown.stdout and raw(markdown.stdout) == []
    assert raw((session / "summary.md").read_text()) == []  # `cat summary.md` is safe too
    data = json.loads((session / "summary.json").read_text())
    assert f"/runs/detr/{EVIL}.log" in [t["task"] for t in data["tasks"]]  # data keeps it


def test_queue_ls_and_show_print_names_and_environments_visibly(tmp_path: Path) -> None:
    env = {"GPUHERD_STATE_DIR": str(tmp_path / "state")}

    def queue(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "gpuherd", "queue", *argv],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
            env={**os.environ, **env},
            stdin=subprocess.DEVNULL,
        )

    missing = queue("add", "--", f"./run{EVIL}")
    assert missing.stderr.startswith(f"gpuherd queue add: no such command: ./run{SHOWN} ")
    added = queue("add", "--env", f"NOTE={EVIL}", "--", "echo", EVIL)
    assert added.returncode == 0, added.stderr
    listing, shown = queue("ls"), queue("show", "1")
    assert f"  NOTE={SHOWN}" in shown.stdout.splitlines()
    assert f"command:        echo '{SHOWN}'" in shown.stdout.splitlines()
    for out in (missing, added, listing, shown):
        assert raw(out.stdout) == [] and raw(out.stderr) == []


def test_snapshot_shows_a_command_line_and_a_container_name_visibly(
    monkeypatch, tmp_path: Path
) -> None:
    import dataclasses

    from collectors.machine.nvml import ProcessEntry
    from collectors.samples import ContainerSample, ContainerTick
    from gpuherd.snapshot.snapshot import render_table, take_snapshot, to_json
    from gpuherd.snapshot.snapshot_containers import ContainerLook
    from tests.fakes import FakeGpu, FakeNvml, GiB

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", EVIL])
    try:
        snap = take_snapshot(
            FakeNvml(
                [
                    FakeGpu(
                        uuid="GPU-a",
                        total=80 * GiB,
                        used=12 * GiB,
                        compute=[ProcessEntry(proc.pid, 10 * GiB)],
                    )
                ]
            ),
            window_s=0.0,
        )
    finally:
        proc.kill()
        proc.wait()
    listed = ContainerTick(
        snap.host.taken_at,
        (
            ContainerSample(
                id="ab" * 32, short_id="ab" * 6, name=f"box{EVIL}", image="img", status="running"
            ),
        ),
        engine="Docker",
    )
    snap = dataclasses.replace(snap, containers=ContainerLook(tick=listed))
    text = render_table(snap, width=300)
    assert raw(text) == [] and f"time.sleep(30) {SHOWN}" in text and f"box{SHOWN}" in text
    assert raw(json.dumps(to_json(snap))) == []  # JSON escapes them itself
