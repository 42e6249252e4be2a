"""cProfile of every thread of the emulation process, for finding where a benchmark's emulation spends its CPU.

The emulation shares one interpreter between the stand-ins (the main thread's loop), the API server (a thread with a
loop of its own, `apiserver.runner`) and moto's request threads, so a profile of the main thread alone misses what
the API server spends answering the stand-ins' writes and the controller's watches. `ThreadProfiles` profiles the
main thread and every thread started while it is active (`threading.setprofile`: each new thread switches to a
`cProfile.Profile` of its own on its first call) and writes one pstats file per group of threads:

    KARPY_EMULATOR_PROFILE=/tmp/emu .venv/bin/python bench/e2e.py --json --pods 3000 --skip-consolidation
    .venv/bin/python -m pstats /tmp/emu.main.prof     # the stand-ins; the API server's in /tmp/emu.apiserver.prof

moto's request threads are left out: profiled, its catalog answers (~1,400 shapes) outlast the controller's 60 s
read timeout on a loaded machine, and its few hundred calls of a run are not what paces the pods.

From Python 3.12 cProfile rides on `sys.monitoring`, which allows one active profiler per interpreter and sees every
thread, so there the main file holds all threads together (`PER_THREAD` is false, no API server file is written, and
moto's threads are in it); use 3.11 to have them apart.

Times are each thread's own CPU time (`time.thread_time`): waits for the interpreter lock, for the other processes
of a loaded machine or in `epoll` count for nothing. Coroutine frames are charged only while they run (a suspended
`await` is not on the stack), so the cumulative time of a stand-in's `sync` is the CPU its passes took. Off unless
the variable is set; never used by the product.
"""

from __future__ import annotations

import contextlib
import cProfile
import enum
import os
import pathlib
import pstats
import sys
import threading
import time
import types
from collections.abc import Iterator
from typing import Any

PER_THREAD = sys.version_info < (3, 12)
"""Whether each group of threads can have a profile of its own (see the module docstring)."""
PROFILE_ENV = "KARPY_EMULATOR_PROFILE"
"""Where to write the profiles (a path prefix: `<prefix>.<group>.prof`); unset, nothing is profiled."""


class Group(enum.StrEnum):
    """Which part of the emulation a thread belongs to, by the thread's name."""

    MAIN = "main"  # the stand-ins' loop (and the child's own start and stop)
    APISERVER = "apiserver"  # `apiserver.runner` names its thread fake-kube-api-<id>
    OTHER = "other"  # moto's request threads, asyncio.to_thread workers: not profiled (see the module docstring)


def group_of(thread: threading.Thread) -> Group:
    if thread is threading.main_thread():
        return Group.MAIN
    if thread.name.startswith("fake-kube-api-"):
        return Group.APISERVER
    return Group.OTHER


class ThreadProfiles:
    """Profiles of the main thread and of the threads started while active, written per `Group` on exit."""

    def __init__(self, prefix: pathlib.Path) -> None:
        self._prefix = prefix
        self._lock = threading.Lock()
        self._profiles: list[tuple[Group, cProfile.Profile]] = []

    def _start_thread(self, frame: types.FrameType, event: str, arg: Any) -> None:
        """The first profile event of a new thread: hand the thread to a profile of its own."""
        sys.setprofile(None)
        group = group_of(threading.current_thread())
        if group is Group.OTHER:
            return
        profile = cProfile.Profile(time.thread_time)
        with self._lock:
            self._profiles.append((group, profile))
        profile.enable()

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        main = cProfile.Profile(time.thread_time)
        if PER_THREAD:
            threading.setprofile(self._start_thread)
        main.enable()
        try:
            yield
        finally:
            main.disable()
            threading.setprofile(None)  # None removes the hook for new threads
            self._write(main)

    def _write(self, main: cProfile.Profile) -> None:
        with self._lock:
            profiles = [(Group.MAIN, main), *self._profiles]
        for group in Group:
            members = [p for g, p in profiles if g is group]
            if not members:
                continue
            stats = pstats.Stats(members[0])
            for other in members[1:]:
                stats.add(other)
            stats.dump_stats(f"{self._prefix}.{group.value}.prof")


@contextlib.contextmanager
def from_environment() -> Iterator[None]:
    """`ThreadProfiles` when `KARPY_EMULATOR_PROFILE` names a prefix, else nothing."""
    prefix = os.environ.get(PROFILE_ENV, "")
    if not prefix:
        yield
        return
    with ThreadProfiles(pathlib.Path(prefix)).active():
        yield
