"""Run the unit tests on every other supported Python this machine has (`make test-pythons`).

karpy supports Python 3.11 to 3.13 (`requires-python`). `make test` runs the whole suite on .venv (3.11); this runs
the unit tests once more on each other minor version it finds, each in its own virtualenv (`.venv-3.12`, ...) synced
from the same uv.lock with the same uv, and says plainly which versions it found, where, and which it did not.

An interpreter is looked for as `python3.X` on PATH, then under pyenv's versions directory ($PYENV_ROOT, default
~/.pyenv); each candidate is run once to confirm its version (a pyenv shim for a version that is not selected exits
non-zero and is passed over). A version not found is skipped and named, never a failure: CI images differ.

    python tools/pythons.py --uv .tools/boot/bin/uv --versions 3.12 3.13 -- <pytest arguments>
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    version: str
    interpreter: Path | None
    returncode: int | None  # None: not run (not found)


def candidates(version: str) -> Iterator[Path]:
    on_path = shutil.which(f"python{version}")
    if on_path:
        yield Path(on_path)
    pyenv = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"
    # Newest patch release first: 3.12.10 before 3.12.9.
    found = sorted(
        pyenv.glob(f"{version}.*/bin/python{version}"),
        key=lambda p: tuple(int(x) if x.isdigit() else -1 for x in p.parents[1].name.split(".")),
        reverse=True,
    )
    yield from found


def reports_version(interpreter: Path, version: str) -> bool:
    probe = subprocess.run(
        [str(interpreter), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=False,
    )
    return probe.returncode == 0 and probe.stdout.strip() == version


def find(version: str) -> Path | None:
    return next((c for c in candidates(version) if reports_version(c, version)), None)


def run_on(uv: Path, version: str, interpreter: Path, pytest_args: Sequence[str]) -> int:
    venv = ROOT / f".venv-{version}"
    env = {**os.environ, "UV_PROJECT_ENVIRONMENT": str(venv), "UV_PYTHON_DOWNLOADS": "never"}
    sync = subprocess.run(
        [str(uv), "sync", "-q", "--frozen", "--python", str(interpreter)], cwd=ROOT, env=env, check=False
    )
    if sync.returncode != 0:
        return sync.returncode
    # Bytecode out of the tree, one cache per interpreter (as the Makefile does for .venv).
    env |= {"PYTHONDONTWRITEBYTECODE": "", "PYTHONPYCACHEPREFIX": str(venv / "pycache")}
    return subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pytest", *pytest_args], cwd=ROOT, env=env, check=False
    ).returncode


def summary(outcomes: Sequence[Outcome]) -> str:
    lines = []
    for o in outcomes:
        if o.interpreter is None:
            lines.append(f"python{o.version}: NOT FOUND (PATH, pyenv): not tested")
        else:
            verdict = "passed" if o.returncode == 0 else f"FAILED (exit {o.returncode})"
            lines.append(f"python{o.version}: {o.interpreter}: unit tests {verdict}")
    return "\n".join(lines)


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--uv", type=Path, required=True)
    parser.add_argument("--versions", nargs="+", required=True)
    parser.add_argument("pytest_args", nargs="*")
    options = parser.parse_args(argv)
    found = {v: find(v) for v in options.versions}
    print("test-pythons: " + ", ".join(f"python{v} {'found' if p else 'not found'}" for v, p in found.items()))
    outcomes = []
    for version, interpreter in found.items():
        if interpreter is None:
            outcomes.append(Outcome(version, None, None))
            continue
        print(f"test-pythons: python{version}: {interpreter}", flush=True)
        code = run_on(options.uv, version, interpreter, options.pytest_args)
        outcomes.append(Outcome(version, interpreter, code))
    print(summary(outcomes))
    return 1 if any(o.returncode for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
