"""CEL admission in the emulated API server: transition rules (`oldSelf`) on update, other CEL rules on create."""

from __future__ import annotations

import json

import kubernetes
import pytest
from tests import builders

from karpy.api.schema import core
from karpy_emulator.apiserver import transitions

KARPENTER = ("karpenter.sh", "v1")
NODE_CLASS_REF = ("spec", "template", "spec", "nodeClassRef")


def _refusal(error: pytest.ExceptionInfo[kubernetes.client.ApiException]) -> list[dict[str, str]]:
    assert error.value.status == 422
    body = json.loads(error.value.body)
    assert body["reason"] == "Invalid"
    causes: list[dict[str, str]] = body["details"]["causes"]
    return causes


@pytest.mark.parametrize(
    ("field", "value"), [("group", "karpenter.example.com"), ("kind", "OtherNodeClass")], ids=["group", "kind"]
)
def test_changing_the_nodeclassref_group_or_kind_of_a_nodepool_is_refused(
    custom: kubernetes.client.CustomObjectsApi, field: str, value: str
) -> None:
    custom.create_cluster_custom_object(*KARPENTER, "nodepools", builders.nodepool("np"))
    patch = {"spec": {"template": {"spec": {"nodeClassRef": {field: value}}}}}
    with pytest.raises(kubernetes.client.ApiException) as error:
        custom.patch_cluster_custom_object(*KARPENTER, "nodepools", "np", patch)
    assert _refusal(error) == [
        {
            "field": "spec.template.spec.nodeClassRef",
            "message": f"nodeClassRef.{field} is immutable",
            "reason": "FieldValueInvalid",
        }
    ]
    stored = custom.get_cluster_custom_object(*KARPENTER, "nodepools", "np")
    assert (
        stored["spec"]["template"]["spec"]["nodeClassRef"]
        == builders.nodepool()["spec"]["template"]["spec"]["nodeClassRef"]
    )


def test_a_valid_update_of_a_nodepool_is_stored(custom: kubernetes.client.CustomObjectsApi) -> None:
    custom.create_cluster_custom_object(*KARPENTER, "nodepools", builders.nodepool("np"))
    patch = {"spec": {"weight": 10, "template": {"spec": {"nodeClassRef": {"name": "other"}}}}}
    updated = custom.patch_cluster_custom_object(*KARPENTER, "nodepools", "np", patch)
    assert updated["spec"]["weight"] == 10
    assert updated["spec"]["template"]["spec"]["nodeClassRef"]["name"] == "other"


def test_a_dynamic_nodepool_cannot_become_static(custom: kubernetes.client.CustomObjectsApi) -> None:
    custom.create_cluster_custom_object(*KARPENTER, "nodepools", builders.nodepool("np"))
    with pytest.raises(kubernetes.client.ApiException) as error:
        custom.patch_cluster_custom_object(*KARPENTER, "nodepools", "np", {"spec": {"replicas": 3}})
    [cause] = _refusal(error)
    assert cause["field"] == "spec"
    assert cause["message"].startswith("Cannot transition NodePool between static (replicas set) and dynamic")


def test_a_nodepool_breaking_a_cel_rule_is_refused_at_create(custom: kubernetes.client.CustomObjectsApi) -> None:
    # Budgets' x-kubernetes-validations rule `self.all(x, has(x.schedule) == has(x.duration))`.
    bad = builders.nodepool(
        "bad", disruption={"consolidateAfter": "0s", "budgets": [{"nodes": "1", "schedule": "@daily"}]}
    )
    with pytest.raises(kubernetes.client.ApiException) as error:
        custom.create_cluster_custom_object(*KARPENTER, "nodepools", bad)
    assert _refusal(error) == [
        {
            "field": "spec.disruption.budgets",
            "message": "'schedule' must be set with 'duration'",
            "reason": "FieldValueInvalid",
        }
    ]
    with pytest.raises(kubernetes.client.ApiException):
        custom.get_cluster_custom_object(*KARPENTER, "nodepools", "bad")  # nothing was stored


# -- the checker on its own: correlation by path ------------------------------------------------------------------


def _schema(node: core.Schema) -> core.Schema:
    return core.obj({"spec": node})


_GROWS = core.Rule("self >= oldSelf", "may only grow", None)


def test_rules_run_only_on_update_and_where_the_old_value_exists() -> None:
    check = transitions.checker(_schema(core.obj({"size": core.integer(rules=(_GROWS,))})))
    assert check({"spec": {"size": 1}}, None) == []
    assert check({"spec": {"size": 1}}, {"spec": {}}) == []
    assert check({"spec": {}}, {"spec": {"size": 5}}) == []
    assert check({"spec": {"size": 6}}, {"spec": {"size": 5}}) == []
    assert [(c.field, c.message) for c in check({"spec": {"size": 4}}, {"spec": {"size": 5}})] == [
        ("spec.size", "may only grow")
    ]


def test_map_entries_correlate_by_key() -> None:
    check = transitions.checker(_schema(core.string_map(values=core.integer(rules=(_GROWS,)))))
    causes = check({"spec": {"a": 1, "b": 9, "new": 0}}, {"spec": {"a": 2, "b": 3}})
    assert [c.field for c in causes] == ["spec[a]"]


def test_only_list_type_map_items_correlate() -> None:
    item = core.obj({"name": core.string(), "size": core.integer(rules=(_GROWS,))})
    atomic = transitions.checker(_schema(core.array(item)))
    assert atomic({"spec": [{"name": "x", "size": 1}]}, {"spec": [{"name": "x", "size": 2}]}) == []
    keyed = transitions.checker(_schema({**core.array(item, list_type="map"), "x-kubernetes-list-map-keys": ["name"]}))
    old = {"spec": [{"name": "x", "size": 2}, {"name": "y", "size": 2}]}
    causes = keyed({"spec": [{"name": "y", "size": 3}, {"name": "x", "size": 1}, {"name": "z", "size": 0}]}, old)
    assert [c.field for c in causes] == ["spec[1].size"]


def test_an_evaluation_error_refuses_the_update() -> None:
    rule = core.Rule("self.group == oldSelf.group", "group is immutable", None)
    check = transitions.checker(_schema(core.obj({"group": core.string()}, rules=(rule,))))
    assert [c.message for c in check({"spec": {}}, {"spec": {"group": "g"}})] == ["group is immutable"]


_IMMUTABLE = core.Rule("self == oldSelf", "immutable", None)
# Pairs Python calls equal (1 == 1.0, [1] == [True]) but CEL does not: each must keep its own verdict.
_PAIRS = [(1, 1), (1.0, 1), (True, 1), ("1", 1), (2, 1), ([1], [1]), ([1], [True]), ({"a": 1}, {"a": 1.0})]


def _immutable_checker() -> transitions.Check:
    return transitions.checker(_schema(core.obj({"v": {"x-kubernetes-validations": [_IMMUTABLE]}})))


def test_remembered_verdicts_are_the_verdicts_of_each_exact_pair() -> None:
    fresh = [_immutable_checker()({"spec": {"v": new}}, {"spec": {"v": old}}) for new, old in _PAIRS]
    assert [c.message for causes in fresh for c in causes].count("immutable") >= 3  # the table tells them apart
    check = _immutable_checker()
    for _ in range(2):  # the second round is answered from what the first one learnt
        assert [check({"spec": {"v": new}}, {"spec": {"v": old}}) for new, old in _PAIRS] == fresh


def test_a_forgotten_verdict_is_worked_out_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(transitions, "VERDICTS_KEPT", 1)
    check = transitions.checker(_schema(core.obj({"size": core.integer(rules=(_GROWS,))})))
    for size in (4, 6, 4, 6):
        refused = [c.message for c in check({"spec": {"size": size}}, {"spec": {"size": 5}})]
        assert refused == (["may only grow"] if size < 5 else [])
