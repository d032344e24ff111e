"""The broker's allocator setting: freed megabyte buffers (produced batches, their decompressed
copies) are reused rather than handed back to the kernel and faulted in again page by page."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
# Allocate and free eight 1 MiB buffers twenty times; print the minor page faults that took.
CHURN = """
import resource, sys
sys.path.insert(0, {root!r})
if {tuned}:
    from broker.__main__ import _keep_freed_memory
    _keep_freed_memory()
faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt
blocks = [bytearray(1 << 20) for _ in range(8)]
del blocks
before = faults()
for _ in range(20):
    blocks = [bytearray(1 << 20) for _ in range(8)]
    del blocks
print(faults() - before)
"""


def _faults(tuned: bool) -> int:
    script = CHURN.format(root=str(ROOT), tuned=tuned)
    return int(subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True).stdout)


def test_freed_megabyte_buffers_are_reused_without_page_faults() -> None:
    pages = 20 * 8 * (1 << 20) // 4096
    assert _faults(tuned=False) > pages // 10  # glibc's defaults: many pages fault in again
    assert _faults(tuned=True) < pages // 100
