"""The OOM finding on the message a real CUDA out-of-memory error carries."""

from __future__ import annotations

import traceback

import pytest

from parsers.findings import scan_line


@pytest.mark.gpu
def test_cuda_out_of_memory_message_is_an_oom_finding() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    free, _total = torch.cuda.mem_get_info()
    try:
        torch.empty(int(free * 4), dtype=torch.uint8, device="cuda")
    except torch.OutOfMemoryError:
        lines = traceback.format_exc().splitlines()
    else:  # pragma: no cover - a device that lends more than it has free
        pytest.fail("allocating 4x the free memory succeeded")
    kinds = {finding.kind for finding in map(scan_line, lines) if finding is not None}
    assert kinds == {"traceback", "oom"}, lines[-1]
