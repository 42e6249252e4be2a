"""`heap.release` gives glibc's free pages back: RSS falls once freed blocks sit between live ones."""

from __future__ import annotations

import platform

import pytest

from karpy.cloudprovider import heap

BLOCK = 8 * 1024  # below glibc's mmap threshold: served from the heap, not mapped on its own
BLOCKS = 5000  # 40 MB


def _rss_kb() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_freed_pages_between_live_blocks_go_back_to_the_os() -> None:
    blocks = [b"x" * BLOCK for _ in range(BLOCKS)]
    kept = blocks[::16]  # one live block in 16: the heap cannot shrink from its top
    del blocks
    before = _rss_kb()
    assert heap.release()
    after = _rss_kb()
    assert before - after > 20 * 1024, (before, after)  # most of the ~37 MB freed between the kept blocks
    assert len(kept) == BLOCKS // 16 + (BLOCKS % 16 > 0)
