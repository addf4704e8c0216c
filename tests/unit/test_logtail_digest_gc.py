"""The digest pauses the cyclic collector only while it parses, and always turns it back on."""

from __future__ import annotations

import gc

import pytest

from collectors.logs.logtail_digest import LineDigest
from collectors.logs.logtail_formats import RegistryFormats
from parsers.model import LogMetric


class _Failing(RegistryFormats):
    """The registry's formats, but the parser fails on `boom` with an error it does not catch."""

    def make_parser(self, name: str, path: str | None = None):  # type: ignore[no-untyped-def]
        parser = super().make_parser(name, path)
        inner = parser.feed
        seen: list[bool] = []

        class Parser:
            def feed(self, line: str) -> LogMetric | None:
                seen.append(gc.isenabled())
                if line == "boom":
                    raise RuntimeError("boom")
                return inner(line)

            def reset(self) -> None:
                parser.reset()

        self.seen = seen
        return Parser()


def test_collection_is_paused_for_the_parse_loop_and_resumed_after() -> None:
    formats = _Failing()
    digest = LineDigest(formats, "train.log", forced_format="generic")
    assert gc.isenabled()
    digest.add([(1, "step=1 loss=0.5"), (2, "step=2 loss=0.25")], received_at=1.0)
    assert formats.seen == [False, False]  # paused while the lines were parsed
    assert gc.isenabled()
    assert [(n, m.step, m.values) for n, m in digest.take().metrics] == [
        (1, 1, (("train/loss", 0.5),)),
        (2, 2, (("train/loss", 0.25),)),
    ]
    with pytest.raises(RuntimeError):
        digest.add([(3, "boom")], received_at=2.0)
    assert gc.isenabled()  # the `finally` turned it back on


def test_collection_left_off_by_the_caller_stays_off() -> None:
    digest = LineDigest(_Failing(), "train.log", forced_format="generic")
    gc.disable()
    try:
        digest.add([(1, "step=1 loss=0.5")], received_at=1.0)
        assert not gc.isenabled()
    finally:
        gc.enable()
