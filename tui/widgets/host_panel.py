"""The host panel: CPU, memory, swap, load, disk and network rates."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive

from collectors.roles import GPU, HOST
from collectors.samples import HostSample
from gpuherd.present.format import fmt_gib_pair, fmt_number, fmt_pct, fmt_rate, pct_of
from tui.text import bar
from tui.widgets.composed import composed
from tui.widgets.panel import Panel
from tui.widgets.text_lines import TextLines

if TYPE_CHECKING:
    from tui.state import MonitorState

STACK_BELOW = 50
"""Below this width each figure gets its own line; above it figures flow side by side."""


class HostPanel(TextLines):
    """Host-wide figures from the newest `HostSample`."""

    DEFAULT_CSS = """
    HostPanel {
        height: auto;
        width: 1fr;
    }
    """

    sample: reactive[HostSample | None] = reactive(None)
    """The newest host sample; `None` until the first arrives."""

    def __init__(self) -> None:
        super().__init__()
        self._line_count = 1

    def watch_sample(self) -> None:
        """Re-lay out the screen only when the figures need a different number of lines."""
        count = len(self._current_lines(self.size.width))  # built once, reused to draw
        if count != self._line_count:
            self._line_count = count
            self.refresh(layout=True)

    def line_inputs(self) -> tuple[object, ...]:
        """The sample."""
        return (self.sample,)

    def build_lines(self, width: int) -> list[Text]:
        """Figures stacked in a narrow column, or flowing in rows when wide."""
        if self.sample is None:
            return [Text("waiting for the first host reading…", style="dim")]
        width = max(20, width)
        segments = host_segments(self.sample, width)
        return segments if width < STACK_BELOW else _flow(segments, width)


def host_segments(sample: HostSample, width: int) -> list[Text]:
    """One `Text` per figure; bars shrink with the width."""
    bar_w = 12 if width < STACK_BELOW or width >= 120 else 8
    cpu_count = f" of {sample.cpu_count}" if sample.cpu_count else ""
    ram_pct = pct_of(sample.mem_used_bytes, sample.mem_total_bytes)
    load = " ".join(fmt_number(v) for v in (sample.load_1m, sample.load_5m, sample.load_15m))
    return [
        Text.assemble(
            ("CPU  ", "bold"),
            bar(sample.cpu_pct, bar_w),
            f" {fmt_pct(sample.cpu_pct):>4}{cpu_count}",
        ),
        Text.assemble(
            ("RAM  ", "bold"),
            bar(ram_pct, bar_w),
            f" {fmt_gib_pair(sample.mem_used_bytes, sample.mem_total_bytes)}",
        ),
        Text.assemble(("load ", "bold"), load),
        _swap(sample, bar_w),
        Text.assemble(
            ("disk ", "bold"),
            f"r {fmt_rate(sample.disk_read_bytes_s)}",
            f"  w {fmt_rate(sample.disk_write_bytes_s)}",
        ),
        Text.assemble(
            ("net  ", "bold"),
            f"rx {fmt_rate(sample.net_rx_bytes_s)}",
            f"  tx {fmt_rate(sample.net_tx_bytes_s)}",
        ),
    ]


def _swap(sample: HostSample, bar_w: int) -> Text:
    if sample.swap_total_bytes == 0:
        return Text.assemble(("swap ", "bold"), "none")
    swap_pct = pct_of(sample.swap_used_bytes, sample.swap_total_bytes)
    return Text.assemble(
        ("swap ", "bold"),
        bar(swap_pct, bar_w),
        f" {fmt_gib_pair(sample.swap_used_bytes, sample.swap_total_bytes)}",
    )


def _flow(segments: list[Text], width: int, gap: str = "   ") -> list[Text]:
    lines: list[Text] = []
    line = Text(no_wrap=True, overflow="crop")
    for segment in segments:
        if line.cell_len and line.cell_len + len(gap) + segment.cell_len > width:
            lines.append(line)
            line = Text(no_wrap=True, overflow="crop")
        if line.cell_len:
            line.append(gap)
        line.append_text(segment)
    lines.append(line)
    return lines


class HostSection(Vertical, Panel):
    """The bordered host panel.

    While GPU ticks flow, a host sample waits for the next tick, so the screen is redrawn once
    a second, not twice: Textual repaints the bounding box of everything that changed, so a
    second frame costs nearly as much as the first.
    """

    ROLES = frozenset({GPU, HOST})
    HEALTH_ROLE = HOST

    def compose(self) -> ComposeResult:
        """The host's figures."""
        yield HostPanel()

    def on_mount(self) -> None:
        """Its title never changes."""
        self.border_title = "Host"

    def show_state(self, state: MonitorState, changed: str | None) -> None:
        """The newest host sample, with the next GPU tick while ticks flow."""
        if changed == HOST and state.gpu_streaming():
            return
        composed(self, HostPanel).sample = state.host_sample
