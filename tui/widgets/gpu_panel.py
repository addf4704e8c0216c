"""The GPU panel: two lines per GPU, nvitop style, widening with the terminal."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import reactive

from collectors.roles import GPU
from collectors.samples import GpuSample, GpuTick
from gpuherd.present.format import (
    fmt_bytes_gib,
    fmt_count,
    fmt_gib_pair,
    fmt_mhz,
    fmt_on_off,
    fmt_pct,
    fmt_power_pair,
    fmt_pstate,
    fmt_temp,
    pct_of,
    visible,
)
from tui.text import bar, fit, level_style
from tui.widgets.composed import composed
from tui.widgets.panel import Panel
from tui.widgets.text_lines import TextLines

if TYPE_CHECKING:
    from tui.state import MonitorState

LINES_PER_GPU = 2


class GpuPanel(TextLines):
    """Every GPU of the newest tick; the one the chart follows is marked with `▶`."""

    DEFAULT_CSS = """
    GpuPanel {
        height: auto;
        width: 1fr;
    }
    """

    tick: reactive[GpuTick | None] = reactive(None)
    """The newest NVML round; `None` until the first arrives."""
    selected_uuid: reactive[str | None] = reactive(None)
    """UUID of the GPU whose history the chart shows."""
    compact: reactive[bool] = reactive(False, layout=True)
    """One line per GPU instead of two (set by the screen when space is short)."""

    class Selected(Message):
        """The user clicked a GPU."""

        def __init__(self, uuid: str) -> None:
            super().__init__()
            self.uuid = uuid

    def watch_tick(self, old: GpuTick | None, new: GpuTick | None) -> None:
        """Re-lay out the screen only when the panel's height changes (GPUs came or went)."""
        if _count(old) != _count(new):
            self.refresh(layout=True)

    def line_inputs(self) -> tuple[object, ...]:
        """The tick, the selection and the mode."""
        return (self.tick, self.selected_uuid, self.compact)

    def build_lines(self, width: int) -> list[Text]:
        """Two lines per GPU, or a waiting line before the first tick."""
        if self.tick is None:
            return [Text("waiting for the first GPU reading…", style="dim")]
        if not self.tick.devices:
            return [Text("NVML reports no GPUs on this machine.", style="yellow")]
        width = max(20, width)
        lines: list[Text] = []
        for gpu in self.tick.devices:
            selected = gpu.uuid == self.selected_uuid
            if self.compact:
                lines.append(compact_line(gpu, width, selected))
            else:
                lines.extend(gpu_lines(gpu, width, selected))
        return lines

    def on_click(self, event: events.Click) -> None:
        """Select the GPU under the mouse."""
        if self.tick is None:
            return
        index = event.y // (1 if self.compact else LINES_PER_GPU)
        if 0 <= index < len(self.tick.devices):
            self.post_message(self.Selected(self.tick.devices[index].uuid))


def _count(tick: GpuTick | None) -> int:
    return -1 if tick is None else len(tick.devices)


def gpu_lines(gpu: GpuSample, width: int, selected: bool) -> list[Text]:
    """The two lines of one GPU at `width` cells."""
    marker = "▶" if selected else " "
    head = Text.assemble((marker, "bold cyan"), f"{gpu.index:>2} ")
    name = Text(visible(gpu.name), style="bold")
    short_uuid = Text(_short_uuid(gpu.uuid), style="dim")
    if gpu.error is not None:
        first = fit([head + name, short_uuid], width)
        return [first, Text(f"    ERROR: {visible(gpu.error)}", style="bold red", no_wrap=True)]
    first = fit([head + name, short_uuid, *_detail_segments(gpu)], width)
    return [first, _usage_line(gpu, width)]


def compact_line(gpu: GpuSample, width: int, selected: bool) -> Text:
    """One GPU on one line: `▶ 0 H200  64°C 312W  VRAM [██░░] 45.5/139.8G 33%  UTIL [█░] 87%`."""
    head = Text.assemble(
        ("▶" if selected else " ", "bold cyan"),
        f"{gpu.index:>2} ",
        (visible(_short_name(gpu.name)), "bold"),
    )
    if gpu.error is not None:
        return fit([head, Text(f"ERROR: {visible(gpu.error)}", style="bold red")], width)
    mem_pct = pct_of(gpu.memory_used_bytes, gpu.memory_total_bytes)
    temp = Text(fmt_temp(gpu.temperature_c), style=level_style(gpu.temperature_c, 70, 83))
    power = Text("N/A" if gpu.power_w is None else f"{gpu.power_w:.0f}W")
    used = Text(f"{fmt_gib_pair(gpu.memory_used_bytes, gpu.memory_total_bytes)} ")
    used.append(f"{fmt_pct(mem_pct):>4}", style=level_style(mem_pct))
    util = Text(f"{fmt_pct(gpu.gpu_util_pct):>4}", style="bold")
    fixed = (
        head.cell_len
        + 2
        + temp.cell_len
        + 1
        + power.cell_len
        + 2
        + len("VRAM ")
        + used.cell_len
        + 1
        + 2
        + len("UTIL ")
        + util.cell_len
        + 2
    )
    room = width - fixed
    line = Text.assemble(head, "  ", temp, " ", power, "  VRAM ", no_wrap=True, overflow="ellipsis")
    if room >= 8:
        vram_w = max(4, room * 2 // 3)
        line.append_text(bar(mem_pct, vram_w))
        line.append(" ")
        line.append_text(used)
        line.append("  UTIL ")
        line.append_text(bar(gpu.gpu_util_pct, room - vram_w, style="cyan"))
        line.append(" ")
    else:  # too narrow for bars: the numbers alone
        line.append_text(used)
        line.append("  UTIL ")
    line.append_text(util)
    return line


def _short_name(name: str) -> str:
    """`NVIDIA H100 80GB HBM3` -> `H100 80GB HBM3`: one line has no room for the vendor."""
    return name.removeprefix("NVIDIA ")


def _short_uuid(uuid: str) -> str:
    # "GPU-1a2b3c4d-..." -> "GPU-1a2b3c4d": enough to tell GPUs apart and match nvidia-smi -L.
    return uuid[:12]


def _detail_segments(gpu: GpuSample) -> list[Text]:
    """Temperature, power and clock (`N/A` when unknown), then the extras that are known.

    The extras (pstate, fan, ECC, MIG, reservation, memory clock) are dropped last to first when
    the line is too narrow, and left out when the device does not report them: a replayed
    session without those columns should not show a row of `N/A`.
    """
    temp = Text(fmt_temp(gpu.temperature_c), style=level_style(gpu.temperature_c, 70, 83))
    power_pct = pct_of(gpu.power_w, gpu.power_limit_w)
    power = Text(fmt_power_pair(gpu.power_w, gpu.power_limit_w), style=level_style(power_pct))
    segments = [temp, power, Text(f"SM {fmt_mhz(gpu.sm_clock_mhz)}")]
    if gpu.pstate is not None:
        segments.append(Text(fmt_pstate(gpu.pstate)))
    if gpu.fan_pct is not None:
        segments.append(Text(f"fan {fmt_pct(gpu.fan_pct)}"))
    if gpu.ecc_errors_corrected is not None or gpu.ecc_errors_uncorrected is not None:
        ecc = f"ECC {fmt_count(gpu.ecc_errors_corrected)}/{fmt_count(gpu.ecc_errors_uncorrected)}"
        segments.append(Text(ecc, style="bold red" if gpu.ecc_errors_uncorrected else ""))
    if gpu.mig_mode is not None:
        segments.append(Text(f"MIG {fmt_on_off(gpu.mig_mode)}"))
    if gpu.memory_reserved_bytes is not None:
        segments.append(Text(f"reserved {fmt_bytes_gib(gpu.memory_reserved_bytes)}", style="dim"))
    if gpu.mem_clock_mhz is not None:
        segments.append(Text(f"mem {fmt_mhz(gpu.mem_clock_mhz)}", style="dim"))
    return segments


def _usage_line(gpu: GpuSample, width: int) -> Text:
    """`VRAM [bar] used / total GiB pct  UTIL [bar] pct  MEM pct` with bars filling the width."""
    mem_pct = pct_of(gpu.memory_used_bytes, gpu.memory_total_bytes)
    vram_text = Text(f" {fmt_gib_pair(gpu.memory_used_bytes, gpu.memory_total_bytes)} ")
    vram_text.append(f"{fmt_pct(mem_pct):>4}", style=level_style(mem_pct))
    util_text = Text(f" {fmt_pct(gpu.gpu_util_pct):>4}", style="bold")
    mem_util = Text.assemble("  MEM ", (f"{fmt_pct(gpu.mem_util_pct):>4}", "bold"))
    fixed = 4 + len("VRAM ") + vram_text.cell_len + len("  UTIL ") + util_text.cell_len
    room = width - fixed - mem_util.cell_len
    line = Text("    VRAM ", no_wrap=True, overflow="crop")
    if room >= 12:
        vram_w = max(6, room * 2 // 3)
        line.append_text(bar(mem_pct, vram_w))
        line.append_text(vram_text)
        line.append("  UTIL ")
        line.append_text(bar(gpu.gpu_util_pct, room - vram_w, style="cyan"))
        line.append_text(util_text)
        line.append_text(mem_util)
    else:
        # Too narrow for bars: the numbers alone still fit in 60 columns.
        line.append_text(vram_text)
        line.append("  UTIL")
        line.append_text(util_text)
        if line.cell_len + mem_util.cell_len <= width:
            line.append_text(mem_util)
    return line


class GpuSection(Vertical, Panel):
    """The bordered GPUs panel: every GPU of the newest tick, the charted one marked."""

    ROLES = frozenset({GPU})
    HEALTH_ROLE = GPU

    def compose(self) -> ComposeResult:
        """One line or two per GPU."""
        yield GpuPanel()

    def on_mount(self) -> None:
        """Its title never changes."""
        self.border_title = "GPUs"

    def show_state(self, state: MonitorState, changed: str | None) -> None:
        """The newest tick and the GPU the chart shows."""
        gpus = composed(self, GpuPanel)
        gpus.tick = state.gpu_tick
        gpus.selected_uuid = state.selected_uuid
