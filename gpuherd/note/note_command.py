"""`gpuherd note DIR --example PATH [--dry-run]`: write the verification note of a run."""

from __future__ import annotations

import sys
from pathlib import Path

from collectors.base import GpuherdError
from gpuherd.common import exit_codes
from gpuherd.common.options import NoteOptions
from gpuherd.note.note import compose
from gpuherd.note.note_file import NoteWriteError, diff, updated_text, write_note
from gpuherd.present.format import visible, visible_lines
from gpuherd.summary.summary import summarize

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = exit_codes.OK, exit_codes.FAILED, exit_codes.USAGE


def run(args: NoteOptions) -> int:
    """Compose the note from the session in DIR and set it in the example's `verification:`.

    With `--dry-run`, print the unified diff and change nothing. Bad input (a session that
    cannot be read, an example that is not YAML, too large, or read-only) is one line on stderr
    and exit status 2, the file untouched; a write that fails part way (a full disk) is exit
    status 1, with what was kept.
    """
    example = Path(args.example)
    try:
        note = compose(summarize(args.session_dir))
        if args.dry_run:
            old, new = updated_text(example, note)
            # The example may be another user's file: its lines are shown, not obeyed.
            sys.stdout.write(
                visible_lines(diff(example, old, new) or f"{example}: already up to date\n")
            )
            return EXIT_OK
        changed = write_note(example, note)
    except NoteWriteError as error:
        print(visible(f"gpuherd: {error.msg}"), file=sys.stderr)
        return EXIT_FAILED
    except GpuherdError as error:
        print(visible(f"gpuherd: {error.msg}"), file=sys.stderr)
        return EXIT_BAD_INPUT
    state = "updated" if changed else "already up to date"
    date = (
        f"not changed ({note.unverified_because})"
        if note.last_verified is None
        else note.last_verified.isoformat()
    )
    print(
        f"{visible(str(example))}: {state}\n  last_verified: {date}\n"
        f"  last_verification_note: {visible(note.text)}"
    )
    return EXIT_OK
