from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.logs.logtail_lines import LineAssembler


def feed_all(assembler, chunks):
    out = []
    for chunk in chunks:
        out.extend(assembler.feed(chunk))
    return out


def test_complete_lines_are_numbered_and_partial_line_waits():
    a = LineAssembler()
    assert a.feed(b"step=1\nstep=2\nste") == [(1, "step=1"), (2, "step=2")]
    assert a.take_update() is None  # a partial line without \r is never parsed early
    assert a.feed(b"p=3\n") == [(3, "step=3")]
    assert a.line_no == 3


def test_carriage_return_run_is_one_line_with_one_update_per_read():
    a = LineAssembler()
    bar = b"".join(b"\r %d%%|#| %d/1000" % (i // 10, i) for i in range(1000))
    assert a.feed(bar[: len(bar) // 2]) == []
    first = a.take_update()
    assert first is not None and first[0] == 1
    assert a.take_update() is None  # handed out once per read
    assert a.feed(bar[len(bar) // 2 :]) == []
    second = a.take_update()
    assert second[0] == 1 and second[1] == " 99%|#| 998/1000"
    assert a.feed(b"\n") == [(1, " 99%|#| 999/1000")]
    assert a.line_no == 1


def test_final_segment_already_handed_out_is_not_repeated():
    a = LineAssembler()
    a.feed(b"\rbar 1\rbar 2\r")
    assert a.take_update() == (1, "bar 2")
    assert a.feed(b"\n") == []  # "bar 2" was the last state; counted, not parsed twice
    assert a.line_no == 1


def test_windows_line_endings_keep_the_text():
    a = LineAssembler()
    assert a.feed(b"a=1\r\nb=2\r\n") == [(1, "a=1"), (2, "b=2")]


def test_blank_clearing_segments_fall_back_to_last_real_segment():
    a = LineAssembler()
    assert a.feed(b"\rEpoch 1: 50%\r" + b" " * 40 + b"\r\n") == [(1, "Epoch 1: 50%")]


def test_too_long_line_keeps_its_head_is_counted_and_memory_stays_capped():
    a = LineAssembler(max_line_bytes=1000)
    assert a.feed(b"step=1 loss=0.5 ") == []
    for _ in range(50):
        assert a.feed(b"x" * 4096) == []
        assert a.pending_bytes <= 1000
    assert a.feed(b"x\nok=1\n") == [(1, "step=1 loss=0.5 " + "x" * 984), (2, "ok=1")]
    assert a.too_long == 1 and a.line_no == 2


def test_a_line_of_exactly_the_cap_is_whole_and_one_byte_more_is_cut():
    for chunks in ([b"y" * 100 + b"\n"], [b"y" * 60, b"y" * 40 + b"\n"]):
        a = LineAssembler(max_line_bytes=100)
        assert feed_all(a, chunks) == [(1, "y" * 100)]
        assert a.too_long == 0
    a = LineAssembler(max_line_bytes=100)
    assert feed_all(a, [b"y" * 60, b"y" * 41 + b"\n"]) == [(1, "y" * 100)]
    assert a.too_long == 1


def test_a_too_long_redraw_segment_keeps_its_head():
    a = LineAssembler(max_line_bytes=10)
    assert a.feed(b"\rbar 1\rstep=2 loss=0.25\n") == [(1, "step=2 los")]
    assert a.too_long == 1


def test_invalid_utf8_is_replaced_not_fatal():
    a = LineAssembler()
    [(n, text)] = a.feed(b"loss=\xff\xfe0.5\n")
    assert n == 1 and text == "loss=\ufffd\ufffd0.5"


def test_leading_nul_hole_after_copytruncate_is_dropped():
    a = LineAssembler(max_line_bytes=100)
    assert a.feed(b"\0" * 10_000 + b"step=5\n") == [(1, "step=5")]
    assert a.too_long == 0


def test_flush_completes_the_unfinished_line():
    a = LineAssembler()
    a.feed(b"a\nunfinished")
    assert a.flush() == [(2, "unfinished")]
    assert a.flush() == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="ab=1 \u00e9", max_size=30), max_size=40), st.data())
def test_any_chunking_gives_the_same_lines(lines, data):
    raw = "".join(line + "\n" for line in lines).encode()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(raw)), max_size=10)))
    chunks = [raw[i:j] for i, j in zip([0, *cuts], [*cuts, len(raw)], strict=True)]
    whole = feed_all(LineAssembler(), [raw])
    assert feed_all(LineAssembler(), chunks) == whole
    assert [t for _, t in whole] == [line for line in lines if line]


def test_random_binary_garbage_never_raises_and_stays_bounded():
    rng = random.Random(7)
    a = LineAssembler(max_line_bytes=512)
    for _ in range(200):
        a.feed(rng.randbytes(rng.randint(0, 5000)))
        a.take_update()
        assert a.pending_bytes <= 2 * 512
