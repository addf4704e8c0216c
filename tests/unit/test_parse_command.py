"""`gpuherd parse`: the JSON-lines contract, the table, and bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuherd.cli import main
from gpuherd.parse.parse_command import short_where
from tests.privileges import as_other_user, shared_directory

DATA = Path(__file__).resolve().parents[1] / "data" / "logs"
ROOT = Path(__file__).resolve().parents[2]


def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def test_json_contract_on_a_real_log(capsys: pytest.CaptureFixture[str]) -> None:
    log = DATA / "nanogpt" / "train.log"
    assert main(["parse", "--json", str(log)]) == 0
    records = _json_lines(capsys.readouterr().out)
    first = records[0]
    assert first == {
        "file": str(log),
        "line": 6,
        "format": "nanogpt",
        "metric": "train/loss",
        "value": 3.1422,
        "step": 0,
    }
    assert {"file", "line", "format", "metric", "value"} <= set(records[-1])
    assert {r["metric"] for r in records} >= {"train/loss", "val/loss", "throughput/it_s"}


def test_nan_values_are_strict_json_and_come_with_findings(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["parse", "--json", str(DATA / "jsonl" / "train.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "NaN" not in out and "Infinity" not in out
    records = _json_lines(out)
    loss_28 = [r for r in records if r.get("metric") == "train/loss" and r["line"] == 28]
    assert [(r["value"], r["step"], r["format"]) for r in loss_28] == [("nan", 28, "jsonl")]
    findings = [r for r in records if "finding" in r]
    assert [(f["line"], f["finding"]) for f in findings][:2] == [(27, "inf"), (28, "nan")]
    assert findings[1]["evidence"] == "train/loss = nan at step 28"


def test_findings_in_a_failure_log(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["parse", "--json", str(DATA / "failures" / "cpu_oom.log")]) == 0
    records = _json_lines(capsys.readouterr().out)
    assert [(r["line"], r["finding"]) for r in records] == [(1, "traceback"), (6, "oom")]
    assert "can't allocate memory" in records[1]["evidence"]


def test_forced_format(capsys: pytest.CaptureFixture[str]) -> None:
    log = str(DATA / "keras" / "verbose2.log")
    assert main(["parse", "--json", "--format", "generic", log]) == 0
    records = _json_lines(capsys.readouterr().out)
    assert {r["format"] for r in records if "metric" in r} == {"generic"}
    assert main(["parse", "--format", "nope", log]) == 2
    assert "unknown format 'nope'" in capsys.readouterr().err


def test_trainer_state_document(capsys: pytest.CaptureFixture[str]) -> None:
    log = DATA / "hf_trainer_state" / "trainer_state.json"
    assert main(["parse", "--json", str(log)]) == 0
    records = _json_lines(capsys.readouterr().out)
    assert records[0]["format"] == "hf_trainer_state"
    assert records[0]["line"] == 1 and records[0]["step"] == 3 and records[0]["epoch"] == 0.375
    assert records[-1]["metric"] == "eval_steps_per_second" and records[-1]["step"] == 24


def test_bad_files_are_reported_and_the_rest_still_parsed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = DATA / "timm_csv" / "summary.csv"
    status = main(["parse", "--json", str(tmp_path), str(tmp_path / "missing.log"), str(good)])
    captured = capsys.readouterr()
    assert status == 1
    assert f"{tmp_path}: is a directory, not a log file" in captured.err
    assert f"{tmp_path / 'missing.log'}: no such file" in captured.err
    assert {r["file"] for r in _json_lines(captured.out)} == {str(good)}


def test_permission_denied() -> None:
    # Root reads a mode-000 file, so as root (CI) the command runs as an unprivileged user.
    with shared_directory() as parent:
        locked = parent / "locked.log"
        locked.write_text("loss=1\n")
        locked.chmod(0)
        good = parent / "good.log"
        good.write_text("step=1 loss=0.5\n")
        good.chmod(0o644)
        argv = as_other_user(
            [sys.executable, "-m", "gpuherd", "parse", "--json", str(locked), str(good)]
        )
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 1, out.stderr
    assert out.stderr.splitlines() == [f"gpuherd parse: {locked}: permission denied"]
    assert [(r["file"], r["metric"], r["value"]) for r in _json_lines(out.stdout)] == [
        (str(good), "train/loss", 0.5)
    ]


def test_invalid_utf8_binary_garbage_and_unparsed_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "bad.log"
    log.write_bytes(b"step=1 loss=0.5 \xff\xfe\n" + bytes(range(256)) + b"\nstep=2 loss=1,0,6\n")
    assert main(["parse", "--json", str(log)]) == 0
    captured = capsys.readouterr()
    records = _json_lines(captured.out)
    assert [(r["line"], r["metric"], r["value"]) for r in records] == [(1, "train/loss", 0.5)]
    # the garbage holds a \n byte, so it is two lines and the bad value sits on line 4
    assert "1 unparsed line(s) as generic; first at line 4: not a number" in captured.err


def test_a_50_mb_line_is_streamed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "long.log"
    with log.open("wb") as handle:
        handle.write(b"step=1 loss=0.75 " + b"x" * (50 << 20) + b"\n")
        handle.write(b"\r".join(b"step=%d loss=0.%d" % (i, i % 10) for i in range(400_000)))
        handle.write(b"\nstep=9 loss=0.125\n")
    assert main(["parse", "--json", str(log)]) == 0
    records = _json_lines(capsys.readouterr().out)
    assert [(r["line"], r["step"], r["value"]) for r in records] == [
        (1, 1, 0.75),
        (2, 399999, 0.9),
        (3, 9, 0.125),
    ]


def test_windowed_health_at_end_of_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "flat.log"
    lines = [f"step={i} loss={2.0 + 0.001 * (i % 3)}" for i in range(80)]
    log.write_text("\n".join(lines) + "\n")
    assert main(["parse", "--json", str(log)]) == 0
    findings = [r for r in _json_lines(capsys.readouterr().out) if "finding" in r]
    assert [(f["line"], f["finding"]) for f in findings] == [(80, "stalled")]


def test_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    log = DATA / "failures" / "cpu_oom.log"
    assert main(["parse", str(DATA / "nanogpt" / "train.log"), str(log)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["FILE:LINE", "FORMAT", "STEP", "EPOCH", "METRIC", "VALUE"]
    where = short_where(str(DATA / "nanogpt" / "train.log"), 6)
    assert out[1].split() == [where, "nanogpt", "0", "train/loss", "3.1422"]
    assert out[-1].startswith(short_where(str(log), 6)) and "! oom: RuntimeError" in out[-1]


def test_parse_never_imports_textual() -> None:
    code = (
        "import sys; from gpuherd.cli import main; "
        f"main(['parse', {str(DATA / 'keras' / 'verbose2.log')!r}]); "
        "print('textual' in sys.modules, file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr.strip().endswith("False")


def test_zero_map_while_the_summed_losses_fall(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the header of YOLO's results.csv, with losses that fall and an mAP that never leaves 0
    header = (DATA / "ultralytics_csv" / "results.csv").read_text().splitlines()[0]
    rows = [
        f"{e},{e * 3.1},{3 - 0.3 * e},{2 - 0.2 * e},{1 - 0.1 * e},0,0,0,0,0.3,1.5,0.2,"
        "0.001,0.001,0.001"
        for e in range(1, 9)
    ]
    log = tmp_path / "results.csv"
    log.write_text("\n".join([header, *rows]) + "\n")
    assert main(["parse", "--json", str(log)]) == 0
    findings = [r for r in _json_lines(capsys.readouterr().out) if "finding" in r]
    # mAP50-95 and mAP50 both stay 0, each a finding, as on the dashboard
    assert [(f["line"], f["finding"]) for f in findings] == [(9, "zero_metric")] * 2
    assert findings[0]["evidence"].startswith("val/map = 0 at all 8 evaluations")
    assert findings[1]["evidence"].startswith("val/map_50 = 0 at all 8 evaluations")


def test_a_progress_bar_after_many_banner_lines_is_parsed_as_one(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    log = tmp_path / "console.log"
    banner = "".join(f"Loading shard {i} of 400: done\n" for i in range(400))
    log.write_text(banner + "Epoch 0: 100%|██████████| 50/50 [00:01<00:00, 40.00it/s, loss=0.5]\n")
    assert main(["parse", "--json", str(log)]) == 0
    records = _json_lines(capsys.readouterr().out)
    assert [(r["line"], r["format"], r["metric"], r["value"]) for r in records] == [
        (401, "tqdm", "throughput/it_s", 40),
        (401, "tqdm", "train/loss", 0.5),
    ]
    # a forced format stays what it is
    assert main(["parse", "--json", "--format", "generic", str(log)]) == 0
    forced = _json_lines(capsys.readouterr().out)
    assert {r["format"] for r in forced} == {"generic"}


REPO = Path(__file__).resolve().parents[2]
BIG = "1" + "0" * 400  # an integer beyond a float's range


def _parse(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuherd", "parse", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _values(stdout: str) -> list[tuple]:
    return [
        (r["line"], r.get("step"), r["metric"], r["value"])
        if "metric" in r
        else (r["line"], "!", r["finding"])
        for r in _json_lines(stdout)
    ]


def test_odd_lines_are_counted_and_the_lines_after_them_parsed(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_bytes(
        b"\n".join(
            [
                b"step=1 loss=0.5",
                b"step=inf loss=1",  # 2: unparsed (used to end in OverflowError)
                b"step=1e309 loss=1",  # 3: unparsed
                b"epoch=nan loss=1",  # 4: unparsed
                b"lr=inf",  # 5: unparsed, no value left
                b"step=2 loss=1e308",
                b"step=3 loss=1e-310",
                # 8: the infinite loss stays, with its finding; lr left out
                b"step=4 loss=inf lr=inf",
                b"step=5 loss=0.25 " + b"x" * (10 << 20),  # 9: 10 MB
                b"step=6 loss=0.125\x00 \xff\xfe",
                b"step=7 loss=0.0625\n",
            ]
        )
    )
    done = _parse("--json", str(log))
    assert done.returncode == 0
    assert _values(done.stdout) == [
        (1, 1, "train/loss", 0.5),
        (6, 2, "train/loss", 1e308),
        (7, 3, "train/loss", 1e-310),
        (8, 4, "train/loss", "inf"),
        (8, "!", "inf"),
        (9, 5, "train/loss", 0.25),
        (10, 6, "train/loss", 0.125),
        (11, 7, "train/loss", 0.0625),
    ]
    assert done.stderr == (
        f"gpuherd parse: {log}: 1 line(s) longer than 64 KiB; the first 64 KiB of each read\n"
        f"gpuherd parse: {log}: 5 unparsed line(s) as generic; first at line 2: "
        "step inf is not a count from 0 to 2**53\n"
    )


def test_json_lines_that_crashed_parse_are_unparsed(tmp_path: Path) -> None:
    log = tmp_path / "train.jsonl"
    log.write_text(
        "\n".join(
            [
                '{"step": 1, "loss": 0.5}',
                '{"step": 2, "loss": ' + BIG + "}",  # OverflowError once; now an infinite loss
                '{"step": ' + BIG + ', "loss": 1}',  # 3: unparsed
                '{"x": ' + "[" * 100_000 + "]" * 100_000 + ', "step": 9, "loss": 1}',  # 4: unparsed
                '{"step": 5, "loss": 0.25}',
            ]
        )
        + "\n"
    )
    done = _parse("--json", str(log))
    assert done.returncode == 0
    assert _values(done.stdout) == [
        (1, 1, "train/loss", 0.5),
        (2, 2, "train/loss", "inf"),
        (2, "!", "inf"),
        (5, 5, "train/loss", 0.25),
    ]
    assert done.stderr == (  # line 4 is cut at 64 KiB: its head is no JSON, one unparsed line
        f"gpuherd parse: {log}: 1 line(s) longer than 64 KiB; the first 64 KiB of each read\n"
        f"gpuherd parse: {log}: 2 unparsed line(s) as jsonl; first at line 3: "
        "step inf is not a count from 0 to 2**53\n"
    )
    table = _parse(str(log))  # the table too, without a traceback
    assert table.returncode == 0 and "Traceback" not in table.stderr
    assert [row.split() for row in table.stdout.splitlines()[1:]] == [
        [short_where(str(log), 1), "jsonl", "1", "train/loss", "0.5"],
        [short_where(str(log), 2), "jsonl", "2", "train/loss", "inf"],
        [short_where(str(log), 2), "!", "inf:", "train/loss", "=", "inf", "at", "step", "2"],
        [short_where(str(log), 5), "jsonl", "5", "train/loss", "0.25"],
    ]


def test_a_deeply_nested_trainer_state_is_one_error_line(tmp_path: Path) -> None:
    state = tmp_path / "trainer_state.json"
    state.write_text('{"log_history": ' + "[" * 100_000 + "]" * 100_000 + "}")
    done = _parse(str(state))
    assert done.returncode == 1
    assert done.stderr == f"gpuherd parse: {state}: JSON nested deeper than 64 levels\n"
    state.write_text(
        '{"log_history": [{"step": 1, "loss": 2.0}, {"step": -1, "loss": 1.5}, '
        '{"step": 3, "loss": 1.0, "learning_rate": Infinity}]}'
    )
    done = _parse("--json", str(state))
    assert done.returncode == 0
    assert _values(done.stdout) == [(1, 1, "train/loss", 2), (2, 3, "train/loss", 1)]
    assert done.stderr == (
        f"gpuherd parse: {state}: 2 unparsed log_history entr(y/ies) as hf_trainer_state; "
        "first at entry 2: step -1.0 is not a count from 0 to 2**53\n"
    )


def test_csv_bad_cells_and_a_pandas_index_column(tmp_path: Path) -> None:
    log = tmp_path / "history.csv"
    log.write_text(
        ",epoch,step,train_loss,lr\n"
        "0,0,10,0.5,0.1\n"
        "1,1,20,None,0.1\n"  # a missing value: skipped
        "2,2,30,tensor(1.2),0.1\n"  # an unparsed cell: counted, lr kept
        "3,3,40,0.25,0.05\n"
    )
    done = _parse("--json", str(log))
    assert done.returncode == 0
    records = _json_lines(done.stdout)
    assert [(r["line"], r["epoch"], r["step"], r["metric"], r["value"]) for r in records] == [
        (2, 0, 10, "train/loss", 0.5),
        (2, 0, 10, "lr", 0.1),
        (3, 1, 20, "lr", 0.1),
        (4, 2, 30, "lr", 0.1),
        (5, 3, 40, "train/loss", 0.25),
        (5, 3, 40, "lr", 0.05),
    ]
    assert done.stderr == (
        f"gpuherd parse: {log}: 1 unparsed line(s) as lightning_csv; first at line 4: 1 value(s) "
        "left out (not a number, a step or epoch that is no count, or infinite where only a "
        "loss may be); the others kept\n"
    )
