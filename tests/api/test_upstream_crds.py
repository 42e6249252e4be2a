"""karpy's CRDs constrain every field as upstream v1.14.1's do: the same types, patterns, lengths, item and property
limits, enums, defaults, list and map types, required fields and CEL rules at every schema path
(tests/api/upstream/crd_constraints.json, taken from aws charts/karpenter-crd/templates). The only differences are
fields karpy adds, listed here; an object using them is refused by upstream's CRD (see README, "Handing back")."""

from __future__ import annotations

import json
import pathlib
import re
from typing import Any

import pytest

from karpy.api import crds

SNAPSHOT = pathlib.Path(__file__).parent / "upstream" / "crd_constraints.json"
KEYWORDS = (
    "type", "pattern", "maxLength", "minLength", "maxItems", "minItems", "maximum", "minimum", "enum", "format",
    "default", "maxProperties", "minProperties", "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "required",
    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-int-or-string", "x-kubernetes-map-type",
)  # fmt: skip
KARPY_ONLY = {
    "EC2NodeClass": {
        ".spec.enclaveOptions",
        ".spec.enclaveOptions.enabled",
        ".spec.securityGroupSelectorTerms[].vpcID",
    }
}
"""karpy extensions upstream v1.14.1 does not have."""
_QUOTED_LIST = re.compile(r'\[("[^"]*"(?:, *"[^"]*")*)\]')


def _rule(text: str) -> str:
    """A CEL rule compared by meaning of layout: spacing normalized, a quoted string list as a sorted set."""
    text = re.sub(r"\s*(!=|==)\s*", r" \1 ", re.sub(r"\s+", " ", text))
    return _QUOTED_LIST.sub(lambda m: "[" + ", ".join(sorted(set(re.findall(r'"[^"]*"', m.group(0))))) + "]", text)


def constraints(node: dict[str, Any], path: str = "", out: dict[str, Any] | None = None) -> dict[str, Any]:
    out = {} if out is None else out
    entry = {k: sorted(node[k]) if k in ("enum", "required") else node[k] for k in KEYWORDS if k in node}
    rules = sorted(_rule(r["rule"].strip()) for r in node.get("x-kubernetes-validations", ()))
    if rules:
        entry["rules"] = rules
    out[path or "."] = entry
    for name, child in (node.get("properties") or {}).items():
        constraints(child, f"{path}.{name}", out)
    if "items" in node:
        constraints(node["items"], f"{path}[]", out)
    if isinstance(node.get("additionalProperties"), dict):
        constraints(node["additionalProperties"], f"{path}{{}}", out)
    return out


UPSTREAM: dict[str, dict[str, Any]] = json.loads(SNAPSHOT.read_text())
KARPY = {
    crd["spec"]["names"]["kind"]: constraints(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])
    for crd in crds.build_crds()
}
PATHS = [(kind, path) for kind, table in sorted(UPSTREAM.items()) for path in sorted(table)]


@pytest.mark.parametrize(("kind", "path"), PATHS, ids=[f"{k} {p}" for k, p in PATHS])
def test_every_upstream_schema_node_is_constrained_alike(kind: str, path: str) -> None:
    assert path in KARPY[kind], f"{kind} {path}: missing from karpy's CRD"
    assert KARPY[kind][path] == UPSTREAM[kind][path]


@pytest.mark.parametrize("kind", sorted(UPSTREAM))
def test_karpy_adds_only_its_listed_extensions(kind: str) -> None:
    assert set(KARPY[kind]) - set(UPSTREAM[kind]) == KARPY_ONLY.get(kind, set())
