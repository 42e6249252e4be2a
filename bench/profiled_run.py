"""`karpy run` under cProfile timed by its thread's CPU, for `bench/performance.py --profile` (not a test).

    python bench/profiled_run.py PREFIX -m karpy.cli run

runs the module after `-m` as `python -m` would, its main thread (the event loop) under cProfile with
`time.thread_time` as the timer: a function's figures are CPU seconds of that thread, not wall seconds, so time
the machine's load takes from it (another process on the core) is not counted as its own. The worker threads (the
solves, boto3 calls) are not in it. Built-in functions (`dict.get`, the JSON decoder, a socket's send) count in
the Python function that calls them: profiling each of their calls cost more than the call, which ranked code that
makes many of them far above its share (basic's scale-out took 108 s profiled so, 46 s profiled without them, 30 to
45 s not profiled at a load average of 5 to 10).

On SIGUSR1 (the benchmark sends it at the start and at the end of each phase) it writes what it profiled since the
last signal to `PREFIX.<n>.prof` (n = 1, 2, ...) and starts afresh; at exit, the rest to `PREFIX.end.prof`. Read
them with `python -m pstats`. Read the controller's CPU seconds from a run without a profile.
"""

from __future__ import annotations

import cProfile
import pathlib
import runpy
import signal
import sys
import time
from types import FrameType


def _profile() -> cProfile.Profile:
    return cProfile.Profile(time.thread_time, builtins=False)


class Segments:
    """The profile of the main thread, cut into segments by signals."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.written = 0
        self.profile = _profile()

    def start(self) -> None:
        self.profile.enable()

    def cut(self, name: str) -> None:
        self.profile.disable()
        self.profile.dump_stats(f"{self.prefix}.{name}.prof")
        self.profile = _profile()
        self.profile.enable()

    def on_signal(self, _signum: int, _frame: FrameType | None) -> None:
        self.written += 1
        self.cut(str(self.written))

    def end(self) -> None:
        self.profile.disable()
        self.profile.dump_stats(f"{self.prefix}.end.prof")


def main() -> None:
    prefix = sys.argv[1]
    if sys.argv[2] != "-m":
        raise SystemExit("usage: profiled_run.py PREFIX -m MODULE [ARGS...]")
    module, args = sys.argv[3], sys.argv[4:]
    if sys.path and pathlib.Path(sys.path[0]).resolve() == pathlib.Path(__file__).parent.resolve():
        del sys.path[0]  # as under `python -m`: the benchmarks' modules must not shadow the controller's imports
    segments = Segments(prefix)
    signal.signal(signal.SIGUSR1, segments.on_signal)
    sys.argv = [module, *args]
    segments.start()
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        segments.end()


if __name__ == "__main__":
    main()
