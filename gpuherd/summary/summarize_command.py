"""`gpuherd summarize DIR [--json | --md]`: summarize a recorded session directory."""

from __future__ import annotations

import sys
from pathlib import Path

from collectors.base import GpuherdError
from collectors.session.session_format import SUMMARY_JSON_FILE, SUMMARY_MD_FILE
from gpuherd.common import exit_codes
from gpuherd.common.options import SummarizeOptions
from gpuherd.present.format import visible
from gpuherd.summary.frames import load_frames
from gpuherd.summary.report import render_json, render_markdown, render_short
from gpuherd.summary.summary import summarize_frames, write_atomic

EXIT_OK, EXIT_BAD_INPUT = exit_codes.OK, exit_codes.USAGE


def run(args: SummarizeOptions) -> int:
    """Write `summary.json` and `summary.md` into DIR and print the summary.

    Prints the short text form, or with `--json` / `--md` the file's content. A directory that
    cannot be written to (a read-only copy) still gets its summary printed, with a warning. A
    session that cannot be read at all is one line on stderr and exit status 2 (bad input);
    lines the reader skipped are listed in the summary's notes.
    """
    root = Path(args.session_dir)
    try:
        frames = load_frames(root)
        summary = summarize_frames(frames)
    except GpuherdError as error:
        print(visible(f"gpuherd: {error.msg}"), file=sys.stderr)
        return EXIT_BAD_INPUT
    as_json = render_json(summary)
    as_md = render_markdown(summary, frames)
    try:
        write_atomic(root / SUMMARY_JSON_FILE, as_json)
        write_atomic(root / SUMMARY_MD_FILE, as_md)
    except OSError as error:
        print(
            visible(
                f"gpuherd: could not write the summary files into {root}: {error.strerror or error}"
            ),
            file=sys.stderr,
        )
    if args.json:
        sys.stdout.write(as_json)
    elif args.md:
        sys.stdout.write(as_md)
    else:
        print(render_short(summary))
    return EXIT_OK
