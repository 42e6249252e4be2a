"""Pods parsed once per template: every pod reads as `from_manifest` reads it, bad pods fail as they do there."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from karpy.api import errors
from karpy.scheduling import pods, podtemplates


def _pod(name: str, *, node: str = "n1", app: str = "web", **spec: Any) -> dict[str, Any]:
    """A Deployment's pod with every part the scheduler reads, so a part not carried over shows."""
    selector = {"matchLabels": {"app": app}}
    term = {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "uid": f"uid-{name}",
            "creationTimestamp": 1700000000.0 + len(name),
            "labels": {"app": app, "pod-template-hash": "abc"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "controller": True}],
        },
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "app",
                    "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"cpu": "500m"}},
                    "ports": [{"containerPort": 80, "hostPort": 8080}],
                }
            ],
            "overhead": {"cpu": "10m"},
            "nodeSelector": {"kubernetes.io/os": "linux"},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "shop", "effect": "NoSchedule"}],
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}]},
                            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["x"]}]},
                        ]
                    },
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 5,
                            "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                        }
                    ],
                },
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [term],
                    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 3, "podAffinityTerm": term}],
                },
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [term],
                    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 7, "podAffinityTerm": term}],
                },
            },
            "topologySpreadConstraints": [
                {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": selector}
            ],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
            "resourceClaims": [{"name": "gpu"}],
            **spec,
        },
    }


def test_every_pod_of_a_template_reads_as_from_manifest_reads_it() -> None:
    templates = podtemplates.Templates()
    first, second = _pod("web-abc-1"), _pod("web-abc-2", node="n2")
    second["metadata"]["deletionTimestamp"] = "2027-01-01T00:00:00Z"
    del second["metadata"]["uid"]  # the uid then defaults to namespace/name, per pod
    for obj in (first, second, first):
        assert templates.parse(obj) == pods.from_manifest(obj)
    assert len(templates) == 1


def test_pods_of_a_template_share_every_part_and_own_their_fields() -> None:
    """Sharing is what the scheduler's per-template caches key on (`exclusion`, `tying`, `bound`): every field a
    template decides is the template's object, every other one is the pod's own."""
    templates = podtemplates.Templates()
    first = templates.parse(_pod("web-abc-1"))
    second = templates.parse(_pod("web-abc-2", node="n2"))
    own = {"name", "uid", "creation_timestamp", "node_name", "owner_kind", "terminating"}
    shared = {f.name for f in dataclasses.fields(pods.Pod)} - own
    for name in shared:
        value = getattr(first, name)
        if not isinstance(value, str | bool):
            assert getattr(second, name) is value, name
    assert (second.name, second.node_name, second.uid) == ("web-abc-2", "n2", "uid-web-abc-2")
    assert (first.name, first.node_name) == ("web-abc-1", "n1")


def test_every_shared_part_of_the_test_pod_is_set() -> None:
    """The pod above sets every part, so that a part a stamped pod did not carry over would show."""
    parsed = pods.from_manifest(_pod("web-abc-1"))
    defaults = pods.Pod(namespace="", name="")
    skipped = {"namespace", "name", "uid", "creation_timestamp", "node_name", "owner_kind", "terminating"}
    never_parsed = {"from_candidate"}  # set by disruption's simulations, never read from a manifest
    unset = [
        f.name
        for f in dataclasses.fields(pods.Pod)
        if f.name not in skipped | never_parsed and getattr(parsed, f.name) == getattr(defaults, f.name)
    ]
    assert unset == []


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda md: md.pop("name"), "metadata.name"),
        (lambda md: md.update(ownerReferences="web"), "metadata.ownerReferences"),
        (lambda md: md.update(ownerReferences=["web"]), "metadata.ownerReferences[0]"),
    ],
)
def test_a_bad_pod_of_a_known_template_fails_as_from_manifest_fails(change: Any, where: str) -> None:
    templates = podtemplates.Templates()
    templates.parse(_pod("web-abc-1"))
    bad = _pod("web-abc-2")
    change(bad["metadata"])
    with pytest.raises(errors.ValidationError) as ours:
        templates.parse(bad)
    with pytest.raises(errors.ValidationError) as theirs:
        pods.from_manifest(bad)
    assert str(ours.value) == str(theirs.value)
    assert where in str(ours.value)


def test_a_bad_pod_is_not_remembered() -> None:
    templates = podtemplates.Templates()
    bad = _pod("web-abc-1", tolerations=[{"key": "k", "operator": "Sometimes"}])
    for _ in range(2):
        with pytest.raises(errors.ValidationError, match=r"spec\.tolerations"):
            templates.parse(bad)
    assert len(templates) == 0


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ({"nodeSelector": {"true": "x"}}, {"nodeSelector": {True: "x"}}),
        ({"overhead": {"cpu": "1"}}, {"overhead": {"cpu": 1}}),
        ({"priority": 1}, {"priority": 1.0}),
    ],
)
def test_values_a_parser_reads_apart_are_templates_apart(one: dict[str, Any], other: dict[str, Any]) -> None:
    templates = podtemplates.Templates()
    for spec in (one, other):
        obj = _pod("web-abc-1", **spec)
        assert templates.parse(obj) == pods.from_manifest(obj)
    assert len(templates) == 2


def test_claims_named_after_the_pod_are_each_pods_own() -> None:
    templates = podtemplates.Templates()
    ephemeral = [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]
    first = templates.parse(_pod("web-abc-1", volumes=ephemeral))
    second = templates.parse(_pod("web-abc-2", volumes=ephemeral))
    assert (first.pvc_names, second.pvc_names) == (("web-abc-1-scratch",), ("web-abc-2-scratch",))


def test_the_least_recently_used_template_goes_first() -> None:
    templates = podtemplates.Templates(size=2)
    a, b, c = (_pod("p", app=app) for app in ("a", "b", "c"))
    first_a, first_b = templates.parse(a), templates.parse(b)
    templates.parse(a)  # a is used again: b goes when c comes
    templates.parse(c)
    assert len(templates) == 2
    assert templates.parse(_pod("q", app="a")).labels is first_a.labels, "a is remembered"
    assert templates.parse(_pod("q", app="b")).labels is not first_b.labels, "b was forgotten"


@pytest.mark.parametrize(
    "change",
    [
        lambda md: md.update(namespace="other"),  # affinity terms default to the pod's namespace
        lambda md: md["labels"].update({"statefulset.kubernetes.io/pod-name": "web-0"}),
    ],
)
def test_pods_in_another_namespace_or_with_other_labels_are_another_template(change: Any) -> None:
    templates = podtemplates.Templates()
    templates.parse(_pod("web-abc-1"))
    other = _pod("web-abc-2")
    change(other["metadata"])
    assert templates.parse(other) == pods.from_manifest(other)
    assert len(templates) == 2


def test_an_unbound_pod_is_the_pod_off_its_node() -> None:
    pod = pods.from_manifest(_pod("web-abc-1"))
    moved = dataclasses.replace(pod, from_candidate=True, terminating=True)
    for original in (pod, moved):
        assert pods.unbound(original) == dataclasses.replace(original, node_name="")
