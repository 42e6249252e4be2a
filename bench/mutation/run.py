"""Mutation testing of the rules that keep karpy from destroying capacity: mutmut over the safety-critical modules,
each mutant run only against the tests of its area that reach the mutated function (never the whole suite).

    make mutation                                            # the full run; rewrites REPORT.md and results.json here
    .venv/bin/python bench/mutation/run.py --only karpy.provisioning.limits --no-write   # one module, report only

mutmut 3 imports the mutated code from `mutants/`, `mutants/src` or `mutants/source`, so the run is staged in
`.tools/mutation/`: `src/karpy` (a copy of controller/karpy), a copy of tests/, and a pyproject.toml
with this repository's pytest settings plus the [tool.mutmut] section built from TARGETS below.

Score = killed / (mutants − equivalent), where a timeout counts as killed. Each survivor is matched, by module,
function and the changed line, to an entry of `explained.toml` (an equivalent mutant, with why); one that matches
nothing is listed as unexplained. Log calls are not mutated (`log.info(...)`: what is logged is not a safety rule).
Prints a JSON summary on stdout.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
WORKDIR = ROOT / ".tools" / "mutation"


@dataclasses.dataclass(frozen=True, slots=True)
class Target:
    module: str
    tests: tuple[str, ...]
    functions: tuple[str, ...] = ()
    """mutmut's names of the functions to mutate (`x_f`, or `xǁClassǁmethod`); all of the module's when empty."""

    @property
    def path(self) -> str:
        return "src/" + self.module.replace(".", "/") + ".py"

    @property
    def patterns(self) -> list[str]:
        return [f"{self.module}.{f}__mutmut_*" for f in self.functions] or [f"{self.module}.*"]


GC_TESTS = ("tests/nodeclaim",)
AWS_TESTS = (
    "tests/cloudprovider/aws/test_instances.py",
    "tests/cloudprovider/aws/test_foreign_instances.py",
    "tests/cloudprovider/aws/test_provider.py",
)
DISRUPTION_TESTS = ("tests/disruption",)
TERMINATION_TESTS = ("tests/termination",)
INTERRUPTION_TESTS = ("tests/interruption",)
TARGETS = (
    Target("karpy.nodeclaim.garbagecollection", GC_TESTS),
    Target(
        "karpy.nodeclaim.controller",
        GC_TESTS,
        ("xǁNodeClaimControllerǁcollect_garbage", "xǁNodeClaimControllerǁrun_garbage_collection"),
    ),
    Target("karpy.cloudprovider.aws.instances", AWS_TESTS),
    Target("karpy.disruption.candidates", DISRUPTION_TESTS),
    Target("karpy.nodeclaim.disruption_conditions", DISRUPTION_TESTS),
    Target("karpy.disruption.budgets", DISRUPTION_TESTS),
    Target("karpy.provisioning.limits", ("tests/provisioning/test_limits.py",)),
    Target("karpy.termination.drain", TERMINATION_TESTS),
    Target("karpy.termination.controller", TERMINATION_TESTS),
    Target("karpy.interruption.handler", INTERRUPTION_TESTS),
    Target("karpy.interruption.controller", INTERRUPTION_TESTS),
)
DO_NOT_MUTATE = (r"\blog\.(debug|info|warning|error|exception)\(",)
KILLED = frozenset({"killed", "timeout", "caught by type check", "segfault"})


def _toml_list(values: Iterable[str]) -> str:
    return "[" + ", ".join(json.dumps(v) for v in values) + "]"


def _pytest_settings() -> str:
    """The repository's [tool.pytest.ini_options] section, as written."""
    text = (ROOT / "pyproject.toml").read_text()
    found = re.search(r"^\[tool\.pytest\.ini_options\]\n(?:(?!^\[).*\n)*", text, flags=re.MULTILINE)
    if found is None:
        raise SystemExit("pyproject.toml has no [tool.pytest.ini_options] section")
    return found.group(0)


def stage(targets: Sequence[Target], workdir: Path) -> None:
    """A fresh staging directory: src/karpy, and a pyproject.toml with the pytest settings and mutmut's section."""
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "controller" / "karpy", workdir / "src" / "karpy", ignore=skip)
    shutil.copytree(ROOT / "tests", workdir / "tests", ignore=skip)  # mutmut copies them on into mutants/
    tests = sorted({t for target in targets for t in target.tests})
    mutmut = "\n".join(
        [
            "[tool.mutmut]",
            'source_paths = ["src/karpy"]',
            f"only_mutate = {_toml_list(sorted({t.path for t in targets}))}",
            f"do_not_mutate_patterns = {_toml_list(DO_NOT_MUTATE)}",
            f"pytest_add_cli_args_test_selection = {_toml_list(tests)}",
            'pytest_add_cli_args = ["-p", "no:cacheprovider"]',
            "use_git_change_detection = false",
        ]
    )
    (workdir / "pyproject.toml").write_text(_pytest_settings() + "\n" + mutmut + "\n")


def _mutmut(workdir: Path, *args: str, capture: bool = True) -> str:
    """mutmut's output: returned when `capture`, else shown on stderr (stdout carries the JSON summary)."""
    done = subprocess.run(
        [sys.executable, "-m", "mutmut", *args],
        cwd=workdir,
        check=False,
        text=True,
        stdout=subprocess.PIPE if capture else sys.stderr,
    )
    if done.returncode != 0:
        raise SystemExit(f"mutmut {' '.join(args[:1])} failed with exit code {done.returncode}")
    return done.stdout or ""


def _target_of(name: str, targets: Sequence[Target]) -> Target | None:
    for target in targets:
        if name.startswith(target.module + ".") and (
            not target.functions or any(name.startswith(f"{target.module}.{f}__mutmut_") for f in target.functions)
        ):
            return target
    return None


def _function_of(name: str, module: str) -> str:
    return name[len(module) + 1 :].rsplit("__mutmut_", 1)[0]


def _changed_lines(diff: str) -> tuple[str, str]:
    """The removed and added lines of a mutant's diff, stripped and joined."""
    lines = diff.splitlines()
    removed = [ln[1:].strip() for ln in lines if ln.startswith("-") and not ln.startswith("---")]
    added = [ln[1:].strip() for ln in lines if ln.startswith("+") and not ln.startswith("+++")]
    return " ".join(removed), " ".join(added)


@dataclasses.dataclass(frozen=True, slots=True)
class Survivor:
    name: str
    module: str
    function: str
    status: str
    was: str
    now: str
    why: str  # "" when no explanation matches


def _explanations() -> list[dict[str, str]]:
    path = HERE / "explained.toml"
    return list(tomllib.loads(path.read_text()).get("equivalent", [])) if path.exists() else []


def _explain(survivor: Survivor, explanations: Sequence[dict[str, str]]) -> str:
    """The `why` of the first entry naming the survivor's module and function whose `was` and `now` (each optional:
    absent matches any) equal its changed lines."""
    for entry in explanations:
        if (entry["module"], entry["function"]) != (survivor.module, survivor.function):
            continue
        if entry.get("was", survivor.was) == survivor.was and entry.get("now", survivor.now) == survivor.now:
            return entry["why"]
    return ""


# Run inside the staging directory (mutmut reads its configuration from the working directory): every mutant's
# status, and the diff of each one not killed, in one process (`mutmut show` would start one per survivor).
_DUMP = """
import json, sys
from mutmut.mutation.data import SourceFileMutationData
from mutmut.mutation.diff_apply import get_diff_for_mutant
from mutmut.stats import status_by_exit_code
from mutmut.utils.file_utils import walk_mutatable_files
killed = set(json.loads(sys.argv[1]))
out = []
for path in walk_mutatable_files():
    data = SourceFileMutationData(path=path)
    data.load()
    for name, code in data.exit_code_by_key.items():
        status = status_by_exit_code[code]
        diff = "" if status in killed or status == "not checked" else get_diff_for_mutant(name, path=path)
        out.append({"name": name, "status": status, "diff": diff})
print(json.dumps(out))
"""


def collect(workdir: Path, targets: Sequence[Target]) -> tuple[dict[str, Counter[str]], list[Survivor]]:
    """Status counts per module, and every mutant that was not killed, with its change."""
    dumped = subprocess.run(
        [sys.executable, "-c", _DUMP, json.dumps(sorted(KILLED))],
        cwd=workdir,
        check=True,
        text=True,
        stdout=subprocess.PIPE,
    ).stdout
    counts: dict[str, Counter[str]] = {t.module: Counter() for t in targets}
    survivors = []
    explanations = _explanations()
    for mutant in json.loads(dumped):
        name, status = mutant["name"], mutant["status"]
        target = _target_of(name, targets)
        if target is None:
            continue
        counts[target.module][status] += 1
        if status in KILLED:
            continue
        was, now = _changed_lines(mutant["diff"])
        survivor = Survivor(name, target.module, _function_of(name, target.module), status, was, now, "")
        survivors.append(dataclasses.replace(survivor, why=_explain(survivor, explanations)))
    return counts, sorted(survivors, key=lambda s: (s.module, s.function, s.was, s.now))


def summarize(counts: dict[str, Counter[str]], survivors: Sequence[Survivor], *, seconds: float) -> dict[str, Any]:
    modules = {}
    for module, by_status in counts.items():
        total = sum(by_status.values())
        killed = sum(n for status, n in by_status.items() if status in KILLED)
        equivalent = sum(1 for s in survivors if s.module == module and s.why)
        denominator = total - equivalent
        modules[module] = {
            "mutants": total,
            "killed": killed,
            "equivalent": equivalent,
            "unexplained": total - killed - equivalent,
            "score": round(killed / denominator, 4) if denominator else 1.0,
            "statuses": dict(sorted(by_status.items())),
        }
    total = sum(m["mutants"] for m in modules.values())
    killed = sum(m["killed"] for m in modules.values())
    equivalent = sum(m["equivalent"] for m in modules.values())
    return {
        "mutants": total,
        "killed": killed,
        "equivalent": equivalent,
        "unexplained": total - killed - equivalent,
        "score": round(killed / (total - equivalent), 4) if total - equivalent else 1.0,
        "seconds": round(seconds),
        "modules": modules,
        "survivors": [dataclasses.asdict(s) for s in survivors],
    }


def report(summary: dict[str, Any], targets: Sequence[Target]) -> str:
    tests = {t.module: ", ".join(t.tests) for t in targets}
    out = [
        "# Mutation testing of the safety-critical modules",
        "",
        "Generated by `make mutation` (bench/mutation/run.py, mutmut); do not edit by hand. Each mutant ran against",
        "the tests of its area that reach the mutated function. Score = killed / (mutants − equivalent); a timeout",
        "counts as killed. Equivalent mutants are explained in bench/mutation/explained.toml.",
        "",
        f"**Score: {summary['score']:.1%}** — {summary['killed']} of {summary['mutants']} mutants killed, "
        f"{summary['equivalent']} equivalent, {summary['unexplained']} unexplained; the run took "
        f"{summary['seconds'] // 60} min {summary['seconds'] % 60} s.",
        "",
        *[
            f"Module(s) {', '.join(r['modules'])} were rerun alone afterwards ({r['seconds'] // 60} min "
            f"{r['seconds'] % 60} s) with the tests as they then stood; their rows are from that rerun."
            for r in summary.get("reruns", [])
        ],
        "",
        "| module | tests | mutants | killed | equivalent | unexplained | score |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for module, m in summary["modules"].items():
        out.append(
            f"| {module} | {tests[module]} | {m['mutants']} | {m['killed']} | {m['equivalent']} | "
            f"{m['unexplained']} | {m['score']:.1%} |"
        )
    for title, wanted in (("Unexplained survivors", False), ("Equivalent mutants", True)):
        rows = [s for s in summary["survivors"] if bool(s["why"]) is wanted]
        out += ["", f"## {title} ({len(rows)})", ""]
        if not rows:
            out.append("None.")
        for s in rows:
            out.append(f"- `{s['module']}` `{s['function']}` ({s['status']}): `{s['was']}` → `{s['now']}`")
            if s["why"]:
                out.append(f"  — {s['why']}")
    return "\n".join(out) + "\n"


def _previous(targets: Sequence[Target]) -> tuple[dict[str, Counter[str]], list[Survivor], dict[str, Any]]:
    """The last written results of the modules not in `targets` (a partial rerun keeps them), re-explained."""
    path = HERE / "results.json"
    if not path.exists():
        return {}, [], {}
    previous = json.loads(path.read_text())
    rerun = {t.module for t in targets}
    kept = {t.module for t in TARGETS} - rerun
    counts = {m: Counter(previous["modules"][m]["statuses"]) for m in kept if m in previous["modules"]}
    explanations = _explanations()
    survivors = []
    for raw in previous["survivors"]:
        if raw["module"] in kept:
            survivor = Survivor(**{**raw, "why": ""})
            survivors.append(dataclasses.replace(survivor, why=_explain(survivor, explanations)))
    return counts, survivors, previous


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        help="rerun only this module (repeatable); the other modules keep their results from results.json",
    )
    parser.add_argument("--no-write", action="store_true", help="print the summary; leave REPORT.md alone")
    parser.add_argument("--report-only", action="store_true", help="re-read the last run's results in the workdir")
    args = parser.parse_args(argv)
    targets = [t for t in TARGETS if not args.only or t.module in args.only]
    if not targets:
        raise SystemExit(f"no target named {args.only}; known: {[t.module for t in TARGETS]}")
    elapsed = WORKDIR / "elapsed-seconds"
    if not args.report_only:
        started = time.monotonic()
        stage(targets, WORKDIR)
        _mutmut(WORKDIR, "run", *[p for t in targets for p in t.patterns], capture=False)
        elapsed.write_text(f"{time.monotonic() - started:.0f}\n")
    seconds = float(elapsed.read_text()) if elapsed.exists() else 0.0
    counts, survivors = collect(WORKDIR, targets)
    reruns: list[dict[str, Any]] = []
    if args.only:
        kept_counts, kept_survivors, previous = _previous(targets)
        counts = {t.module: counts.get(t.module) or kept_counts.get(t.module, Counter()) for t in TARGETS}
        survivors = sorted([*kept_survivors, *survivors], key=lambda s: (s.module, s.function, s.was, s.now))
        reruns = [*previous.get("reruns", []), {"modules": sorted(args.only), "seconds": round(seconds)}]
        seconds = float(previous.get("seconds", seconds))
    summary = summarize(counts, survivors, seconds=seconds)
    summary["reruns"] = reruns
    if not args.no_write:
        (HERE / "results.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
        (HERE / "REPORT.md").write_text(report(summary, list(TARGETS)))
    print(json.dumps({k: v for k, v in summary.items() if k != "survivors"}, indent=2))


if __name__ == "__main__":
    main()
