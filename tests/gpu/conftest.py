"""Real-GPU tests: every test here needs a working NVIDIA driver and is skipped without one."""

from __future__ import annotations

# Only to ask whether a driver answers; the tests themselves go through collectors.machine.nvml.
import pynvml  # noqa: TID251
import pytest


def _why_no_gpu() -> str | None:
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        return f"NVML unavailable: {error}"
    try:
        count = pynvml.nvmlDeviceGetCount()
    finally:
        pynvml.nvmlShutdown()
    return None if count > 0 else "NVML reports no GPU"


@pytest.fixture(scope="session")
def gpu_skip_reason() -> str | None:
    return _why_no_gpu()


@pytest.fixture(autouse=True)
def _needs_gpu(gpu_skip_reason: str | None) -> None:
    if gpu_skip_reason is not None:
        pytest.skip(gpu_skip_reason)
