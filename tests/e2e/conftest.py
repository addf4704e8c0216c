"""The tmux pane every end-to-end test drives, on a private server killed afterwards."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import pytest

from tests.e2e.tmux_pane import Pane


@pytest.fixture
def pane(request: pytest.FixtureRequest) -> Iterator[Pane]:
    name = re.sub(r"\W+", "-", request.node.name)[:40]
    pane = Pane(f"gpuherd-{name}-{time.monotonic_ns()}")
    yield pane
    pane.tmux("kill-server")
