"""A job restarted into the same log (`python train.py > train.log` again) prints what it printed
before: the same banner and the same first steps. The file's start is unchanged, so only its
size, smaller than where the tail had read to, shows the restart; without that check the tail
would wait at the old offset and lose every line the restarted job writes before passing it.
"""

from __future__ import annotations

from tests.unit.test_logtail_collector import append, drain, lines, make, steps

BANNER = "".join(f"[train.py] config line {i}: same in every run\n" for i in range(12))


def test_a_restart_that_prints_the_same_banner_loses_no_line(tmp_path):
    log = tmp_path / "train.log"
    append(log, BANNER + lines(0, 50))
    tail = make(log)
    try:
        got = drain(tail)
        assert steps(got) == list(range(50))
        append(log, BANNER + lines(0, 5), mode="w")  # the shell truncates, the job starts over
        got += drain(tail)
        append(log, lines(5, 60))  # and goes on past where the first run had got to
        got += drain(tail)
    finally:
        tail.close()
    assert steps(got) == list(range(50)) + list(range(60))
    restarted = [b for b in got if b.truncated]
    assert [b.generation for b in restarted] == [2]
    # numbered from line 1 of the new run: the banner's 12 lines come first
    assert restarted[0].metrics[0][0] == 13
