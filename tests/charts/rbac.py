"""RBAC from use: what the controller sends the emulated API server against what charts/karpy grants it.

Kubernetes' authorization of one request (plugin/pkg/auth/authorizer/rbac/rbac.go, `RuleAllows`): a rule of a role
bound to the user allows it when its apiGroups, resources (`pods/eviction` for a subresource) and verbs match, and
its resourceNames, when given, contain the object's name; a Role only in its own namespace.

The recording (`rbac-used.json`, written by `tools/record_rbac.py` from the e2e suite, and checked against what
every e2e test sends) keeps (verb, group, resource, name), the name only where the chart restricts by name.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from karpy_emulator import controlplane
from karpy_emulator.apiserver import audit

REPO = Path(__file__).resolve().parents[2]
HELM = REPO / ".tools" / "bin" / "helm"
CHART = REPO / "charts" / "karpy"
RECORDING = Path(__file__).with_name("rbac-used.json")
RECORD_DIR_ENV = "KARPY_RBAC_RECORD_DIR"
"""Set by tools/record_rbac.py: each e2e test writes what the controller used there."""

# The emulation's controller (karpy_emulator.controlplane) runs as release "karpy" would: ServiceAccount "karpy" and
# its Lease (karpy-leader-election) in namespace "default".
RELEASE, NAMESPACE, SERVICE_ACCOUNT = "karpy", "default", "karpy"
NAMED_RESOURCES = frozenset({("coordination.k8s.io", "leases"), ("", "services")})
"""Where the chart grants by resourceNames, so the recording keeps the name."""

Use = tuple[str, str, str, str]
"""(verb, apiGroup, resource, name or "")."""


@dataclass(frozen=True, slots=True)
class Rule:
    namespace: str | None
    """None for a ClusterRole's rule (every namespace), else the Role's namespace."""
    api_groups: frozenset[str]
    resources: frozenset[str]
    verbs: frozenset[str]
    resource_names: frozenset[str]

    def allows(self, access: audit.Access) -> bool:
        if self.namespace is not None and access.namespace != self.namespace:
            return False
        if self.resource_names and access.name not in self.resource_names:
            return False
        return access.group in self.api_groups and access.resource in self.resources and access.verb in self.verbs


def render(*, release: str = RELEASE, namespace: str = NAMESPACE, values: Sequence[str] = ()) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="karpy-helm-") as home:
        result = subprocess.run(
            [str(HELM), "template", release, str(CHART), "--namespace", namespace, "--set",
             "settings.clusterName=demo", "--set", "controller.image.repository=registry.example.com/karpy", *values],
            capture_output=True, text=True, timeout=60, check=True,
            env={**os.environ, "HELM_CACHE_HOME": home, "HELM_CONFIG_HOME": home, "HELM_DATA_HOME": home},
        )  # fmt: skip
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def bound_rules(docs: Iterable[dict[str, Any]], *, service_account: str, namespace: str) -> list[Rule]:
    """The rules of every role a (Cluster)RoleBinding gives the ServiceAccount."""
    docs = list(docs)
    roles = {(d["kind"], d["metadata"]["name"]): d for d in docs if d["kind"] in ("ClusterRole", "Role")}
    rules = []
    for binding in (d for d in docs if d["kind"] in ("ClusterRoleBinding", "RoleBinding")):
        subject = {"kind": "ServiceAccount", "name": service_account, "namespace": namespace}
        if subject not in binding["subjects"]:
            continue
        role = roles[(binding["roleRef"]["kind"], binding["roleRef"]["name"])]
        scope = None if binding["kind"] == "ClusterRoleBinding" else binding["metadata"]["namespace"]
        rules += [
            Rule(
                namespace=scope,
                api_groups=frozenset(rule["apiGroups"]),
                resources=frozenset(rule["resources"]),
                verbs=frozenset(rule["verbs"]),
                resource_names=frozenset(rule.get("resourceNames") or ()),
            )
            for rule in role["rules"]
        ]
    return rules


def granted(rules: Iterable[Rule]) -> set[Use]:
    """Every (verb, group, resource, name) the rules grant, names only where a rule restricts by name."""
    return {
        (verb, group, resource, name)
        for rule in rules
        for group in rule.api_groups
        for resource in rule.resources
        for verb in rule.verbs
        for name in (rule.resource_names or {""})
    }


def use_of(access: audit.Access) -> Use:
    name = access.name if (access.group, access.resource) in NAMED_RESOURCES else ""
    return (access.verb, access.group, access.resource, name)


def controller_accesses(accesses: Iterable[audit.Access]) -> list[audit.Access]:
    return sorted(a for a in accesses if a.user == controlplane.CONTROLLER_USER)


def recorded() -> set[Use]:
    return {tuple(use) for use in json.loads(RECORDING.read_text())}  # type: ignore[misc]


def problems(accesses: Iterable[audit.Access], rules: Sequence[Rule], recording: set[Use]) -> list[str]:
    """Requests the chart would refuse (403 in a real cluster), and uses the committed recording lacks."""
    found = []
    for access in controller_accesses(accesses):
        if not any(rule.allows(access) for rule in rules):
            found.append(f"the chart's RBAC refuses {access}")
        if use_of(access) not in recording:
            found.append(f"{use_of(access)} is not in {RECORDING.name}: run tools/record_rbac.py")
    return sorted(set(found))


def after_test(accesses: Iterable[audit.Access], rules: Sequence[Rule], *, test_id: str) -> list[str]:
    """The end of one e2e test: its problems; while tools/record_rbac.py runs, also its uses, one file per test."""
    uses = sorted({use_of(a) for a in controller_accesses(accesses)})
    record_dir = os.environ.get(RECORD_DIR_ENV)
    if not record_dir:
        return problems(accesses, rules, recorded())
    path = Path(record_dir) / f"{hashlib.sha256(test_id.encode()).hexdigest()[:16]}.json"
    path.write_text(json.dumps({"test": test_id, "uses": uses}))
    return problems(accesses, rules, set(uses))


def merge(record_dir: Path) -> list[Use]:
    """Every use any test recorded, sorted: the same file whatever order the tests ran in."""
    found: set[Use] = set()
    for path in sorted(record_dir.glob("*.json")):
        found |= {tuple(use) for use in json.loads(path.read_text())["uses"]}  # type: ignore[misc]
    return sorted(found)
