"""Acceptance parity with upstream Karpenter v1.14: the cases of upstream's own validation tests (as data under
tests/api/upstream/, each naming its upstream test) give upstream's verdict three ways:

* the emulated API server, over HTTP with the official client, admits (201) or refuses (422) the object as
  upstream's API server does (`admitted`; `update_admitted` for a second change to the stored object);
* the generated CRD itself (jsonschema + cel-python on `karpy.api.crds`, what the karpy-crd chart installs)
  agrees, so a cluster running karpy's CRDs stores what upstream's stored;
* the parser (what the controller reads objects with) accepts what upstream's API server stores, except what
  upstream's controller refuses at runtime (`runtime: false`: a NodePool's RuntimeValidate, an EC2NodeClass's
  kubelet checks). Upstream has no runtime validation of NodeClaims: every stored claim must parse.
"""

from __future__ import annotations

import copy
import pathlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import kubernetes
import pytest
import yaml
from tests.api import crd_check

from karpy.api import capacitybuffer, errors, labels, nodeoverlay, parse
from karpy_emulator.apiserver import runner, server

UPSTREAM = pathlib.Path(__file__).parent / "upstream"
PLURALS = {
    "NodePool": "nodepools",
    "NodeClaim": "nodeclaims",
    "EC2NodeClass": "ec2nodeclasses",
    "NodeOverlay": "nodeoverlays",
    "CapacityBuffer": capacitybuffer.PLURAL,
}
VERSIONS = {"NodeOverlay": nodeoverlay.VERSION, "CapacityBuffer": capacitybuffer.VERSION}
GROUPS = {"EC2NodeClass": labels.AWS_GROUP, "CapacityBuffer": capacitybuffer.GROUP}
_REPEAT = re.compile(r"\{(\w+)\*(\d+)\}")


@dataclass(frozen=True, slots=True)
class Case:
    source: str
    test: str
    kind: str
    obj: dict[str, Any]
    admitted: bool
    runtime: bool | None
    stored: dict[str, Any]
    update: dict[str, Any] | None
    update_admitted: bool | None

    @property
    def status(self) -> dict[str, Any] | None:
        """The status the case sets: the API server takes it through the status subresource only."""
        return self.obj.get("status")


def _expand(value: Any) -> Any:
    """Placeholders for long values: "{a*250}" inside a string repeats "a"; a whole "{instance*90}", "{requirement*101}"
    or "{interface*151}" becomes a list of that many distinct items."""
    if isinstance(value, dict):
        return {_expand(k): _expand(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_expand(v) for v in value]
    if not isinstance(value, str):
        return value
    whole = _REPEAT.fullmatch(value)
    if whole is not None and whole.group(1) != "a":
        return [_item(whole.group(1), i) for i in range(int(whole.group(2)))]
    return _REPEAT.sub(lambda m: m.group(1) * int(m.group(2)), value)


def _item(kind: str, i: int) -> Any:
    match kind:
        case "instance":
            return f"instance{i}"
        case "requirement":
            return {"key": f"key-{i}", "operator": "In", "values": [f"value-{i}"]}
        case "interface":
            return {"networkCardIndex": i, "deviceIndex": 0, "interfaceType": "interface"}
    raise ValueError(f"unknown placeholder {kind!r}")


def _apply(obj: dict[str, Any], change: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    for path, value in _expand(change.get("set") or {}).items():
        *parents, leaf = path.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    for path in change.get("unset") or ():
        *parents, leaf = path.split(".")
        node = out
        for part in parents:
            node = node[part]
        node.pop(leaf, None)
    return out


def _merge_patch(change: dict[str, Any]) -> dict[str, Any]:
    patch: dict[str, Any] = {}
    for path, value in [*_expand(change.get("set") or {}).items(), *((p, None) for p in change.get("unset") or ())]:
        *parents, leaf = path.split(".")
        node = patch
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return patch


def load() -> list[Case]:
    cases = []
    for file in sorted(UPSTREAM.glob("*.yaml")):
        doc = yaml.safe_load(file.read_text())
        for raw in doc["cases"]:
            cases.append(
                Case(
                    source=doc["source"],
                    test=raw["test"],
                    kind=doc["kind"],
                    obj=_apply(doc["base"], raw),
                    admitted=raw["admitted"],
                    runtime=raw.get("runtime"),
                    stored=_expand(raw.get("stored") or {}),
                    update=raw.get("update"),
                    update_admitted=raw.get("update_admitted"),
                )
            )
    return cases


CASES = load()
IDS = [f"{c.kind}: {c.test}" for c in CASES]


def test_the_suite_covers_upstreams_tests_both_ways() -> None:
    sources = {c.source for c in CASES}
    assert len(CASES) >= 100
    assert len(sources) == 6, sources
    for source in sources:
        verdicts = {c.admitted for c in CASES if c.source == source}
        assert verdicts == {True, False}, source
    assert sum(c.runtime is False for c in CASES) >= 10  # stored by the API server, refused by the controller
    assert len(IDS) == len(set(IDS)), "every case names a distinct upstream test"


@pytest.fixture(scope="module")
def custom() -> Iterator[kubernetes.client.CustomObjectsApi]:
    with runner.KubeAPIRunner(server.FakeKubeAPI(seed=12, clock=lambda: 1_700_000_000.0)) as served:
        configuration = kubernetes.client.Configuration(host=served.url)
        with kubernetes.client.ApiClient(configuration) as client:
            yield kubernetes.client.CustomObjectsApi(client)


def _group(kind: str) -> str:
    return GROUPS.get(kind, labels.GROUP)


class _Scoped:
    """The CustomObjectsApi calls for a case's object: the namespaced ones when its metadata names a namespace
    (CapacityBuffer), the cluster-scoped ones otherwise."""

    def __init__(self, custom: kubernetes.client.CustomObjectsApi, namespace: str | None) -> None:
        self._custom, self._namespace = custom, namespace

    def create(self, group: str, version: str, plural: str, body: dict[str, Any]) -> Any:
        if self._namespace is None:
            return self._custom.create_cluster_custom_object(group, version, plural, body)
        return self._custom.create_namespaced_custom_object(group, version, self._namespace, plural, body)

    def patch_status(self, group: str, version: str, plural: str, name: str, body: dict[str, Any]) -> Any:
        if self._namespace is None:
            return self._custom.patch_cluster_custom_object_status(group, version, plural, name, body)
        return self._custom.patch_namespaced_custom_object_status(group, version, self._namespace, plural, name, body)

    def patch(self, group: str, version: str, plural: str, name: str, body: dict[str, Any]) -> Any:
        if self._namespace is None:
            return self._custom.patch_cluster_custom_object(group, version, plural, name, body)
        return self._custom.patch_namespaced_custom_object(group, version, self._namespace, plural, name, body)


def _admits(call: Any, *args: Any, **kwargs: Any) -> tuple[bool, Any]:
    """(True, the stored object), or (False, the Status body) when the API server answers 422."""
    try:
        return True, call(*args, **kwargs)
    except kubernetes.client.ApiException as refused:
        if refused.status != 422:  # a refusal is admission's, never a crash or a conflict
            raise
        return False, refused.body


def _at(obj: Any, path: str) -> Any:
    for part in path.split("."):
        obj = obj[part]
    return obj


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_emulated_api_server_admits_what_upstreams_does(
    case: Case, custom: kubernetes.client.CustomObjectsApi
) -> None:
    group, plural, version = _group(case.kind), PLURALS[case.kind], VERSIONS.get(case.kind, labels.VERSION)
    body = {k: v for k, v in copy.deepcopy(case.obj).items() if k != "status"}
    body["metadata"]["name"] = f"parity-{CASES.index(case)}"
    name = body["metadata"]["name"]
    api = _Scoped(custom, body["metadata"].get("namespace"))
    created, answer = _admits(api.create, group, version, plural, body)
    if case.status is not None and created:  # status is written through its subresource, as controllers do
        created, answer = _admits(api.patch_status, group, version, plural, name, {"status": case.status})
    assert created is case.admitted, answer
    for path, value in case.stored.items():
        assert _at(answer, path) == value
    if case.update is not None:
        updated, answer = _admits(api.patch, group, version, plural, name, _merge_patch(case.update))
        assert updated is case.update_admitted, answer


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_generated_crd_gives_upstreams_verdict(case: Case) -> None:
    assert crd_check.schema_verdict(copy.deepcopy(case.obj)) is case.admitted


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_parser_reads_what_upstream_stores_and_uses(case: Case) -> None:
    usable = case.admitted and case.runtime is not False
    problems: list[str] = []
    try:
        parse.any(copy.deepcopy(case.obj))
    except errors.ValidationError as refused:
        problems = [f"{p.path}: {p.message}" for p in refused.problems]
    assert not problems if usable else problems, problems or "parsed an object upstream refuses"
    if case.update is not None and case.update_admitted:
        parse.any(_apply(case.obj, case.update))


def test_a_runtime_refusal_names_the_field() -> None:
    (case,) = [c for c in CASES if c.test == "Labels should fail for invalid label keys"]
    with pytest.raises(errors.ValidationError) as refused:
        parse.any(copy.deepcopy(case.obj))
    assert [p.path for p in refused.value.problems] == ["spec.template.metadata.labels[spaces are not allowed]"]
