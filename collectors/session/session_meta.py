"""The JSON of a session: `meta.json` (checked, its optional keys cleaned) and `events.jsonl` lines.

JSON has no NaN or infinity, but Python's parser reads `NaN`, `Infinity` and numbers beyond
1e308; here they become the strings `"nan"`, `"inf"` and `"-inf"`, as the writer spells them,
so no non-finite float reaches a summary. Nesting deeper than `MAX_DEPTH` is refused.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from collectors.session import cells
from collectors.session.rows import SessionFormatError
from collectors.session.session_format import (
    COMMAND_EXIT_FILE,
    EVENT,
    META,
    META_FILE,
    REQUIRED_META,
    SCHEMA_VERSION,
)

MAX_DEPTH = 32
"""Deepest nesting of lists and objects a session's JSON may have."""
MAX_META_BYTES = 16 << 20
MAX_EVENT_BYTES = 1 << 20
"""A longer `events.jsonl` line is skipped."""


class JsonProblem(ValueError):
    """A JSON text that a session reader does not accept; the message says why."""


def _constant(name: str) -> str:
    return {"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}[name]


def _float(text: str) -> float | str:
    value = float(text)
    if math.isfinite(value):
        return value
    return "inf" if value > 0 else "-inf"


def loads(text: str) -> Any:
    """Parse JSON the session way; `JsonProblem` with the reason (and column) otherwise."""
    try:
        value = json.loads(text, parse_constant=_constant, parse_float=_float)
    except json.JSONDecodeError as error:
        raise JsonProblem(f"not valid JSON ({error.msg}, column {error.colno})") from None
    except RecursionError:
        raise JsonProblem(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as error:  # an integer with more digits than Python converts
        raise JsonProblem(f"not valid JSON ({error})") from None
    if _depth(value) > MAX_DEPTH:
        raise JsonProblem(f"nested deeper than {MAX_DEPTH} levels")
    return value


def _depth(value: Any) -> int:
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, depth)
            if depth <= MAX_DEPTH:
                todo.extend(
                    (v, depth + 1) for v in (item.values() if isinstance(item, dict) else item)
                )
    return deepest


def is_number(value: Any) -> bool:
    """A JSON number (not a boolean); after `loads` it is always finite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_time(value: Any) -> bool:
    """Unix seconds within the range a session may hold."""
    return is_number(value) and 0 <= value <= cells.MAX_T_S


def read_meta(directory: Path, warn: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Read and check `meta.json`; `SessionFormatError` naming the file when it is unusable.

    Optional keys gpuherd reads that hold the wrong kind of value are dropped, each with a
    warning passed to `warn`.
    """
    path = directory / META_FILE
    if not directory.is_dir():
        what = "no such directory" if not directory.exists() else "not a directory"
        raise SessionFormatError(f"not a gpuherd session ({what})", str(directory))
    try:
        with path.open("rb") as f:
            raw = f.read(MAX_META_BYTES + 1)
    except FileNotFoundError:
        raise SessionFormatError(
            f"not a gpuherd session (no {META_FILE} in it)", str(directory)
        ) from None
    except OSError as error:
        raise SessionFormatError(f"cannot read: {error.strerror}", str(path)) from None
    if len(raw) > MAX_META_BYTES:
        raise SessionFormatError(f"larger than {MAX_META_BYTES >> 20} MiB", str(path))
    text = raw.decode("utf-8", "replace").removeprefix("\ufeff")
    try:
        meta = loads(text)
    except JsonProblem as problem:
        raise SessionFormatError(str(problem), str(path), _line_of(text, problem)) from None
    found = meta_problem(meta)
    if found:
        raise SessionFormatError(found, str(path))
    for key, why in clean_meta(meta):
        if warn is not None:
            warn(f"{path}: ignored {key!r}: {why}")
    _adopt_exit_record(directory, meta, warn)
    return meta


def _adopt_exit_record(
    directory: Path, meta: dict[str, Any], warn: Callable[[str], None] | None
) -> None:
    """Take the command's exit code from `command.exit.json` when the recorder never closed.

    The command runs under a supervisor that outlives a killed recorder and writes how the
    command ended there; without this, a session whose recorder was killed (`kill -9`, the OOM
    killer) would read as if the command had never ended.
    """
    if meta.get(META.ended_at) is not None or meta.get(META.exit_code) is not None:
        return
    path = directory / COMMAND_EXIT_FILE
    try:
        record = read_command_exit(directory)
    except FileNotFoundError:
        return
    except (OSError, JsonProblem) as error:
        if warn is not None:
            warn(f"{path}: ignored: {error}")
        return
    code = record.get("exit_code") if isinstance(record, dict) else None
    if not (isinstance(code, int) and not isinstance(code, bool) and 0 <= code <= 255):
        if warn is not None:
            warn(f"{path}: ignored: no exit_code from 0 to 255")
        return
    meta[META.exit_code] = code
    if warn is not None:
        warn(
            f"{directory}: the recorder stopped before the command ended (killed?); the "
            f"command's exit code {code} comes from {COMMAND_EXIT_FILE}"
        )


def read_command_exit(directory: Path) -> Any:
    """The JSON value in `command.exit.json`, which the command's supervisor writes at its end.

    The one reader of that file. The value is what the file holds (an object when the
    supervisor wrote it); the caller checks its fields.

    Raises:
        FileNotFoundError: the command has not ended (or never ran under a supervisor).
        OSError: the file cannot be read.
        JsonProblem: it is not JSON (a write cut short).
    """
    with (directory / COMMAND_EXIT_FILE).open("rb") as f:
        return loads(f.read(MAX_EVENT_BYTES).decode("utf-8", "replace"))


def _line_of(text: str, problem: JsonProblem) -> int | None:
    try:
        json.loads(text)
    except json.JSONDecodeError as error:
        return error.lineno
    except (RecursionError, ValueError):
        return None
    return None


def meta_problem(meta: object) -> str | None:
    """What makes a `meta.json` object unusable, in words; `None` when it can be read."""
    if not isinstance(meta, dict):
        return "must hold a JSON object"
    missing = [k for k in REQUIRED_META if k not in meta]
    if missing:
        return f"missing required key(s): {', '.join(missing)}"
    schema = meta[META.schema]
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        return f"'schema' must be a positive integer, not {_short(schema)}"
    if schema > SCHEMA_VERSION:
        return (
            f"schema {schema} is newer than this gpuherd reads ({SCHEMA_VERSION}); upgrade gpuherd"
        )
    if not isinstance(meta[META.host], str):
        return "'host' must be a string"
    if meta[META.driver] is not None and not isinstance(meta[META.driver], str):
        return "'driver' must be a string or null"
    if not is_time(meta[META.started_at]):
        return (
            f"'started_at' must be a number of Unix seconds (0 to {cells.MAX_T_S:g}), not "
            f"{_short(meta[META.started_at])}"
        )
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _interval(value: Any) -> bool:
    return is_number(value) and 0 <= value <= 1e6


def _positive_interval(value: Any) -> bool:
    return _interval(value) and value > 0


def _whole(lo: int, hi: int) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi

    return check


def _maybe(check: Callable[[Any], bool]) -> Callable[[Any], bool]:
    def either(value: Any) -> bool:
        return value is None or check(value)

    return either


def _text(value: Any) -> bool:
    return isinstance(value, str)


def _command(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and all(map(_text, value)))


def _flag(value: Any) -> bool:
    return isinstance(value, bool)


_BYTES = _whole(0, 2**53 - 1)
_GPU = _whole(0, 65535)
_TEXT_OR_NONE = _maybe(_text)
_TIME_OR_NONE = _maybe(is_time)

KEYS: dict[str, tuple[Callable[[Any], bool], str]] = {
    META.ended_at: (_TIME_OR_NONE, "must be Unix seconds or null"),
    META.interval_s: (_positive_interval, "must be seconds, above 0 and at most 1e6"),
    META.peak_interval_s: (_maybe(_interval), "must be seconds (0 to 1e6) or null"),
    META.tool: (_text, "must be a string"),
    META.nvml_version: (_TEXT_OR_NONE, "must be a string"),
    META.cuda_driver_version: (
        _maybe(lambda v: _text(v) or _whole(0, 2**31)(v)),
        "must be a string or a whole number",
    ),
    META.command: (_command, "must be a list of strings"),
    META.exit_code: (_maybe(_whole(-(2**31), 2**31)), "must be a whole number"),
    META.peak_sampler: (_TEXT_OR_NONE, "must be a string"),
    META.write_error: (_TEXT_OR_NONE, "must be a string"),
    META.synthetic: (_flag, "must be true or false"),
}
"""Optional keys gpuherd reads: (check, what a valid value is)."""
ENTRIES: dict[str, dict[str, Callable[[Any], bool]]] = {
    META.gpus: {
        "index": _GPU,
        "uuid": _TEXT_OR_NONE,
        "name": _TEXT_OR_NONE,
        "mem_total_bytes": _maybe(_BYTES),
    },
    META.run_peaks: {
        "gpu": _GPU,
        "uuid": _TEXT_OR_NONE,
        "peak_bytes": _BYTES,
        "at": _TIME_OR_NONE,
        "method": _TEXT_OR_NONE,
        "baseline_bytes": _maybe(_BYTES),
    },
    META.tasks: {"task": _text, "path": _TEXT_OR_NONE, "format": _TEXT_OR_NONE},
}
"""Optional keys that hold a list of objects: per entry key, its check. Entries that fail are
dropped, the rest kept."""


def clean_meta(meta: dict[str, Any]) -> list[tuple[str, str]]:
    """Drop optional keys (and list entries) that hold the wrong kind of value; `(key, why)`."""
    dropped = []
    for key, (check, why) in KEYS.items():
        if key in meta and not check(meta[key]):
            dropped.append((key, f"{why}, not {_short(meta.pop(key))}"))
    started: Any = meta.get(META.started_at)
    ended: Any = meta.get(META.ended_at)
    if is_time(started) and is_time(ended) and ended < started:
        # A clock stepped back while recording (NTP, a VM restored): no duration can come of it.
        del meta[META.ended_at]
        dropped.append(
            (
                META.ended_at,
                f"{ended:.3f} is {started - ended:.3f} s before 'started_at' ({started:.3f})",
            )
        )
    for key, fields in ENTRIES.items():
        if key not in meta or meta[key] is None:
            continue
        value = meta[key]
        if not isinstance(value, list):
            dropped.append((key, f"must be a list of objects, not {_short(meta.pop(key))}"))
            continue
        kept = [
            e
            for e in value
            if isinstance(e, dict) and all(check(e.get(name)) for name, check in fields.items())
        ]
        if len(kept) < len(value):
            dropped.append(
                (
                    key,
                    f"{len(value) - len(kept)} of {len(value)} entries are not "
                    f"objects with valid {', '.join(fields)}",
                )
            )
        meta[key] = kept
    return dropped


def read_event(line: str) -> dict[str, Any]:
    """One `events.jsonl` line as an object with a valid `t` and `kind`; `JsonProblem` if not."""
    value = loads(line)
    if not isinstance(value, dict):
        raise JsonProblem("each line must be a JSON object")
    if not is_time(value.get("t")):
        raise JsonProblem(f"'t' must be Unix seconds, not {_short(value.get('t'))}")
    if not isinstance(value.get("kind"), str):
        raise JsonProblem(f"'kind' must be a string, not {_short(value.get('kind'))}")
    if value["kind"] == EVENT.finding:
        found = value.get("finding")
        if not isinstance(found, str) or not found.strip():
            # Counted, it would be a finding of no kind: a badge with no name, a note's "".
            raise JsonProblem(
                f"a finding event's 'finding' must name its kind, not {_short(found)}"
            )
    return value
