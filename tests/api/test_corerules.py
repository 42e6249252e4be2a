"""The API server's semantic checks on core kinds (k8s pkg/apis/*/validation), as cases in our words: each case is
one object a real API server refuses at admission, with the field path the refusal names; the valid neighbours of
each are accepted."""

from __future__ import annotations

import copy
import functools
from typing import Any

import pytest
from tests import builders

from karpy.api import corekinds, corerules

# A pod and a deployment as a client posts them (no namespace: the URL carries it), the pod labelled for the
# deployment's selector.
web = functools.partial(builders.pod, "p", namespace=None, labels={"app": "web"})
WEB_DEPLOYMENT = builders.deployment("web", 2, namespace=None)


def with_(obj: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    *parents, last = path.split(".")
    target: Any = out
    for step in parents:
        target = target[int(step)] if isinstance(target, list) else target[step]
    if value is _DELETE:
        del target[last]
    elif isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return out


_DELETE = object()
SPREAD = {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
TERM = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}


def problems(obj: dict[str, Any]) -> list[str]:
    """As `karpy simulate` reads: structure first (a required field is the schema's), then semantics."""
    read, structural = corekinds.read(obj, obj["kind"])
    return [str(p) for p in structural or corerules.check(read, obj["kind"])]


VALID = [
    web(),
    web(topologySpreadConstraints=[SPREAD, {**SPREAD, "whenUnsatisfiable": "ScheduleAnyway"}]),
    web(topologySpreadConstraints=[{**SPREAD, "minDomains": 2}]),
    web(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [TERM]}}}),
    web(tolerations=[{"operator": "Exists"}, {"key": "a", "operator": "Exists", "effect": "NoSchedule"}]),
    web(initContainers=[{"name": "i", "resources": {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}}]),
    with_(web(), "metadata.name", "") | {"metadata": {"generateName": "p-"}},
    WEB_DEPLOYMENT,
    with_(
        WEB_DEPLOYMENT,
        "spec.selector",
        {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]},
    ),
    with_(WEB_DEPLOYMENT, "spec.replicas", 0),
]


@pytest.mark.parametrize("obj", VALID, ids=lambda o: o["kind"])
def test_valid_objects_pass(obj: dict[str, Any]) -> None:
    assert problems(obj) == []


CASES: list[tuple[dict[str, Any], str]] = [
    # Pods and pod templates (pkg/apis/core/validation: ValidatePodSpec and what it calls)
    (with_(web(), "spec.containers", []), "spec.containers: Required value"),
    (with_(web(), "metadata.name", ""), "metadata.name: Required value"),
    (with_(web(), "spec.containers.0.name", ""), "spec.containers[0].name: Required value"),
    (
        with_(web(), "spec.containers.0.resources", {"requests": {"cpu": "-1"}}),
        "requests[cpu]: must be greater than or equal to 0",
    ),
    (
        with_(web(), "spec.containers.0.resources", {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}),
        "must be less than or equal to cpu limit of 1",
    ),
    (web(overhead={"memory": "-1Gi"}), "spec.overhead[memory]: must be greater than or equal to 0"),
    (
        web(topologySpreadConstraints=[{**SPREAD, "maxSkew": 0}]),
        "spec.topologySpreadConstraints[0].maxSkew: must be greater than zero",
    ),
    (web(topologySpreadConstraints=[{**SPREAD, "minDomains": 0}]), "minDomains: must be greater than zero"),
    (
        web(topologySpreadConstraints=[{**SPREAD, "minDomains": 2, "whenUnsatisfiable": "ScheduleAnyway"}]),
        "minDomains: can only be set",
    ),
    (
        web(topologySpreadConstraints=[{**SPREAD, "whenUnsatisfiable": "Never"}]),
        'whenUnsatisfiable: unsupported value "Never"',
    ),
    (web(topologySpreadConstraints=[{**SPREAD, "topologyKey": ""}]), "topologyKey: Required value"),
    (web(topologySpreadConstraints=[SPREAD, SPREAD]), "spec.topologySpreadConstraints[1]: Duplicate value"),
    (
        web(topologySpreadConstraints=[{**SPREAD, "nodeAffinityPolicy": "Always"}]),
        "nodeAffinityPolicy: unsupported value",
    ),
    (
        web(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}),
        "nodeSelectorTerms: Required value: must have at least one node selector term",
    ),
    (
        web(
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In"}]}]
                    }
                }
            }
        ),
        "matchExpressions[0].values: Required value",
    ),
    (
        web(
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "zone", "operator": "Equals", "values": ["a"]}]}
                        ]
                    }
                }
            }
        ),
        'unsupported operator "Equals"',
    ),
    (
        web(
            affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [{"key": "cpu", "operator": "Gt", "values": ["a"]}]}]
                    }
                }
            }
        ),
        "must be a single integer",
    ),
    (
        web(
            affinity={
                "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": TERM}]}
            }
        ),
        "preferredDuringSchedulingIgnoredDuringExecution[0].weight: must be in the range 1-100",
    ),
    (
        web(affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": ""}]}}),
        "podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey: Required value",
    ),
    (
        web(
            affinity={
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "topologyKey": "zone",
                            "labelSelector": {
                                "matchExpressions": [{"key": "app", "operator": "Exists", "values": ["x"]}]
                            },
                        }
                    ]
                }
            }
        ),
        "values: may not be specified when `operator` is 'Exists'",
    ),
    (
        web(tolerations=[{"key": "a", "operator": "Exists", "value": "b"}]),
        "spec.tolerations[0].value: must be empty",
    ),
    (web(tolerations=[{"value": "b"}]), "spec.tolerations[0].operator: must be 'Exists' when `key` is empty"),
    (web(tolerations=[{"key": "a", "operator": "In"}]), 'spec.tolerations[0].operator: unsupported operator "In"'),
    (
        web(tolerations=[{"key": "a", "effect": "NoStart"}]),
        'spec.tolerations[0].effect: unsupported value "NoStart"',
    ),
    (web(nodeSelector={"bad key!": "x"}), "spec.nodeSelector[bad key!]: invalid key"),
    (with_(web(), "metadata.labels", {"app": "-web"}), 'metadata.labels[app]: invalid label value "-web"'),
    (
        web(volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": ""}}]),
        "persistentVolumeClaim.claimName: Required value",
    ),
    (
        with_(web(), "spec.containers.0.ports", [{"containerPort": 80, "hostPort": 70000}]),
        "ports[0].hostPort: must be between 0 and 65535",
    ),
    (
        web(restartPolicy="Never")
        | {
            "kind": "Deployment",
            "apiVersion": "apps/v1",
            "spec": {
                "selector": {"matchLabels": {"a": "b"}},
                "template": {"metadata": {"labels": {"a": "b"}}, "spec": web(restartPolicy="Never")["spec"]},
            },
        },
        'spec.template.spec.restartPolicy: unsupported value "Never"',
    ),
    # Workloads (pkg/apis/apps/validation, pkg/apis/batch/validation)
    (
        with_(WEB_DEPLOYMENT, "spec.template.metadata.labels", {"app": "api"}),
        "spec.template.metadata.labels: `selector` does not match template `labels`",
    ),
    (
        with_(
            WEB_DEPLOYMENT,
            "spec.selector",
            {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]},
        ),
        "`selector` does not match",
    ),
    (with_(WEB_DEPLOYMENT, "spec.selector", {}), "spec.selector: empty selector is invalid"),
    (with_(WEB_DEPLOYMENT, "spec.selector", _DELETE), "spec.selector: Required value"),
    (with_(WEB_DEPLOYMENT, "spec.replicas", -1), "spec.replicas: must be greater than or equal to 0"),
    (with_(WEB_DEPLOYMENT, "spec.template.spec.containers", []), "spec.template.spec.containers: Required value"),
    (
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "j"},
            "spec": {"template": {"spec": web()["spec"]}},
        },
        'spec.template.spec.restartPolicy: unsupported value "Always"',
    ),
    (
        {
            "apiVersion": "apps/v1",
            "kind": "StatefulSet",
            "metadata": {"name": "s"},
            "spec": {
                "selector": {"matchLabels": {"app": "web"}},
                "template": WEB_DEPLOYMENT["spec"]["template"],
                "volumeClaimTemplates": [
                    {"metadata": {"name": "data"}, "spec": {"resources": {"requests": {"storage": "1Gi"}}}}
                ],
            },
        },
        "spec.volumeClaimTemplates[0].spec.accessModes: Required value",
    ),
    # Volumes, storage, budgets, nodes
    (
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "c"},
            "spec": {"accessModes": ["ReadWriteOnce"]},
        },
        "spec.resources.requests[storage]: Required value",
    ),
    (
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "c"},
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "0"}}},
        },
        "requests[storage]: must be greater than 0",
    ),
    (
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "v"},
            "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}},
        },
        "spec: Required value: must specify a volume type",
    ),
    (
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "v"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "capacity": {"storage": "1Gi"},
                "csi": {"driver": "d", "volumeHandle": "h"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": []}},
            },
        },
        "spec.nodeAffinity.required.nodeSelectorTerms: Required value",
    ),
    (
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "s"},
            "provisioner": "p",
            "volumeBindingMode": "Later",
        },
        'volumeBindingMode: unsupported value "Later"',
    ),
    (
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "s"},
            "provisioner": "p",
            "allowedTopologies": [{"matchLabelExpressions": []}],
        },
        "allowedTopologies[0].matchLabelExpressions: Required value",
    ),
    (
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "s"}},
        "provisioner: Required value",
    ),
    (
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "b"},
            "spec": {"minAvailable": 1, "maxUnavailable": 1},
        },
        "spec: minAvailable and maxUnavailable cannot be both set",
    ),
    (
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "b"},
            "spec": {"maxUnavailable": "120%"},
        },
        'spec.maxUnavailable: invalid value "120%"',
    ),
    (
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n"},
            "spec": {"taints": [{"key": "a", "effect": "Sometimes"}]},
        },
        'spec.taints[0].effect: unsupported value "Sometimes"',
    ),
    (
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "-2"}}},
        "status.allocatable[cpu]: must be greater than or equal to 0",
    ),
]


@pytest.mark.parametrize(("obj", "says"), CASES, ids=[c[1][:50] for c in CASES])
def test_refused_with_the_field_path(obj: dict[str, Any], says: str) -> None:
    found = problems(obj)
    assert any(says in p for p in found), found
