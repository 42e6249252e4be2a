"""Write tests/runtime/upstream/observability.json: every metric and event reason upstream Karpenter has.

Sources, read from git directories of the two upstream repositories (no work tree needed):

- the metrics reference page the AWS provider publishes (website/content/en/<version>/reference/metrics.md, itself
  generated from the code): the full list of series names, with their section and stability level;
- the Go sources of both repositories: for each `opmetrics.NewPrometheus<Type>(...)` or `prometheus.New<Type>Vec`
  the resolved name, the type, the label names and the histogram buckets (constants, `DurationBuckets()`,
  `ExponentialBuckets(start, factor, count)` and literal lists are evaluated);
- core `pkg/events/reason.go` and every `events.go` / `events/events.go`: each event reason with the event
  types (Normal/Warning) it is emitted with and the file that emits it.

Label lists upstream computes at run time are evaluated with the Go expression kept in `labels_from`: a function
returning a `[]string{...}` literal or `append(<list>, names...)`, where the node gauges' list starts with the
names of the well-known labels (core `WellKnownLabels` plus what the AWS provider inserts into it, each key's part
after the `/`, lowercased, `-` as `_`: core pkg/controllers/metrics/node/controller.go `getWellKnownLabels`).
Series the page lists that no Go file of the two repositories defines (controller-runtime, workqueue, client-go,
the AWS SDK, leader election and operatorpkg's `operator_*` status-condition and termination families) keep their
name, section and stability, with `type` derived from the name where it is unambiguous and `labels` null. So do
operatorpkg's per-kind families for a kind a `controllers.go` runs a status controller for that the page does not list
(core's CapacityBuffer, `status.NewGenericObjectController` under the CapacityBuffer gate): `documented` false, help
as the page gives the kind-less families, stability null.

Usage: python tools/gen_upstream_observability.py [--check] [--core GITDIR] [--aws GITDIR] [--version v1.14].
With --check, exit 1 when the committed file differs from what the mirrors generate.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUTPUT = ROOT / "tests" / "runtime" / "upstream" / "observability.json"
CORE = pathlib.Path("/work/.mirror/kubernetes-sigs+karpenter/repo")
AWS = pathlib.Path("/work/.mirror/aws+karpenter-provider-aws/repo")
DOCS_PAGE = "website/content/en/{version}/reference/metrics.md"

_CONSTRUCTOR = re.compile(
    r"(?:opmetrics\.NewPrometheus(Counter|Gauge|Histogram|Summary)|prometheus\.New(Counter|Gauge|Histogram|Summary)Vec)\("
)
_CONST = re.compile(r"^\s*(\w+)\s*=\s*\"([^\"]*)\"", re.MULTILINE)
_FIELD = re.compile(r"\b(Namespace|Subsystem|Name|Buckets)\s*:\s*")
_DOC_SERIES = re.compile(r"^### `([a-z0-9_]+)`\n(.*?)\n- Stability Level: (\w+)", re.MULTILINE | re.DOTALL)
_EVENT = re.compile(r"Type:\s*corev1\.EventType(Normal|Warning),\s*Reason:\s*([\w.]+|\"\w+\")")


def git(gitdir: pathlib.Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(gitdir), *args], check=True, capture_output=True, text=True).stdout


def go_files(gitdir: pathlib.Path) -> dict[str, str]:
    """Non-test Go files under pkg/, path -> text."""
    names = [
        n
        for n in git(gitdir, "ls-tree", "-r", "--name-only", "HEAD", "pkg").splitlines()
        if n.endswith(".go") and not n.endswith("_test.go") and "/test/" not in n and "/fake/" not in n
    ]
    return {n: git(gitdir, "show", f"HEAD:{n}") for n in names}


def _call_body(text: str, start: int) -> str:
    """The text between the parenthesis opening at `start - 1` and its match."""
    depth = 1
    i = start
    while depth:
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        i += 1
    return text[start : i - 1]


def _split_top(text: str, sep: str = ",") -> list[str]:
    parts, depth, current = [], 0, []
    for ch in text:
        depth += {"(": 1, "{": 1, "[": 1, ")": -1, "}": -1, "]": -1}.get(ch, 0)
        if ch == sep and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


class Resolver:
    """String constants by name: the file's own first, then any file's (upstream names them uniquely enough)."""

    def __init__(self, files: Mapping[str, str], *, fallback: Resolver | None = None) -> None:
        self.by_file = {path: dict(_CONST.findall(_strip_comments(text))) for path, text in files.items()}
        self.anywhere: dict[str, str] = dict(fallback.anywhere) if fallback else {}
        for consts in self.by_file.values():
            for name, value in consts.items():
                self.anywhere[name] = value
        self.bucket_functions: dict[str, list[float]] = dict(fallback.bucket_functions) if fallback else {}
        for text in files.values():
            for name, body in re.findall(r"func (\w+)\(\) \[\]float64 \{(.*?)\n\}", text, re.DOTALL):
                literal = re.search(r"\[\]float64\{(.*?)\}", body, re.DOTALL)
                if literal:
                    self.bucket_functions[name] = _floats(literal.group(1))

    def string(self, path: str, expr: str) -> str:
        expr = expr.strip()
        if expr.startswith('"'):
            return expr.strip('"')
        name = expr.rsplit(".", 1)[-1]
        return self.by_file[path].get(name) or self.anywhere[name]

    def buckets(self, expr: str) -> list[float]:
        expr = re.sub(r"//[^\n]*", "", expr).strip()
        if expr.startswith("[]float64"):
            return [_go_seconds(item) for item in _split_top(expr[expr.index("{") + 1 : expr.rindex("}")])]
        exponential = re.fullmatch(r"prometheus\.ExponentialBuckets\(([^,]+),([^,]+),([^)]+)\)", expr.replace(" ", ""))
        if exponential:
            start, factor, count = (float(g) for g in exponential.groups())
            return [start * factor**i for i in range(int(count))]
        return list(self.bucket_functions[expr.rsplit(".", 1)[-1].removesuffix("()")])


_GO_DURATIONS = {"time.Second": 1.0, "time.Minute": 60.0, "time.Hour": 3600.0, "dayDuration": 86400.0}
"""Go durations upstream's bucket lists are written in (`dayDuration` is node/termination/metrics.go's constant)."""


def _go_seconds(item: str) -> float:
    """A bucket bound: a number, or a Go duration product such as `(time.Minute * 15).Seconds()`."""
    item = item.strip()
    if not item.endswith(".Seconds()"):
        return float(item)
    product = 1.0
    for factor in item.removesuffix(".Seconds()").strip("()").split("*"):
        factor = factor.strip()
        product *= _GO_DURATIONS[factor] if factor in _GO_DURATIONS else float(factor)
    return product


def _strip_comments(text: str) -> str:
    return re.sub(r"//[^\n]*", "", text)


def _floats(text: str) -> list[float]:
    return [float(v) for v in re.findall(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?", _strip_comments(text))]


_K8S_LABELS = {
    "LabelTopologyZone": "topology.kubernetes.io/zone",
    "LabelTopologyRegion": "topology.kubernetes.io/region",
    "LabelInstanceTypeStable": "node.kubernetes.io/instance-type",
    "LabelArchStable": "kubernetes.io/arch",
    "LabelOSStable": "kubernetes.io/os",
    "LabelWindowsBuild": "node.kubernetes.io/windows-build",
}
"""The k8s.io/api core/v1 label keys (well_known_labels.go) in upstream's well-known set: neither mirror holds them."""
_ASSIGNMENT = re.compile(r"^\s*(\w+)\s*(?:\w+\s*)?=\s*(.+?)\s*$", re.MULTILINE)


def _go_strings(text: str, packages: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
    """`Name = "a" + pkg.Other + Local` assignments of a Go file, evaluated (the ones that are not strings left out)."""
    exprs = dict(_ASSIGNMENT.findall(_strip_comments(text)))
    out: dict[str, str] = {}

    def value(expr: str, depth: int = 0) -> str | None:
        parts = []
        for term in (t.strip() for t in expr.split("+")):
            if term.startswith('"') and term.endswith('"'):
                parts.append(term[1:-1])
            elif "." in term and term.split(".", 1)[0] in packages:
                pkg, name = term.split(".", 1)
                if name not in packages[pkg]:
                    return None
                parts.append(packages[pkg][name])
            elif re.fullmatch(r"\w+", term) and term in exprs and depth < 8:
                found = value(exprs[term], depth + 1)
                if found is None:
                    return None
                parts.append(found)
            else:
                return None
        return "".join(parts)

    for name, expr in exprs.items():
        found = value(expr)
        if found is not None:
            out[name] = found
    return out


def _set_members(text: str, opening: str) -> list[str]:
    """The identifiers inside the call that starts with `opening` (e.g. `WellKnownLabels = sets.New(`)."""
    start = _strip_comments(text).index(opening) + len(opening)
    return _split_top(_call_body(_strip_comments(text), start))


def well_known_label_names(core: Mapping[str, str], aws: Mapping[str, str]) -> list[str]:
    """The metric label names of upstream's well-known labels, with the AWS provider's added, sorted."""
    core_group = _go_strings(core["pkg/apis/apis.go"], {})
    aws_group = _go_strings(aws["pkg/apis/apis.go"], {})
    core_labels = _go_strings(core["pkg/apis/v1/labels.go"], {"apis": core_group, "v1": _K8S_LABELS})
    aws_labels = _go_strings(
        aws["pkg/apis/v1/labels.go"],
        {"apis": aws_group, "coreapis": core_group, "karpv1": core_labels, "corev1": _K8S_LABELS},
    )
    keys = []
    for member in _set_members(core["pkg/apis/v1/labels.go"], "WellKnownLabels = sets.New("):
        keys.append(_K8S_LABELS[member[3:]] if member.startswith("v1.") else core_labels[member])
    for member in _set_members(aws["pkg/apis/v1/labels.go"], "karpv1.WellKnownLabels = karpv1.WellKnownLabels.Insert("):
        keys.append(_K8S_LABELS[member[7:]] if member.startswith("corev1.") else aws_labels[member])
    return sorted({k.split("/")[1].lower().replace("-", "_") for k in keys if k.count("/") == 1})


def computed_labels(path: str, text: str, expr: str, resolver: Resolver, well_known: list[str]) -> list[str]:
    """The label names a Go expression computes: `f()` of the same file, `[]string{...}` or `append(list, ...)`."""
    expr = expr.strip()
    if expr.startswith("[]string{"):
        return [resolver.string(path, e) for e in _split_top(expr[expr.index("{") + 1 : expr.rindex("}")])]
    if expr.startswith("append("):
        head, *names = _split_top(expr[len("append(") : expr.rindex(")")])
        return computed_labels(path, text, head, resolver, well_known) + [resolver.string(path, n) for n in names]
    if "getWellKnownLabels()" in expr:
        return list(well_known)
    function = re.fullmatch(r"(\w+)\(\)", expr)
    if function is None:
        raise ValueError(f"{path}: cannot evaluate the label list {expr!r}")
    body = re.search(rf"func {function.group(1)}\(\) \[\]string \{{\s*return (.*?)\n\}}", text, re.DOTALL)
    if body is None:
        raise ValueError(f"{path}: no function {function.group(1)} returning []string")
    return computed_labels(path, text, body.group(1), resolver, well_known)


def metrics_in(
    files: Mapping[str, str], resolver: Resolver, repo: str, well_known: list[str] | None = None
) -> Iterator[dict[str, Any]]:
    for path, raw in sorted(files.items()):
        text = _strip_comments(raw)
        for match in _CONSTRUCTOR.finditer(text):
            kind = (match.group(1) or match.group(2)).lower()
            body = _call_body(text, match.end())
            args = _split_top(body)
            opts = next(a for a in args if "Opts{" in a)
            fields: dict[str, str] = {}
            inner = opts[opts.index("{") + 1 : opts.rindex("}")]
            for part in _split_top(inner):
                key = _FIELD.match(part)
                if key:
                    fields[key.group(1)] = part[key.end() :]
            name = "_".join(resolver.string(path, fields[f]) for f in ("Namespace", "Subsystem", "Name") if f in fields)
            label_arg = args[-1]
            entry: dict[str, Any] = {"name": name, "type": kind, "source": f"{repo}:{path}"}
            if label_arg.startswith("[]string"):
                entry["labels"] = [
                    resolver.string(path, e) for e in _split_top(label_arg[label_arg.index("{") + 1 : -1])
                ]
            elif well_known is not None:  # computed at run time: evaluated, the expression kept
                entry["labels"] = computed_labels(path, text, label_arg, resolver, well_known)
                entry["labels_from"] = label_arg
            else:
                entry["labels"] = None
                entry["labels_from"] = label_arg
            if kind == "histogram":
                entry["buckets"] = resolver.buckets(fields["Buckets"]) if "Buckets" in fields else "default"
            yield entry


def documented(aws: pathlib.Path, version: str) -> dict[str, dict[str, str]]:
    page = git(aws, "show", f"HEAD:{DOCS_PAGE.format(version=version)}")
    sections: dict[str, str] = {}
    section = ""
    for line in page.splitlines():
        if line.startswith("## "):
            section = line[3:].strip()
        elif line.startswith("### `"):
            sections[line[5 : line.index("`", 5)]] = section
    return {
        name: {"section": sections[name], "help": help_.strip(), "stability": stability}
        for name, help_, stability in _DOC_SERIES.findall(page)
    }


def _type_from_name(name: str) -> str | None:
    if name.endswith("_total"):
        return "counter"
    if name.endswith(("_count", "_depth", "_status", "_workers", "_reconciles", "_current_time_seconds")):
        return "gauge"
    return None


_STATUS_CONTROLLER = re.compile(r"status\.New(?:GenericObject)?Controller\[\*(?:\w+\.)?(\w+)\]")
_STATUS_FAMILIES = (
    "status_condition_count",
    "status_condition_current_status_seconds",
    "status_condition_transition_seconds",
    "status_condition_transitions_total",
    "termination_current_time_seconds",
    "termination_duration_seconds",
)
"""The families operatorpkg's status controller registers per kind (status/metrics.go), `operator_<kind>_` before."""


def status_controller_series(
    files: Mapping[str, str], repo: str, docs: Mapping[str, Mapping[str, str]]
) -> Iterator[dict[str, Any]]:
    """operatorpkg's per-kind families for each kind a `pkg/controllers/controllers.go` runs a status controller for
    (`status.NewController[*K]`, `status.NewGenericObjectController[*K]`) that the reference page does not list (core
    registers one for CapacityBuffer under its gate). Names, help and type as the page gives the kind-less
    (deprecated) families; labels null, as for every operatorpkg family."""
    text = _strip_comments(files.get("pkg/controllers/controllers.go", ""))
    for kind in sorted(set(_STATUS_CONTROLLER.findall(text))):
        for family in _STATUS_FAMILIES:
            name = f"operator_{kind.lower()}_{family}"
            if name in docs:
                continue
            generic = docs.get(f"operator_{family}", {})
            section = "Status Condition Metrics" if family.startswith("status_") else "Termination Metrics"
            yield {
                "name": name,
                "type": _type_from_name(name),
                "labels": None,
                "source": f"{repo}:pkg/controllers/controllers.go",
                "section": f"{kind.capitalize()} {section}",
                "help": generic.get("help"),
                "stability": None,
            }


def series(core: pathlib.Path, aws: pathlib.Path, version: str) -> list[dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    resolver: Resolver | None = None
    sources = {"core": go_files(core), "aws": go_files(aws)}
    well_known = well_known_label_names(sources["core"], sources["aws"])
    for repo, files in sources.items():  # the AWS provider uses core's constants (metrics.Namespace)
        resolver = Resolver(files, fallback=resolver)
        for entry in metrics_in(files, resolver, repo, well_known):
            found.setdefault(entry["name"], entry)
    docs = documented(aws, version)
    for repo, files in sources.items():
        for entry in status_controller_series(files, repo, docs):
            found.setdefault(entry["name"], entry)
    out = []
    for name in sorted(set(docs) | set(found)):
        entry = dict(found.get(name) or {"name": name, "type": _type_from_name(name), "labels": None, "source": None})
        entry.update(docs.get(name, {k: entry.get(k) for k in ("section", "help", "stability")}))
        entry["documented"] = name in docs
        out.append(entry)
    return out


def event_reasons(core: pathlib.Path, aws: pathlib.Path) -> list[dict[str, Any]]:
    constants = dict(_CONST.findall(git(core, "show", "HEAD:pkg/events/reason.go")))
    found: dict[str, dict[str, Any]] = {}
    for repo, gitdir in (("core", core), ("aws", aws)):
        for path, text in go_files(gitdir).items():
            if not path.endswith("events.go") or path.startswith("pkg/events/"):
                continue
            for type_, reason_expr in _EVENT.findall(_strip_comments(text)):
                reason = (
                    reason_expr.strip('"') if reason_expr.startswith('"') else constants[reason_expr.split(".")[-1]]
                )
                entry = found.setdefault(reason, {"reason": reason, "types": [], "sources": []})
                if type_ not in entry["types"]:
                    entry["types"].append(type_)
                if f"{repo}:{path}" not in entry["sources"]:
                    entry["sources"].append(f"{repo}:{path}")
    for reason in constants.values():  # declared reasons some controller outside an events.go emits
        found.setdefault(reason, {"reason": reason, "types": [], "sources": ["core:pkg/events/reason.go"]})
    return [
        {**entry, "types": sorted(entry["types"]), "sources": sorted(entry["sources"])}
        for _, entry in sorted(found.items())
    ]


def generate(core: pathlib.Path, aws: pathlib.Path, version: str) -> dict[str, Any]:
    return {
        "upstream": {"core": git(core, "rev-parse", "HEAD").strip(), "aws": git(aws, "rev-parse", "HEAD").strip(),
                     "docs": DOCS_PAGE.format(version=version)},
        "metrics": series(core, aws, version),
        "events": event_reasons(core, aws),
    }  # fmt: skip


def _finite(value: Any) -> Any:
    if isinstance(value, float) and math.isinf(value):
        return "+Inf"
    return value


def render(data: Mapping[str, Any]) -> str:
    return json.dumps(data, indent=1, sort_keys=True, default=_finite) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--core", type=pathlib.Path, default=CORE)
    parser.add_argument("--aws", type=pathlib.Path, default=AWS)
    parser.add_argument("--version", default="v1.14")
    args = parser.parse_args(argv)
    text = render(generate(args.core, args.aws, args.version))
    if args.check:
        if OUTPUT.read_text() != text:
            print(f"{OUTPUT} is stale: run tools/gen_upstream_observability.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
