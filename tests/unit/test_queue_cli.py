"""`gpuherd queue ...` as a person runs it: real processes, exact lines, exit codes, no job lost."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuherd.queue.jobs import JobState
from gpuherd.queue.store import QueueStore
from tests.queue_jobs import REPO, command_pid, run_job
from tests.usage_errors import error_line

GIB = 1 << 30
NO_DRIVER = not any(Path(p).exists() for p in ("/dev/nvidiactl", "/proc/driver/nvidia"))


def queue(
    state: Path,
    *args: str,
    cwd: Path = REPO,
    fake_gpus: int | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run `gpuherd queue ARGS` with the queue in `state` (through fake GPUs if asked)."""
    head = (
        [sys.executable, str(REPO / "tests" / "queue_fake_gpus.py"), str(fake_gpus)]
        if fake_gpus is not None
        else [sys.executable, "-m", "gpuherd"]
    )
    full_env = os.environ | {"GPUHERD_STATE_DIR": str(state), "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [*head, "queue", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=full_env | (env or {}),
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


def ok(out: subprocess.CompletedProcess[str]) -> str:
    assert (out.returncode, out.stderr) == (0, ""), out.stderr
    return out.stdout.rstrip("\n")


def listed(state: Path) -> list[dict[str, Any]]:
    return json.loads(ok(queue(state, "ls", "--json")))


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


def test_add_two_jobs_and_list_them(state: Path, tmp_path: Path) -> None:
    assert ok(queue(state, "add", "--", "true")) == (
        "queued job 1 (true) at place 1 in line: needs 0 B (no --vram) on 1 GPU"
    )
    assert ok(
        queue(
            state,
            "add",
            "--name",
            "big run",
            "--vram",
            "20GiB",
            "--max-util",
            "5",
            "--cwd",
            str(tmp_path),
            "--env",
            "SEED=7",
            "--after",
            "1",
            "--retry-oom",
            "--",
            "python3",
            "-c",
            "print(1)",
        )
    ) == ("queued job 2 (big run) at place 2 in line: needs 20 GiB on 1 GPU, after job 1")
    assert ok(queue(state, "ls")).splitlines() == [
        "ID  #  NAME     STATE    GPU  NEED    PEAK  EXIT  TIME  WHY",
        "1   1  true     waiting  -    0 B     -     -     -     -",
        "2   2  big run  waiting  -    20 GiB  -     -     -     -",
    ]
    first, second = listed(state)
    assert (first["id"], first["place"], first["argv"], first["cwd"]) == (1, 1, ["true"], str(REPO))
    assert {
        k: second[k]
        for k in (
            "id",
            "name",
            "state",
            "place",
            "argv",
            "cwd",
            "gpus",
            "vram_bytes",
            "max_util_pct",
            "after",
            "retry_oom",
        )
    } == {
        "id": 2,
        "name": "big run",
        "state": "waiting",
        "place": 2,
        "argv": ["python3", "-c", "print(1)"],
        "cwd": str(tmp_path),
        "gpus": 1,
        "vram_bytes": 20 * GIB,
        "max_util_pct": 5.0,
        "after": 1,
        "retry_oom": True,
    }
    assert "env" not in second, "ls --json never prints environments"
    shown = ok(queue(state, "show", "2"))
    assert "job:            2 (big run)" in shown.splitlines()
    assert "command:        python3 -c 'print(1)'" in shown.splitlines()
    assert "  SEED=7" in shown.splitlines()
    assert f"  GPUHERD_STATE_DIR={state}" in shown.splitlines(), "the environment of `add`"


def test_ls_json_documents_every_key(state: Path) -> None:
    ok(queue(state, "add", "--", "true"))
    [job] = listed(state)
    doc = (REPO / "docs" / "queue.md").read_text()
    section = doc.split("## `queue ls --json`", 1)[1].split("\n## ", 1)[0]
    documented = re.findall(r"^\| `(\w+)` \|", section, re.MULTILINE)
    assert documented == list(job)


def test_an_empty_queue_says_so(state: Path) -> None:
    assert ok(queue(state, "ls")) == "the queue is empty"
    assert listed(state) == []


BAD_ADDS = [
    (
        ["--", "no-such-program-xyz"],
        "no such command: no-such-program-xyz (not found in the job's PATH)",
    ),
    (["--", "./missing.sh"], "no such command: ./missing.sh (not found from {cwd})"),
    (["--cwd", "/no/such/dir", "--", "true"], "--cwd /no/such/dir: no such directory"),
    (
        ["--vram", "20XB", "--", "true"],
        "--vram '20XB' is not a size: expected e.g. 20GiB, "
        "512MiB, 1.5TiB, 20G (= GiB) or a number of bytes",
    ),
    (
        ["--vram", "auto", "--", "true"],
        "--vram auto: no recorded peak for this command yet: give --vram SIZE",
    ),
    (["--gpus", "0", "--", "true"], "--gpus 0: a job needs at least 1 GPU"),
    # As the attack ran it: an OverflowError traceback from SQLite before.
    (
        ["--gpus", "99999999999999999999", "--", "true"],
        "--gpus 99999999999999999999: more than any host has (at most 1024)",
    ),
    (["--gpus", "1025", "--", "true"], "--gpus 1025: more than any host has (at most 1024)"),
    (
        ["--vram", "99999999999999999999", "--", "true"],
        "--vram '99999999999999999999' is too large (at most 1024 PiB)",
    ),
    (["--after", "9", "--", "true"], "--after 9: no job 9 in the queue"),
    (
        ["--after", "1", "--", "true"],
        "--after 1: job 1 already cancelled, so this job could never start",
    ),
    (
        ["--env", "SEED", "--", "true"],
        "--env 'SEED': expected NAME=VALUE (a name of letters, "
        "digits and _, not starting with a digit)",
    ),
    (
        ["--env", "1X=2", "--", "true"],
        "--env '1X=2': expected NAME=VALUE (a name of letters, "
        "digits and _, not starting with a digit)",
    ),
    (["--max-util", "0", "--", "true"], "--max-util 0: give a percentage above 0, at most 100"),
    (["--name", "", "--", "true"], "--name: give 1 to 80 printable characters"),
]


@pytest.mark.parametrize(("argv", "message"), BAD_ADDS)
def test_bad_input_to_add_is_one_line_and_exit_2(
    state: Path, tmp_path: Path, argv: list[str], message: str
) -> None:
    ok(queue(state, "add", "--", "true"))
    ok(queue(state, "cancel", "1"))
    before = listed(state)
    out = queue(state, "add", *argv, cwd=tmp_path)
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == f"gpuherd queue add: {message.format(cwd=tmp_path)}\n"
    assert listed(state) == before, "nothing was added or changed"


def test_a_command_found_through_the_jobs_own_path_is_accepted(state: Path, tmp_path: Path) -> None:
    tool = tmp_path / "bin" / "mytool"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    out = queue(state, "add", "--", "mytool")
    assert out.returncode == 2, "not in this PATH"
    ok(
        queue(
            state,
            "add",
            "--env",
            f"PATH=bin:{os.environ['PATH']}",
            "--cwd",
            str(tmp_path),
            "--",
            "mytool",
        )
    )
    tool.chmod(0o644)
    out = queue(state, "add", "--cwd", str(tmp_path), "--", "./bin/mytool")
    assert out.stderr == "gpuherd queue add: ./bin/mytool is not an executable file\n"


@pytest.mark.parametrize(
    ("host", "gpus", "message"),
    [
        (1, 9, "--gpus 9: this host has 1 GPU"),
        (4, 5, "--gpus 5: this host has 4 GPUs"),
    ],
)
def test_more_gpus_than_the_host_has_is_refused(
    state: Path, host: int, gpus: int, message: str
) -> None:
    out = queue(state, "add", "--gpus", str(gpus), "--", "true", fake_gpus=host)
    assert (out.returncode, out.stderr) == (2, f"gpuherd queue add: {message}\n")
    assert ok(queue(state, "add", "--gpus", str(host), "--", "true", fake_gpus=host)) == (
        f"queued job 1 (true) at place 1 in line: needs 0 B (no --vram) on "
        f"{host} GPU{'s' if host > 1 else ''}"
    )


@pytest.mark.skipif(not NO_DRIVER, reason="needs a host without an NVIDIA driver")
def test_without_a_driver_the_gpu_count_is_accepted_and_said(state: Path) -> None:
    out = queue(state, "add", "--gpus", "9", "--", "true")
    assert out.returncode == 0 and out.stdout.startswith("queued job 1 (true)")
    assert re.fullmatch(
        r"gpuherd queue add: --gpus 9 not checked: NVIDIA driver not found: "
        r".*; the runner checks it\n",
        out.stderr,
    ), out.stderr
    assert "demo" not in out.stderr  # the demo runs no queue


def test_vram_auto_takes_the_last_recorded_peak(state: Path) -> None:
    ok(queue(state, "add", "--", "true"))
    store = QueueStore.open(state)
    store.mark_launching(1, ["GPU-a"], [0], "/s/1")
    store.mark_ended(1, JobState.DONE, 0, 10.0, 5 * GIB)
    store.close()
    out = queue(state, "add", "--vram", "auto", "--", "true")
    assert out.stdout == "queued job 2 (true) at place 1 in line: needs 5 GiB on 1 GPU\n"
    assert out.stderr == (
        "gpuherd queue add: --vram auto: 5 GiB, the recorded peak of its last run\n"
    )


def test_move_first_middle_last_and_out_of_range(state: Path) -> None:
    for _ in range(4):
        ok(queue(state, "add", "--", "true"))

    def order() -> list[int]:
        return [job["id"] for job in listed(state)]

    assert ok(queue(state, "move", "3", "--to", "1")) == "moved job 3 (true) to place 1 of 4"
    assert order() == [3, 1, 2, 4]
    assert ok(queue(state, "move", "4", "--to", "2")) == "moved job 4 (true) to place 2 of 4"
    assert order() == [3, 4, 1, 2]
    assert ok(queue(state, "move", "3", "--to", "4")) == "moved job 3 (true) to place 4 of 4"
    assert order() == [4, 1, 2, 3]
    assert ok(queue(state, "move", "4", "--to", "50")) == "moved job 4 (true) to place 4 of 4"
    assert order() == [1, 2, 3, 4]
    assert [job["place"] for job in listed(state)] == [1, 2, 3, 4]
    out = queue(state, "move", "4", "--to", "0")
    assert (out.returncode, out.stderr) == (
        2,
        "gpuherd queue move: position 0 does not exist: 1 is the first in line\n",
    )
    ok(queue(state, "cancel", "2"))
    out = queue(state, "move", "2", "--to", "1")
    assert (out.returncode, out.stderr) == (
        2,
        "gpuherd queue move: job 2 is cancelled: only a waiting job can move\n",
    )
    assert order() == [1, 3, 4, 2]


def test_pause_and_resume(state: Path) -> None:
    assert ok(queue(state, "pause")) == (
        "queue paused: running jobs go on; no new job starts until `gpuherd queue resume`"
    )
    assert ok(queue(state, "pause")) == "the queue was already paused"
    assert ok(queue(state, "add", "--", "true")).endswith("; the queue is paused")
    assert ok(queue(state, "ls")).splitlines()[0] == (
        "the queue is paused: no job starts until `gpuherd queue resume`"
    )
    assert ok(queue(state, "resume")) == "queue resumed"
    assert ok(queue(state, "resume")) == "the queue was not paused"
    assert ok(queue(state, "ls")).startswith("ID")


def test_cancel_and_rm_of_waiting_and_ended_jobs(state: Path) -> None:
    ok(queue(state, "add", "--", "true"))
    ok(queue(state, "add", "--", "true"))
    assert ok(queue(state, "cancel", "2")) == "cancelled job 2 (true); it had not started"
    out = queue(state, "cancel", "2")
    assert (out.returncode, out.stderr) == (
        2,
        "gpuherd queue cancel: job 2 already ended (cancelled)\n",
    )
    assert ok(queue(state, "rm", "2")) == "removed job 2 (true, cancelled)"
    out = queue(state, "rm", "2")
    assert (out.returncode, out.stderr) == (2, "gpuherd queue rm: no job 2 in the queue\n")
    out = queue(state, "show", "7")
    assert (out.returncode, out.stderr) == (2, "gpuherd queue show: no job 7 in the queue\n")
    assert [job["id"] for job in listed(state)] == [1]


def test_cancel_of_a_running_job_kills_its_process_group(state: Path, tmp_path: Path) -> None:
    ok(queue(state, "add", "--", "true"))  # a second job, left waiting
    store = QueueStore.open(state)
    session = tmp_path / "s"
    job_id, recorder = run_job(store, session, "sh", "-c", "trap '' TERM; sleep 100")
    store.close()
    assert job_id == 2
    out = queue(state, "rm", "2")
    assert (out.returncode, out.stderr) == (
        2,
        "gpuherd queue rm: job 2 is running: cancel it first (gpuherd queue cancel 2)\n",
    )
    out = queue(state, "move", "2", "--to", "1")
    assert out.stderr == "gpuherd queue move: job 2 is running: only a waiting job can move\n"
    said = ok(queue(state, "cancel", "2", "--grace", "1"))
    assert re.fullmatch(
        rf"stopped job 2: SIGTERM to its supervisor \(pid {recorder.pid}\), "
        r"SIGKILL to its command after 1 s( and to the supervisor 1 s later)?"
        r"; job 2 is cancelled, exit code 137",
        said,
    ), said
    assert recorder.wait(30) is not None
    jobs = {job["id"]: job for job in listed(state)}
    assert (jobs[2]["state"], jobs[2]["exit_code"], jobs[1]["state"]) == (
        "cancelled",
        137,
        "waiting",
    )
    assert command_pid(session) is not None
    out = queue(state, "cancel", "2")
    assert out.stderr == "gpuherd queue cancel: job 2 already ended (cancelled)\n"


def test_a_corrupt_database_is_kept_and_named(state: Path) -> None:
    ok(queue(state, "add", "--", "true"))
    (state / "queue.db").write_bytes(b"this is not sqlite" * 512)
    out = queue(state, "ls")
    [backup] = sorted(state.glob("queue.db.corrupt-*"))
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == (
        f"gpuherd queue ls: {state / 'queue.db'}: not a valid queue database "
        f"(file is not a database); it was moved to {backup} and nothing was "
        "reset: the next command starts an empty queue\n"
    )
    assert backup.read_bytes() == b"this is not sqlite" * 512
    assert "Traceback" not in out.stderr


def test_a_state_dir_others_may_write_is_refused(state: Path) -> None:
    state.mkdir(mode=0o700)
    state.chmod(0o777)
    out = queue(state, "ls")
    assert (out.returncode, out.stderr) == (
        2,
        f"gpuherd queue ls: {state}: the state directory is writable by other users (mode "
        f"0777); refusing it (chmod go-w {state})\n",
    )


@pytest.mark.parametrize(
    ("argv", "last_line"),
    [
        (
            ["add"],
            "gpuherd queue add: error: give the job's command after `--`: gpuherd queue add "
            "[flags] -- CMD ARGS...",
        ),
        (
            ["add", "--"],
            "gpuherd queue add: error: give the job's command after `--`: gpuherd "
            "queue add [flags] -- CMD ARGS...",
        ),
        (
            ["add", "--vram", "-5GiB", "--", "true"],
            "gpuherd queue add: error: argument --vram: "
            "expected one argument (give one; a value that starts with `-` is written "
            "--vram=VALUE)",
        ),
        (
            ["ls", "--", "true"],
            "gpuherd queue ls: error: a command after `--` is only for `gpuherd queue add`",
        ),
        (["show"], "gpuherd queue show: error: the following arguments are required: JOB"),
        (["move", "1"], "gpuherd queue move: error: the following arguments are required: --to"),
        (
            ["frob"],
            "gpuherd queue: error: argument ACTION: invalid choice: 'frob' (choose from "
            "'add', 'ls', 'show', 'rm', 'cancel', 'pause', 'resume', 'move', 'run')",
        ),
    ],
)
def test_usage_errors(state: Path, argv: list[str], last_line: str) -> None:
    out = queue(state, *argv)
    assert out.returncode == 2
    assert error_line(out.stderr) == last_line
    assert not state.exists(), "nothing was created"


def test_after_a_failed_job_is_refused_and_after_a_done_one_accepted(state: Path) -> None:
    ok(queue(state, "add", "--", "true"))
    ok(queue(state, "add", "--", "true"))
    store = QueueStore.open(state)
    for job_id, end in ((1, JobState.FAILED), (2, JobState.DONE)):
        store.mark_launching(job_id, ["GPU-a"], [0], f"/s/{job_id}")
        store.mark_ended(job_id, end, 1 if end is JobState.FAILED else 0, 10.0, None)
    store.close()
    out = queue(state, "add", "--after", "1", "--", "true")
    assert (out.returncode, out.stderr) == (
        2,
        "gpuherd queue add: --after 1: job 1 already failed, so this job could never start\n",
    )
    assert ok(queue(state, "add", "--after", "2", "--", "true")) == (
        "queued job 3 (true) at place 1 in line: needs 0 B (no --vram) on 1 GPU, after job 2"
    )


def test_a_current_directory_that_vanished_is_refused(state: Path, tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    out = subprocess.run(
        [
            "sh",
            "-c",
            f'cd "{gone}" && rmdir "{gone}" && exec "$0" -m gpuherd queue add -- true',
            sys.executable,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ | {"GPUHERD_STATE_DIR": str(state), "PYTHONPATH": str(REPO)},
    )
    assert (out.returncode, out.stderr) == (
        2,
        "gpuherd queue add: the current directory no longer exists: give --cwd DIR\n",
    )
    assert listed(state) == []


def test_show_masks_the_values_of_variables_named_like_secrets(state: Path) -> None:
    ok(
        queue(
            state,
            "add",
            "--env",
            "HF_TOKEN=hf_abc123",
            "--env",
            "wandb_api_key=wb-secret-7f3e",
            "--env",
            "DB_PASSWORD=db-secret-9c2d",
            "--env",
            "TOKENIZERS_PARALLELISM=false",
            "--env",
            "SEED=7",
            "--",
            "true",
        )
    )
    shown = ok(queue(state, "show", "1")).splitlines()
    [heading] = [line for line in shown if line.startswith("environment (")]
    saved = re.fullmatch(
        r"environment \((\d+) variables; (\d+) masked, --show-secrets "
        r"prints them\):",
        heading,
    )
    assert saved is not None and int(saved[2]) >= 4 and int(saved[1]) >= 5, heading
    assert {"  HF_TOKEN=****", "  wandb_api_key=****", "  DB_PASSWORD=****", "  SEED=7"} <= set(
        shown
    )
    # values no path or other variable of the environment could hold by chance
    secrets = ("hf_abc123", "wb-secret-7f3e", "db-secret-9c2d")
    assert not any(secret in line for line in shown for secret in secrets)
    # a name that only holds a secret word is masked too: better hidden than leaked
    assert "  TOKENIZERS_PARALLELISM=****" in shown
    revealed = ok(queue(state, "show", "1", "--show-secrets")).splitlines()
    assert {
        "  HF_TOKEN=hf_abc123",
        "  wandb_api_key=wb-secret-7f3e",
        "  DB_PASSWORD=db-secret-9c2d",
        f"environment ({saved[1]} variables):",
    } <= set(revealed)


def test_the_readme_queue_example_works_in_its_order_on_a_fresh_queue(
    state: Path, tmp_path: Path
) -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = readme.split("\n## Queue\n", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    adds = [
        line.split("#", 1)[0].split()
        for line in block.splitlines()
        if line.startswith("gpuherd queue add ")
    ]
    assert len(adds) >= 2
    (tmp_path / "train.py").write_text("")
    (tmp_path / "eval.py").write_text("")
    for number, argv in enumerate(adds, 1):
        argv = [sys.executable if word == "python" else word for word in argv[3:]]
        assert ok(queue(state, "add", *argv, cwd=tmp_path)).startswith(f"queued job {number} ")
