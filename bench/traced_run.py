"""`karpy run` under tracemalloc, for `bench/performance.py --memory-report` (not a test).

    python bench/traced_run.py OUT.json -m karpy.cli run

runs the module after `-m` as `python -m` would, with tracemalloc started before any import (so module code and
objects count), and on SIGUSR1 (the benchmark sends it at the end of each phase) and at exit appends one JSON
line to OUT.json: RSS, the bytes Python's allocator holds (traced) and its peak, the traced bytes by the
package that allocated them (the first directory under site-packages or the repository's `controller/`, else
the file) and by the source line that allocated them, largest first. tracemalloc slows the controller many times
over and holds memory of its own: read RSS and CPU from a run without it.
"""

from __future__ import annotations

import json
import pathlib
import runpy
import signal
import sys
import tracemalloc
from types import FrameType

TOP = 25
"""Packages reported per snapshot."""


def package(filename: str) -> str:
    """The package a traced frame's file belongs to: `numpy`, `botocore`, `karpy/scheduling`, `<frozen ...>`."""
    parts = pathlib.PurePath(filename).parts
    for anchor in ("site-packages", "controller"):
        if anchor in parts:
            rest = parts[parts.index(anchor) + 1 :]
            if rest and rest[0] == "emulator":
                rest = rest[1:]
            if rest and rest[0] in ("karpy", "karpy_emulator") and len(rest) > 2:
                return "/".join(rest[:2])
            return rest[0] if rest else filename
    if "lib" in parts and "python3" in "".join(parts):
        return "stdlib"
    return filename


def report(out: pathlib.Path, label: str) -> None:
    current, peak = tracemalloc.get_traced_memory()
    snapshot = tracemalloc.take_snapshot()
    sizes: dict[str, int] = {}
    for stat in snapshot.statistics("filename"):
        name = package(stat.traceback[0].filename)
        sizes[name] = sizes.get(name, 0) + stat.size
    with open("/proc/self/status", encoding="ascii") as status:
        rss = next(int(line.split()[1]) / 1024 for line in status if line.startswith("VmRSS:"))
    row = {
        "at": label,
        "rss_mb": round(rss, 1),
        "traced_mb": round(current / 2**20, 1),
        "traced_peak_mb": round(peak / 2**20, 1),
        "by_package_mb": {k: round(v / 2**20, 2) for k, v in sorted(sizes.items(), key=lambda kv: -kv[1])[:TOP]},
        "by_line_mb": {
            f"{s.traceback[0].filename}:{s.traceback[0].lineno}": round(s.size / 2**20, 2)
            for s in snapshot.statistics("lineno")[:TOP]
        },
    }
    with open(out, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")


def main() -> None:
    out = pathlib.Path(sys.argv[1])
    if sys.argv[2] != "-m":
        raise SystemExit("usage: traced_run.py OUT.json -m MODULE [ARGS...]")
    module, args = sys.argv[3], sys.argv[4:]
    if sys.path and pathlib.Path(sys.path[0]).resolve() == pathlib.Path(__file__).parent.resolve():
        del sys.path[0]  # as under `python -m`: the benchmarks' modules must not shadow the controller's imports
    tracemalloc.start()
    snapshots = 0

    def on_signal(_signum: int, _frame: FrameType | None) -> None:
        nonlocal snapshots
        snapshots += 1
        report(out, f"signal {snapshots}")

    signal.signal(signal.SIGUSR1, on_signal)
    sys.argv = [module, *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        report(out, "exit")


if __name__ == "__main__":
    main()
