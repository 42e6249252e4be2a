"""`heap.release` gives glibc's free pages back: RSS falls once freed blocks sit between live ones; `karpy run` caps
glibc's arenas (`heap.limit_arenas`) before its threads allocate."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

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


ARENAS = """
import ctypes, json, os, sys, tempfile, threading
from karpy import cli
from karpy.operator import main


ready = threading.Barrier(8)


def allocate() -> None:
    blocks = [bytearray(4096) for _ in range(100)]  # above pymalloc's small sizes: from the thread's malloc arena
    ready.wait()  # all 8 alive at once, so none hands its arena on to the next (glibc reuses a dead thread's)
    del blocks


def heaps() -> int:
    # What `karpy run` does once started: threads allocate (here 8, as the default executor's workers would).
    threads = [threading.Thread(target=allocate) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    path = os.path.join(tempfile.mkdtemp(), "malloc.xml")
    stream = libc.fopen(path.encode(), b"w")
    libc.malloc_info(0, stream)
    libc.fclose(stream)
    with open(path, encoding="ascii") as xml:
        return xml.read().count("<heap nr=")


if sys.argv[1:] == ["run"]:
    main.main = lambda: print(json.dumps(heaps())) or 0  # `karpy run` up to its own start
    sys.exit(cli.main(["run"]))
print(json.dumps(heaps()))
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="arenas are glibc's")
def test_karpy_run_caps_the_malloc_arenas_before_its_threads_allocate() -> None:
    def heaps(*args: str) -> int:
        done = subprocess.run([sys.executable, "-c", ARENAS, *args], capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        found: int = json.loads(done.stdout)
        return found

    assert heaps() > heap.ARENAS  # glibc's default: the main heap and one per thread (up to 8 per core)
    assert heaps("run") == heap.ARENAS
