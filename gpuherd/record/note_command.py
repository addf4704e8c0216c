"""`gpuherd note DIR --example PATH [--dry-run]`: write the verification note of a run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from collectors.base import GpuherdError
from gpuherd import exit_codes
from gpuherd.record.note import compose, diff, updated_text, write_note
from gpuherd.record.summary import summarize

EXIT_OK, EXIT_FAILED = exit_codes.OK, exit_codes.FAILED


def run(args: argparse.Namespace) -> int:
    """Compose the note from the session in DIR and set it in the example's `verification:`.

    With `--dry-run`, print the unified diff and change nothing. Any error leaves the example
    file as it was and exits with 1.
    """
    example = Path(args.example)
    try:
        note = compose(summarize(args.session_dir))
        if getattr(args, "dry_run", False):
            old, new = updated_text(example, note)
            sys.stdout.write(diff(example, old, new) or f"{example}: already up to date\n")
            return EXIT_OK
        changed = write_note(example, note)
    except GpuherdError as error:
        print(f"gpuherd note: {error.msg}", file=sys.stderr)
        return EXIT_FAILED
    state = "updated" if changed else "already up to date"
    print(f"{example}: {state}\n  last_verified: {note.last_verified.isoformat()}\n"
          f"  last_verification_note: {note.text}")
    return EXIT_OK
