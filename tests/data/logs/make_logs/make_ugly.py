"""Build generic/ugly.log from lines of generic/train.log, damaged the ways real logs get damaged.

Usage: python make_ugly.py  (run from this folder; rewrites ../generic/ugly.log)
"""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent


def main() -> None:
    real = (HERE.parent / "generic" / "train.log").read_bytes().splitlines()
    stamp, message = real[0].split(b" INFO ")
    lines = [
        # a colouring log handler
        stamp + b" \x1b[32mINFO\x1b[0m \x1b[1m" + message + b"\x1b[0m",
        # bytes that are not UTF-8 in the middle of a line
        real[1].replace(b" lr=", b" \xff\xfe\xc3 lr="),
        # a value that is not a number (counted as unparsed)
        real[3].replace(b"loss=1.0696", b"loss=1,0,696"),
        # numbers in every spelling
        stamp + b" INFO step=40 loss=-inf lr=1e-5 tokens/s=1,234.5 grad_norm=NaN",
        # binary garbage
        bytes(b for b in range(256) if b not in (10, 13)),
        # a progress bar redrawn with carriage returns
        b"\r".join(b"step=%d loss=0.%d" % (i, i - 40) for i in range(41, 45)) + b"\r",
        # a very long line whose pairs sit beyond the 10,000-character cap: not parsed
        b"=" * 20_000 + b" step=99 loss=0.1",
        # a very long line whose pairs come first: parsed
        b"step=98 loss=0.2 " + b"x" * 20_000,
        real[4],
        # the writer was interrupted mid-line (no newline at the end of the file)
        real[6][:40],
    ]
    (HERE.parent / "generic" / "ugly.log").write_bytes(b"\n".join(lines))


if __name__ == "__main__":
    main()
