"""Parse throughput on a mix of the real logs in tests/data/logs, beside a one-regex scan.

Usage: python benchmarks/bench_parse.py [--lines N] [--repeats R] [--parsers WHICH]

Every log under tests/data/logs (except whole-document formats) is split into lines the way the
tail collector splits them, its format is detected once, and the mix is repeated to about N
lines. Two passes run over the same lines in the same process, on one core:

* gpuherd: the file's parser (`feed`) plus the findings scan (`scan_line`), as the tailer runs;
* baseline: one `key[:=]value` regex `finditer` per line, converting each value with `float`.

It prints lines/s for both and their ratio (goal: >= 200k lines/s and >= 0.7x the baseline).
Rates are per second of this process's CPU time (the "one core" of the goal), so other work on
a shared machine does not lower them; wall-clock rates follow in brackets.

Which parsers it measures (`--parsers`; the first line of the output says which ran):

* `compiled` (the default): what `pip install .` ships on a machine with a C compiler. This
  checkout's parsers are compiled with mypyc as the wheel build does (hatch_build.py), once per
  version of their sources (kept under `build/bench-parsers/`), and a second process of this
  script measures them. Without a compiler, mypyc or hatchling, it says so and measures the
  pure-Python parsers instead.
* `pure`: this checkout's pure-Python parsers, as an editable install runs them.
* `imported`: whichever `import parsers` finds (an installed wheel's, else this checkout's).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # after site-packages: an installed (maybe compiled) gpuherd wins

import parsers.text  # noqa: E402
from gpuherd import parsers_compiled  # noqa: E402
from gpuherd.parse.parse_command import iter_lines  # noqa: E402
from parsers.findings import scan_line  # noqa: E402
from parsers.registry import DOCUMENT_FORMATS, detect_format, make_parser  # noqa: E402

DATA = ROOT / "tests" / "data" / "logs"
BASELINE = re.compile(r"\b([A-Za-z_][\w/.@-]*)\s*[:=]\s*([-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)")


def load_mix(target_lines: int) -> list[tuple[str, list[str]]]:
    """(format, lines) per real log, repeated until the mix holds about `target_lines`."""
    files: list[tuple[str, list[str]]] = []
    for path in sorted(DATA.glob("*/*")):
        if not path.is_file() or path.name.endswith(".expected.json") or path.suffix == ".md":
            continue
        if path.parent.name == "make_logs":
            continue
        with path.open("rb") as handle:
            lines = list(iter_lines(handle))
        log_format = detect_format(lines[:200], str(path))
        if log_format not in DOCUMENT_FORMATS:
            files.append((log_format, lines))
    per_round = sum(len(lines) for _, lines in files)
    rounds = max(1, round(target_lines / per_round))
    return files * rounds


def run_gpuherd(mix: list[tuple[str, list[str]]]) -> int:
    metrics = 0
    for log_format, lines in mix:
        feed = make_parser(log_format).feed
        for line in lines:
            try:
                if feed(line) is not None:
                    metrics += 1
            except ValueError:
                pass
            scan_line(line)
    return metrics


def run_baseline(mix: list[tuple[str, list[str]]]) -> int:
    found = 0
    finditer = BASELINE.finditer
    for _, lines in mix:
        for line in lines:
            values = [(m[1], float(m[2])) for m in finditer(line)]
            if values:
                found += 1
    return found


def best_rates(mix: list[tuple[str, list[str]]], repeats: int) -> list[tuple[float, float, int]]:
    """(CPU lines/s, wall lines/s, result) of the best run of each pass; the passes alternate,
    so a busy spell on a shared machine hits both rather than one."""
    total_lines = sum(len(lines) for _, lines in mix)
    passes = (run_gpuherd, run_baseline)
    best_cpu = [float("inf")] * len(passes)
    best_wall = [float("inf")] * len(passes)
    results = [0] * len(passes)
    for _ in range(repeats):
        for i, function in enumerate(passes):
            wall, cpu = time.perf_counter(), time.process_time()
            results[i] = function(mix)
            best_cpu[i] = min(best_cpu[i], time.process_time() - cpu)
            best_wall[i] = min(best_wall[i], time.perf_counter() - wall)
    return [
        (total_lines / cpu, total_lines / wall, result)
        for cpu, wall, result in zip(best_cpu, best_wall, results, strict=True)
    ]


def parsers_build() -> str:
    """`compiled (mypyc)` or `pure Python`, and where the parsers were imported from."""
    where = Path(parsers.text.__file__ or "?").parent
    return f"{'compiled (mypyc)' if parsers_compiled() else 'pure Python'}, {where}"


def compiled_parsers_dir() -> Path | None:
    """A folder whose `parsers` package is this checkout's, compiled as the wheel build does;
    None (after saying why) where it cannot be compiled here."""
    sources = sorted((ROOT / "parsers").glob("*.py"))
    digest = hashlib.sha256(sys.version.encode())
    for source in [*sources, ROOT / "hatch_build.py"]:  # a new build step is a new version too
        digest.update(source.name.encode() + source.read_bytes())
    tree = ROOT / "build" / "bench-parsers" / digest.hexdigest()[:16]
    if (tree / "done").exists():
        return tree
    sys.path.insert(0, str(ROOT))
    try:
        from hatch_build import compile_parsers
    except ImportError as error:
        print(f"cannot compile the parsers here ({error}); measuring the pure-Python ones")
        return None
    finally:
        sys.path.remove(str(ROOT))
    print(f"compiling this checkout's parsers with mypyc into {tree} ...", flush=True)
    shutil.rmtree(tree, ignore_errors=True)
    tree.mkdir(parents=True)
    # mypyc and the compiler report on file descriptor 1, from this process and from theirs
    with (tree / "compile.log").open("w") as log:
        stdout = os.dup(1)
        os.dup2(log.fileno(), 1)
        try:
            built = compile_parsers(ROOT, tree / "work")
        finally:
            os.dup2(stdout, 1)
            os.close(stdout)
    if not built:
        print("measuring the pure-Python parsers instead")
        return None
    (tree / "parsers").mkdir()
    for source in sources:
        shutil.copy(source, tree / "parsers" / source.name)
    for path, in_wheel in built.items():
        shutil.copy(path, tree / in_wheel)
    shutil.rmtree(tree / "work")
    (tree / "done").touch()
    return tree


def measure_in(first_on_path: Path, argv: list[str]) -> int:
    """Run this script again, measuring the parsers of `first_on_path`."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(first_on_path), str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
        ),
    }
    return subprocess.run(
        [sys.executable, __file__, *argv, "--parsers", "imported"], env=env, check=False
    ).returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--parsers", choices=("compiled", "pure", "imported"), default="compiled")
    args = parser.parse_args()
    passed_on = ["--lines", str(args.lines), "--repeats", str(args.repeats)]
    if args.parsers == "compiled" and not parsers_compiled():
        tree = compiled_parsers_dir()
        if tree is not None:
            return measure_in(tree, passed_on)
    elif args.parsers == "pure" and parsers_compiled():
        return measure_in(ROOT, passed_on)
    print(f"parsers: {parsers_build()}")
    mix = load_mix(args.lines)
    total = sum(len(lines) for _, lines in mix)
    chars = sum(len(line) for _, lines in mix for line in lines)
    formats = sorted({name for name, _ in mix})
    print(
        f"mix: {total:,} lines, {chars / total:.0f} chars/line on average, "
        f"{len(formats)} formats: {', '.join(formats)}"
    )
    (ours, ours_wall, metrics), (base, base_wall, matched) = best_rates(mix, args.repeats)
    print(
        f"gpuherd parsers + findings: {ours:>12,.0f} lines/s  [wall {ours_wall:,.0f}]  "
        f"({metrics:,} metrics)"
    )
    print(
        f"one-regex key:value scan:   {base:>12,.0f} lines/s  [wall {base_wall:,.0f}]  "
        f"({matched:,} lines with pairs)"
    )
    ratio = ours / base
    print(
        f"ratio: {ratio:.2f}x  goal: >= 200,000 lines/s and >= 0.70x -> "
        f"{'met' if ours >= 200_000 and ratio >= 0.7 else 'NOT met'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
