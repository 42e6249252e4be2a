"""Strict reading of core kinds against the real schemas: `corekinds` refuses everything the API server's strict
OpenAPI schemas (kubernetes-validate, the schemas `kubectl --validate=strict` checks) refuse, and refuses more only
where the API server's decoding does (quantity and timestamp syntax, int32/int64 ranges, a missing apiVersion)."""

from __future__ import annotations

import copy
import pathlib
from typing import Any

import kubernetes_validate
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests import hypothesis_profiles, mutations
from tools import gen_core_schemas

from karpy.api import corecheck, corekinds, documents

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "manifests"
VERSION = gen_core_schemas.VERSION


def _examples() -> list[dict[str, Any]]:
    out = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        for doc in documents.load_all(path.read_bytes()):
            if isinstance(doc.body, dict) and doc.body.get("kind") in corekinds.api_versions():
                out.append(doc.body)
    return out


VALID = _examples()
EXTRA_REFUSALS = ("must be a quantity", "must be a number with", "must fit in", "RFC 3339", "apiVersion")
"""What the API server's decoding refuses beyond its OpenAPI schema (so beyond kubernetes-validate)."""


def test_the_committed_schemas_are_what_the_tool_generates() -> None:
    assert (pathlib.Path(gen_core_schemas.OUTPUT)).read_text() == gen_core_schemas.render()


def test_every_kind_simulate_reads_has_its_schema() -> None:
    assert set(corekinds.api_versions()) == {
        "Pod", "Node", "PersistentVolumeClaim", "PersistentVolume", "Deployment", "ReplicaSet", "StatefulSet",
        "DaemonSet", "Job", "StorageClass", "PodDisruptionBudget",
    }  # fmt: skip


@pytest.mark.parametrize("obj", VALID, ids=[f"{o['kind']}-{o['metadata']['name']}" for o in VALID])
def test_the_examples_are_valid_for_both(obj: dict[str, Any]) -> None:
    kubernetes_validate.validate(obj, VERSION, strict=True)
    read, problems = corekinds.read(obj, obj["kind"])
    assert problems == []
    assert read == obj, "nothing to drop: the same object"


WRONG_VALUES = st.sampled_from([None, 0, -1, 2**40, 1.5, True, "x", "", [], [1], {}, {"a": 1}, "1e999", "3Gi"])


@st.composite
def mutants(draw: st.DrawFn) -> dict[str, Any]:
    obj = copy.deepcopy(draw(st.sampled_from(VALID)))
    for _ in range(draw(st.integers(1, 2))):
        path = draw(st.sampled_from(mutations.positions(obj)))
        parent, last = mutations.parent_of(obj, path), path[-1]
        action = draw(st.sampled_from(["retype", "rename", "delete", "add"]))
        if action == "retype":
            parent[last] = copy.deepcopy(draw(WRONG_VALUES))  # never a shared sample: later steps may change it
        elif action == "rename" and isinstance(last, str):
            parent[last[:-1] + draw(st.sampled_from(["s", "x", "", "S"]))] = parent.pop(last)
        elif action == "delete" and isinstance(last, str):
            del parent[last]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.sampled_from(["replica", "requsts", "labels", "spec", "x"]))] = draw(WRONG_VALUES)
    return obj


def _theirs(obj: dict[str, Any]) -> str | None:
    """kubernetes-validate's refusal, or None when it accepts."""
    try:
        kubernetes_validate.validate(obj, VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return str(exc.message)
    except (kubernetes_validate.SchemaNotFoundError, KeyError, TypeError, AttributeError) as exc:
        return f"no schema: {exc}"
    return None


@given(mutants())
@settings(
    max_examples=hypothesis_profiles.examples(300),
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
def test_refuses_what_the_real_schemas_refuse(obj: dict[str, Any]) -> None:
    kind = obj.get("kind")
    if not isinstance(kind, str) or kind not in corekinds.api_versions():
        return  # the kind itself was mutated: simulate refuses unknown kinds before reading them
    _, ours = corekinds.read(obj, kind)
    theirs = _theirs(obj)
    if theirs is not None and "is valid under each of" in theirs:
        # The JSON schemas write a quantity as oneOf(nullable string, nullable number): null matches both, so they
        # refuse `cpu: null`, which the API server reads as zero. Not a refusal to copy.
        theirs = None
    if theirs is not None:
        assert ours, f"kubernetes-validate refuses ({theirs}) but corekinds accepts"
    else:
        extra = [p for p in ours if not any(reason in str(p) for reason in EXTRA_REFUSALS)]
        # A null item of a list of objects is an empty object to the API server's decoder, which then misses
        # the object's required fields: the JSON schema only sees a nullable item.
        extra = [p for p in extra if "Required value" not in p.message]
        assert not extra, f"corekinds refuses what the API server's schema accepts: {extra}"


@pytest.mark.parametrize(
    ("kind", "obj", "says"),
    [
        ("Pod", {"apiVersion": "v1", "kind": "Pod", "spec": {"replica": 1}}, "spec.replica: unknown field"),
        ("Pod", {"kind": "Pod"}, 'apiVersion: Required value: must be "v1" for a Pod'),
        ("Deployment", {"apiVersion": "v1", "kind": "Deployment"}, 'apiVersion: must be "apps/v1" for a Deployment'),
        (
            "Deployment",
            {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replica": 5}},
            '(did you mean "replicas"?)',
        ),
        (
            "Deployment",
            {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 2**31}},
            "spec.replicas: must fit in int32",
        ),
        (
            "Deployment",
            {"apiVersion": "apps/v1", "kind": "Deployment", "spec": {"replicas": 10**5000}},
            "an integer of about 5001 digits",
        ),
        (
            "Node",
            {"apiVersion": "v1", "kind": "Node", "status": {"allocatable": {"cpu": [1]}}},
            "status.allocatable[cpu]: must be a quantity",
        ),
        ("Node", {"apiVersion": "v1", "kind": "Node", "metadata": {"creationTimestamp": "yesterday"}}, "RFC 3339"),
        (
            "Pod",
            {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [None]}},
            "spec.containers[0].name: Required value",
        ),
    ],
)
def test_messages_name_the_field(kind: str, obj: dict[str, Any], says: str) -> None:
    _, problems = corekinds.read(obj, kind)
    assert any(says in str(p) for p in problems), problems


def test_nulls_read_as_absent() -> None:
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": None}, "spec": {"containers": [
        {"name": "c", "resources": {"requests": {"cpu": None, "memory": "1Gi"}}}]}}  # fmt: skip
    read, problems = corekinds.read(obj, "Pod")
    assert problems == []
    assert read["metadata"] == {"name": "p"}
    assert read["spec"]["containers"][0]["resources"]["requests"] == {"memory": "1Gi"}
    assert obj["metadata"]["labels"] is None, "the input is not changed"


@given(mutants(), st.booleans())
@settings(
    max_examples=hypothesis_profiles.examples(300),
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
def test_mutants_read_the_same_with_and_without_a_sink(obj: dict[str, Any], strict: bool) -> None:
    kind = obj.get("kind")
    if not isinstance(kind, str) or kind not in corekinds.api_versions():
        return
    _agrees(obj, kind, strict=strict)


def _null_item(value: Any) -> bool:
    """A null list item, or a value of a type JSON does not read into: the fast answer leaves both to the sink."""
    if isinstance(value, dict):
        return any(_null_item(v) for v in value.values())
    if isinstance(value, list):
        return any(v is None or _null_item(v) for v in value)
    return value is not None and type(value) not in (str, int, float, bool)


def _agrees(obj: dict[str, Any], kind: str, *, strict: bool) -> bool:
    """The compiled check without a sink accepts what it finds no problem in with one (but null list items), and
    returns the same reading; it refuses what it finds a problem in. Whether it accepted."""
    check = corekinds._checks(strict)[f"{corekinds.api_versions()[kind]}/{kind}"]
    body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
    fast = check(copy.deepcopy(body), "", None)
    problems: list[Any] = []
    read = check(copy.deepcopy(body), "", problems)
    assert read is not corecheck.FAIL, "a reading with a sink always ends"
    if fast is corecheck.FAIL:
        assert problems or _null_item(body), "a valid object refused by the fast answer"
        return False
    assert problems == []
    assert fast == read
    return True


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}}


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("containers", [None]),  # a null item of a list of objects: an empty object, missing its name
        ("containers", [{"name": "c", "args": ["a", None]}]),  # a null string item: kept as null
        ("containers", [{"name": "c", "ports": [{"containerPort": True}]}]),
        ("containers", [{"name": "c", "ports": [{"containerPort": 2**31}]}]),
        ("containers", [{"name": "c", "resources": {"requests": {"cpu": "1.2.3"}}}]),
        ("containers", [{"name": "c", "imagePullPolicy": "Sometimes"}]),
        ("containers", [{"name": "c", "nmae": None}]),  # unknown, null: refused when strict, dropped when not
        ("containers", [{"name": "c", "nmae": "x"}]),
        ("nodeSelector", {"a": 1}),
        ("nodeSelector", {"a": None}),
        ("priority", 1.0),
        ("overhead", {"cpu": 1, "memory": 1.5}),
        ("tolerations", []),
    ],
)
def test_the_readings_with_and_without_a_sink_agree_on(field: str, value: Any, strict: bool) -> None:
    obj = copy.deepcopy(POD)
    obj["spec"][field] = value
    _agrees(obj, "Pod", strict=strict)


@pytest.mark.parametrize("strict", [True, False])
def test_nulls_are_dropped_with_and_without_a_sink(strict: bool) -> None:
    obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": None, "annotations": {"a": None}},
           "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": None, "memory": "1Gi"}}}],
                    "nodeName": None},
           "status": {"conditions": [{"type": "Ready", "status": "True", "lastProbeTime": None}]}}  # fmt: skip
    assert _agrees(obj, "Pod", strict=strict)
    read, problems = corekinds.read(obj, "Pod", strict=strict)
    assert problems == []
    assert read["status"]["conditions"] == [{"type": "Ready", "status": "True"}]
    assert list(read["spec"]) == ["containers"]


def test_a_dumped_cluster_is_read_by_the_fast_answer_alone() -> None:
    """The objects `kubectl get -o json` dumps (nulls included) are read without a sink: formatting paths and
    messages for them made a cluster's pods and nodes slow to read."""
    from karpy_emulator import dumps

    objs = [o for o in dumps.objects(dumps.Shape(nodes=2, pending=1, guarded_every=2, pinned_every=2))]
    core = [o for o in objs if o["kind"] in corekinds.api_versions()]
    assert {o["kind"] for o in core} >= {"Pod", "Node"}
    assert any(c.get("lastProbeTime", 0) is None for o in core for c in o.get("status", {}).get("conditions", []))
    for obj in core:
        assert _agrees(obj, obj["kind"], strict=False), "as the state cache reads it"
        if obj["kind"] == "Pod":  # the dump's nodes leave out nodeInfo fields a strict read requires
            assert _agrees(obj, obj["kind"], strict=True), "as simulate reads it"
