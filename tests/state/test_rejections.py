"""The cluster model never raises on an event and never hides a rejection: an object that does not parse, or
whose parser or listener raises, is reported (kind, key, reason, the field) and every other object is applied."""

from __future__ import annotations

from typing import Any

import pytest
from tests import builders

from karpy import clock, rejections
from karpy.kube import client, resources
from karpy.scheduling import pods as scheduling_pods
from karpy.state import cluster

R = resources


def _model() -> tuple[cluster.Cluster, rejections.MemorySink]:
    sink = rejections.MemorySink()
    return cluster.Cluster(clock=clock.ManualClock(0.0), rejections=sink), sink


def _apply(model: cluster.Cluster, res: resources.Resource, obj: dict[str, Any], kind: str = client.ADDED) -> None:
    model.apply(res, client.WatchEvent(kind, obj))


def _bad_pod(name: str, node: str = "") -> dict[str, Any]:
    body = builders.unschedulable(builders.pod(name, node=node))
    body["spec"]["containers"][0]["resources"]["requests"]["cpu"] = [1]
    return body


def test_a_pod_that_does_not_parse_is_reported_with_its_field_and_held_on_its_node() -> None:
    model, sink = _model()
    _apply(model, R.PODS, _bad_pod("bad", node="n1"))
    _apply(model, R.PODS, builders.unschedulable(builders.pod("good")))
    assert [p.name for p in model.pending_pods()] == ["good"]
    (report,) = sink.reports
    assert (report.kind, report.key, report.reason) == ("Pod", "default/bad", rejections.Reason.INVALID)
    assert "spec.containers[0].resources.requests[cpu]: must be a quantity" in report.problem
    _apply(model, R.NODES, builders.node("n1"))
    (node,) = model.state_nodes()
    assert node.unreadable_pods == ("default/bad",)


def test_a_fixed_or_deleted_pod_is_accepted_again_and_leaves_its_node() -> None:
    model, sink = _model()
    _apply(model, R.NODES, builders.node("n1"))
    _apply(model, R.PODS, _bad_pod("bad", node="n1"))
    _apply(model, R.PODS, builders.pod("bad", node="n1"), client.MODIFIED)
    assert ("Pod", "default/bad") in sink.accepted
    (node,) = model.state_nodes()
    assert node.unreadable_pods == ()
    assert [p.name for p in node.pods] == ["bad"]
    _apply(model, R.PODS, _bad_pod("bad", node="n1"), client.MODIFIED)
    _apply(model, R.PODS, _bad_pod("bad", node="n1"), client.DELETED)
    (node,) = model.state_nodes()
    assert node.unreadable_pods == ()


def test_a_parser_that_raises_is_a_reported_bug_not_a_stopped_informer(monkeypatch: pytest.MonkeyPatch) -> None:
    model, sink = _model()
    real = scheduling_pods.from_manifest

    def broken(obj: Any, **kwargs: Any) -> Any:
        if obj["metadata"]["name"] == "odd":
            raise RecursionError("a shape no one foresaw")
        return real(obj, **kwargs)

    monkeypatch.setattr(scheduling_pods, "from_manifest", broken)
    _apply(model, R.PODS, builders.unschedulable(builders.pod("odd")))
    _apply(model, R.PODS, builders.unschedulable(builders.pod("fine")))
    assert [p.name for p in model.pending_pods()] == ["fine"]
    assert [(r.key, r.reason) for r in sink.reports] == [("default/odd", rejections.Reason.HANDLING_FAILED)]
    assert model.pod_errors() == {"default/odd": "RecursionError: a shape no one foresaw"}


def test_a_listener_that_raises_does_not_stop_the_event() -> None:
    model, sink = _model()
    seen: list[str] = []

    def broken(res: resources.Resource, before: Any, after: Any) -> None:
        raise KeyError("listener bug")

    model.add_listener(broken)
    model.add_listener(lambda res, before, after: seen.append(res.kind))
    _apply(model, R.NODES, builders.node("n1"))
    assert seen == ["Node"], "the listeners after it still ran"
    assert [r.reason for r in sink.reports] == [rejections.Reason.HANDLING_FAILED]
    assert model.node("n1") is not None


@pytest.mark.parametrize(
    ("res", "obj", "field"),
    [
        (R.NODEPOOLS, builders.nodepool("p", template={"spec": {"requirements": 5}}), "spec.template"),
        (R.NODECLAIMS, {**builders.nodeclaim("c"), "spec": []}, "spec"),
        (
            R.PVS,
            {
                "metadata": {"name": "pv"},
                "spec": {
                    "nodeAffinity": {
                        "required": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "Near"}]}]}
                    }
                },
            },
            "nodeSelectorTerms[0]",
        ),
    ],
    ids=["NodePool", "NodeClaim", "PersistentVolume"],
)
def test_every_parsed_kind_reports_what_does_not_parse(
    res: resources.Resource, obj: dict[str, Any], field: str
) -> None:
    model, sink = _model()
    _apply(model, res, obj)
    (report,) = sink.reports
    assert report.kind == res.kind
    assert field in report.problem
    assert [u["metadata"]["name"] for u in model.unreadable(res)] == ([obj["metadata"]["name"]] if res != R.PVS else [])


def test_a_core_object_of_the_wrong_shape_is_kept_out_of_every_view() -> None:
    """No API server stores `status.conditions: 5` on a Node, but a cache must survive one: every reader of raw
    Nodes (budgets, state nodes, metrics) would trip on it. Fields a newer Kubernetes adds are fine."""
    model, sink = _model()
    odd = builders.node("odd")
    odd["status"] = {"conditions": 5, "allocatable": "x"}
    newer = builders.node("newer")
    newer["spec"]["fieldFromTheFuture"] = {"a": 1}
    _apply(model, R.NODES, odd)
    _apply(model, R.NODES, newer)
    assert [n.name for n in model.state_nodes()] == ["newer"]
    assert model.node("odd") is None
    assert [u["metadata"]["name"] for u in model.unreadable(R.NODES)] == ["odd"]
    (report,) = sink.reports
    assert "status.conditions: must be a list" in report.problem
    assert "status.allocatable: must be an object" in report.problem
    _apply(model, R.NODES, builders.node("odd"), client.MODIFIED)  # fixed: back in every view
    assert [n.name for n in model.state_nodes()] == ["newer", "odd"]
    assert model.unreadable(R.NODES) == []


def _wrong_shape(model: cluster.Cluster) -> list[str]:
    return [u["metadata"]["name"] for u in model.unreadable(R.PODS)]


def test_a_pod_status_write_of_a_wrong_type_is_refused() -> None:
    """A status write after a clean read of the pod: the wrong-typed status is refused, naming the field."""
    model, sink = _model()
    pod = builders.pod("p", node="n1")
    _apply(model, R.PODS, pod)
    pod["status"] = {"phase": "Running"}
    _apply(model, R.PODS, pod, client.MODIFIED)
    assert _wrong_shape(model) == []
    pod["status"] = {"conditions": 5}
    _apply(model, R.PODS, pod, client.MODIFIED)
    assert _wrong_shape(model) == ["p"]
    (report,) = sink.reports
    assert "status.conditions: must be a list" in report.problem


def test_a_changed_pod_spec_is_read_again() -> None:
    """A spec that changes (an update of the main resource) is read whole: a wrong-typed field of it is refused."""
    model, sink = _model()
    pod = builders.pod("p", node="n1")
    _apply(model, R.PODS, pod)
    pod["spec"]["tolerations"] = "all"
    _apply(model, R.PODS, pod, client.MODIFIED)
    assert _wrong_shape(model) == ["p"]
    (report,) = sink.reports
    assert "spec.tolerations: must be a list" in report.problem
    pod["spec"]["tolerations"] = []
    _apply(model, R.PODS, pod, client.MODIFIED)  # fixed, then a wrong-typed spec again after a clean read
    pod["spec"]["nodeName"] = 5
    _apply(model, R.PODS, pod, client.MODIFIED)
    assert _wrong_shape(model) == ["p"]
    assert "spec.nodeName" in sink.reports[-1].problem


def test_a_recreated_pod_is_read_whole() -> None:
    model, _ = _model()
    pod = builders.pod("p", node="n1")
    _apply(model, R.PODS, pod)
    _apply(model, R.PODS, pod, client.DELETED)
    pod["spec"]["tolerations"] = "all"
    _apply(model, R.PODS, pod)
    assert _wrong_shape(model) == ["p"]
