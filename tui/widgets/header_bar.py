"""One-line header: host, driver, time, and the replay banner when replaying."""

from __future__ import annotations

import time
from typing import Any

from rich.text import Text
from textual.reactive import reactive

from gpuherd.present.format import visible
from tui.widgets.text_lines import TextLines


class HeaderBar(TextLines):
    """Shows where and when the figures come from.

    Its clock changes every second; drawn as one line of text (not through `render()`, which
    re-wraps and re-styles the text on each repaint) it costs about a third as much.
    """

    DEFAULT_CSS = """
    HeaderBar {
        height: 1;
        width: 1fr;
        background: $panel;
    }
    """

    hostname: reactive[str] = reactive("")
    driver: reactive[str | None] = reactive(None)
    """NVIDIA driver version from the newest tick, `None` before one arrives or without NVML."""
    cuda: reactive[str | None] = reactive(None)
    now: reactive[float | None] = reactive(None)
    """Unix seconds to show: the wall clock live, the recorded time when replaying."""
    replay_label: reactive[str | None] = reactive(None)
    """`REPLAY <dir> x<speed>` in replay mode."""
    finished: reactive[bool] = reactive(False)
    """The replayed session has ended."""

    def line_inputs(self) -> tuple[Any, ...]:
        """The reactives the line is made of."""
        return (
            self.hostname,
            self.driver,
            self.cuda,
            self.now,
            self.replay_label,
            self.finished,
        )

    def build_lines(self, width: int) -> list[Text]:
        """Left: app and host; middle: replay state; right: driver and time.

        On a narrow terminal the driver goes first, then the middle of the replay's path:
        `replay finished` and the speed stay in view.
        """
        left = Text.assemble(("gpuherd", "bold"), "  ", (visible(self.hostname), "bold cyan"))
        finished = (
            Text("  replay finished", style="bold yellow")
            if (self.replay_label and self.finished)
            else Text("")
        )
        right = Text()
        right.append(f"driver {visible(self.driver or 'N/A')}")
        if self.cuda:
            right.append(f"  CUDA {visible(self.cuda)}")
        if self.now is not None:
            right.append("  " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.now)))
        label = f" {visible(self.replay_label)} " if self.replay_label else ""
        used = left.cell_len + finished.cell_len + (2 if label else 0)
        if width - used - len(label) - right.cell_len < 2:
            # Narrow terminal: keep the host and the replay state, drop the driver first.
            clock = "" if self.now is None else time.strftime("%H:%M:%S", time.localtime(self.now))
            right = Text(clock)
            label = _middle_cut(label, width - used - right.cell_len - 2)
        if label:
            left.append("  ")
            left.append(label, style="bold black on yellow")
        left.append_text(finished)
        gap = max(1, width - left.cell_len - right.cell_len)
        line = Text.assemble(left, " " * gap, right, no_wrap=True)
        line.truncate(width, overflow="ellipsis")  # a host name wider than the terminal
        return [line]


def _middle_cut(label: str, room: int) -> str:
    """`label` in at most `room` cells (at least its ends): ` REPLAY /tmp/…/run x2 `."""
    if len(label) <= room:
        return label
    keep = max(8, room) - 1
    head = (keep + 1) // 2
    return label[:head] + "…" + label[len(label) - (keep - head) :]
