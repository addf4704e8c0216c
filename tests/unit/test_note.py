"""The verification note: its text, and the byte-exact edit of real-world example.yaml files."""

from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from gpuherd.note.note import Note, NoteError, card_size_gb, compose
from gpuherd.note.note_file import write_note
from gpuherd.note.yaml_edit import YamlEditError, set_block
from gpuherd.summary.summary import summarize
from tests.unit.test_summary import GIB, H200_TOTAL, T0, gpu_row, write_session

EXAMPLES = Path(__file__).resolve().parents[1] / "data" / "examples"
NOTE = Note(
    dt.date(2025, 10, 25),
    "Verified training run on NVIDIA H200 (141GB VRAM). "
    "GPU usage: 7.4GB VRAM (5%), 100% GPU utilization.",
)
KEYS = ("last_verified", "last_verification_note")


def load(text: str):
    return YAML(typ="rt").load(text)


def without_note_lines(text: str) -> list[str]:
    """The file's lines minus the two note keys (and a `verification:` header line)."""
    pattern = re.compile(r"^\s*(last_verified|last_verification_note|verification):")
    return [line for line in text.splitlines(keepends=True) if not pattern.match(line)]


@pytest.fixture
def example(tmp_path: Path):
    def copy(name: str) -> Path:
        target = tmp_path / name
        shutil.copy(EXAMPLES / name, target)
        return target

    return copy


def test_updating_an_existing_block_changes_only_its_two_values(example) -> None:
    path = example("resnet50_finetune.yaml")
    before = path.read_bytes()
    assert write_note(path, NOTE) is True
    after = path.read_bytes()
    old_lines = before.decode().splitlines(keepends=True)
    new_lines = after.decode().splitlines(keepends=True)
    changed = [i for i, (a, b) in enumerate(zip(old_lines, new_lines, strict=True)) if a != b]
    assert [old_lines[i].split(":")[0].strip() for i in changed] == list(KEYS)
    # The trailing comment on the date and the quote style of the note are kept.
    assert new_lines[changed[0]] == "  last_verified: 2025-10-25   # previous run\n"
    assert new_lines[changed[1]].startswith("  last_verification_note: 'Verified training run")
    data = load(after.decode())
    assert data["verification"]["last_verified"] == dt.date(2025, 10, 25)
    assert data["verification"]["last_verification_note"] == NOTE.text
    assert data["verification"]["verified_by"] == "alice"
    assert list(data["verification"]) == ["last_verified", "last_verification_note", "verified_by"]


def test_adding_a_block_keeps_every_other_byte(example) -> None:
    path = example("llama_lora.yaml")
    before = path.read_text()
    write_note(path, NOTE)
    after = path.read_text()
    assert after.startswith(before)
    assert after[len(before) :] == (
        f'verification:\n  last_verified: 2025-10-25\n  last_verification_note: "{NOTE.text}"\n'
    )
    data = load(after)
    assert list(data)[-1] == "verification"
    assert load(before) == {k: v for k, v in data.items() if k != "verification"}


def test_flow_style_block_is_updated_in_place(example) -> None:
    path = example("flow_verification.yaml")
    before = path.read_text()
    write_note(path, NOTE)
    after = path.read_text()
    assert without_note_lines(after) == without_note_lines(before)
    line = after.splitlines()[1]
    assert line.startswith(
        "verification: {last_verified: 2025-10-25, by: dave, last_verification_note: "
    )
    assert line.endswith("}   # flow style, kept flow")
    assert load(after)["verification"]["by"] == "dave"


def test_empty_block_is_filled_and_its_comment_kept(example) -> None:
    path = example("empty_verification.yaml")
    write_note(path, NOTE)
    lines = path.read_text().splitlines()
    assert lines[:3] == [
        "name: unet-seg",
        "verification:   # to be filled",
        "  last_verified: 2025-10-25",
    ]
    assert lines[-1] == "tags: [segmentation]"


def test_crlf_and_bom_files_stay_crlf(tmp_path: Path) -> None:
    text = (EXAMPLES / "resnet50_finetune.yaml").read_text().replace("\n", "\r\n")
    path = tmp_path / "example.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    write_note(path, NOTE)
    raw = path.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf")
    assert b"\n" not in raw.replace(b"\r\n", b"")
    assert without_note_lines(raw.decode()) == without_note_lines("\ufeff" + text)


def test_a_second_identical_write_changes_nothing(example) -> None:
    path = example("llama_lora.yaml")
    write_note(path, NOTE)
    first = path.read_bytes()
    assert write_note(path, NOTE) is False
    assert path.read_bytes() == first


@pytest.mark.parametrize("name", ["broken.yaml", "top_level_list.yaml"])
def test_bad_files_are_left_untouched(example, name: str) -> None:
    path = example(name)
    before = path.read_bytes()
    with pytest.raises(NoteError) as caught:
        write_note(path, NOTE)
    assert path.read_bytes() == before
    assert str(path) in caught.value.msg
    if name == "broken.yaml":
        assert "not valid YAML" in caught.value.msg and "line" in caught.value.msg
    else:
        assert "top level is a list; expected a mapping" in caught.value.msg


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty or holds only comments"),
        ("# only a comment\n", "empty or holds only comments"),
        ("a: 1\n---\nb: 2\n", "not valid YAML"),
        ("a: 1\na: 2\n", "duplicate key"),
        ("verification: soon\n", "`verification:` is a single value"),
        ("verification: [1, 2]\n", "`verification:` is a list"),
        ("verification:\n  last_verified:\n    year: 2024\n", "not a single value"),
    ],
)
def test_unusable_yaml_is_refused(text: str, message: str) -> None:
    with pytest.raises(YamlEditError, match=re.escape(message)):
        set_block(text, "verification", NOTE.values())


@pytest.mark.parametrize(
    "text",
    [
        "a: 1",  # no final newline
        "{a: 1}\n",
        "a: 1\nverification: ~  # later\nb: 2\n",
        "a: 1\nverification:\n  note: |\n    x\n    y\n",
        "verification:\n  last_verification_note: |\n    old\n    text\nz: 1\n",
        "verification:\n    by: me\n    last_verified: 2020-01-01\nz: [1, 2]   # c\n",
        "x: &anchor {k: v}\ny: *anchor\n",
    ],
)
def test_shapes_of_yaml_give_the_intended_values(text: str) -> None:
    new = set_block(text, "verification", NOTE.values())
    data = load(new)
    assert data["verification"]["last_verified"] == NOTE.last_verified
    assert data["verification"]["last_verification_note"] == NOTE.text
    old = load(text)
    assert {k: v for k, v in old.items() if k != "verification"} == {
        k: v for k, v in data.items() if k != "verification"
    }


def test_mode_and_symlink_are_kept(example, tmp_path: Path) -> None:
    path = example("llama_lora.yaml")
    os.chmod(path, 0o640)
    link = tmp_path / "link.yaml"
    link.symlink_to(path)
    write_note(link, NOTE)
    assert link.is_symlink()
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert "last_verified: 2025-10-25" in path.read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.yaml", "llama_lora.yaml"]


@pytest.mark.parametrize(
    ("name", "total", "expected"),
    [
        ("NVIDIA H100 80GB HBM3", 85_520_809_984, 80),
        ("NVIDIA A100-SXM4-40GB", 42_949_672_960, 40),
        ("NVIDIA H200", H200_TOTAL, 141),
        ("NVIDIA A10", 23_028 * (1 << 20), 24),
        ("NVIDIA L40S", 46_068 * (1 << 20), 48),
    ],
)
def test_card_size_as_people_name_it(name: str, total: int, expected: int) -> None:
    assert card_size_gb(name, total) == expected


def training_session(root: Path, exit_code: int = 0, findings: bool = False) -> Path:
    rows = [
        gpu_row(
            T0 + i,
            0,
            (2 + i * 0.25) * GIB,
            100 if 2 <= i <= 12 else 0,
            peak=(7.4 * GIB if i == 8 else None),
        )
        for i in range(15)
    ]
    metrics = []
    for i, (loss, step) in enumerate([(2.31, 400), (1.02, 800), (0.45, 1200)]):
        metrics.append(f"{T0 + 4 + 3 * i},command,{10 * (i + 1)},train/loss,{loss},{step},{i}")
    metrics += [
        f"{T0 + 5},command,11,val/acc,0.62,400,0",
        f"{T0 + 11},command,31,val/acc,0.91,1200,2",
    ]
    events = [{"t": T0 + 2, "kind": "start", "pid": 1}]
    if findings:
        events.append(
            {
                "t": T0 + 9,
                "kind": "finding",
                "task": "command",
                "line": 233,
                "finding": "oom",
                "evidence": "CUDA out of memory",
            }
        )
    events.append({"t": T0 + 12, "kind": "exit", "exit_code": exit_code})
    return write_session(
        root,
        gpu_rows=rows,
        metrics=metrics,
        events=events,
        meta={"command": ["python", "train.py"], "exit_code": exit_code},
    )


def test_note_text_from_a_run(tmp_path: Path) -> None:
    note = compose(summarize(training_session(tmp_path / "s")))
    assert note.last_verified == dt.datetime.fromtimestamp(T0).date()
    pct = round(100 * 7.4 * GIB / H200_TOTAL)
    assert note.text == (
        f"Verified training run on NVIDIA H200 (141GB VRAM). GPU usage: 7.4GB VRAM ({pct}%), "
        "100% GPU utilization (p95 100%). Trained 3 epochs (1,200 steps); loss 2.31 -> 0.45, "
        "val/acc 0.62 -> 0.91."
    )


def test_note_names_failures_as_known_limitations(tmp_path: Path) -> None:
    note = compose(summarize(training_session(tmp_path / "s", exit_code=1, findings=True)))
    assert note.text.startswith("Training run on NVIDIA H200 (141GB VRAM) failed on ")
    assert note.text.endswith(
        "Known limitations: CUDA out of memory (command at line 233); "
        "the command exited with code 1."
    )


def test_note_prefers_the_commands_own_peak(tmp_path: Path) -> None:
    root = training_session(tmp_path / "s")
    meta = (
        (root / "meta.json")
        .read_text()
        .replace(
            '"exit_code": 0',
            '"exit_code": 0, "run_peaks": [{"gpu": 0, "peak_bytes": '
            f'{3 * GIB}, "method": "per-process"}}]',
        )
    )
    (root / "meta.json").write_text(meta)
    assert "GPU usage: 3.0GB VRAM (2%)" in compose(summarize(root)).text


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuherd", *args], capture_output=True, text=True, timeout=60
    )


def test_cli_dry_run_prints_a_diff_and_changes_nothing(tmp_path: Path, example) -> None:
    session = training_session(tmp_path / "s")
    path = example("resnet50_finetune.yaml")
    before = path.read_bytes()
    out = run_cli("note", str(session), "--example", str(path), "--dry-run")
    assert out.returncode == 0, out.stderr
    assert path.read_bytes() == before
    assert "-  last_verified: 2025-03-14   # previous run" in out.stdout
    date = dt.datetime.fromtimestamp(T0).date().isoformat()
    assert f"+  last_verified: {date}   # previous run" in out.stdout
    assert out.stdout.startswith("--- a/")


def test_cli_writes_the_note(tmp_path: Path, example) -> None:
    session = training_session(tmp_path / "s")
    path = example("llama_lora.yaml")
    out = run_cli("note", str(session), "--example", str(path))
    assert out.returncode == 0, out.stderr
    data = load(path.read_text())
    assert data["verification"]["last_verification_note"].startswith("Verified training run")
    assert "updated" in out.stdout


def test_cli_malformed_example_is_an_error(tmp_path: Path, example) -> None:
    session = training_session(tmp_path / "s")
    path = example("broken.yaml")
    before = path.read_bytes()
    out = run_cli("note", str(session), "--example", str(path))
    assert out.returncode == 2
    assert "not valid YAML" in out.stderr and "Traceback" not in out.stderr
    assert len(out.stderr.splitlines()) == 1 and "(line " in out.stderr
    assert path.read_bytes() == before


def test_cli_missing_session_is_an_error(tmp_path: Path, example) -> None:
    path = example("llama_lora.yaml")
    out = run_cli("note", str(tmp_path / "nope"), "--example", str(path))
    assert (out.returncode, out.stderr) == (
        2,
        f"gpuherd: {tmp_path / 'nope'}: not a gpuherd session (no such directory)\n",
    )
