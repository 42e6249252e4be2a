"""What the cluster state keeps of raw pods and nodes (module `trimming`): less than was watched, and still everything
each reader of the stored objects reads, which the table checks reader by reader against the full object."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from tests import builders
from tests.state.conftest import START, add, modify

from karpy.disruption import candidates
from karpy.kube import resources
from karpy.nodeclaim import disruption_conditions
from karpy.state import cluster, facts, trimming

R = resources
MANAGED = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {"f:containers": {}}}}]
CONTAINER_STATUS = [{"name": "app", "ready": True, "restartCount": 0, "state": {"running": {}}, "image": "pause"}]


def _full_pod(name: str, **changes: Any) -> dict[str, Any]:
    """A pod as the API server sends it: managed fields, a container status, owners, conditions, a priority."""
    pod = builders.pod(name, labels={"app": "web"}, node="node-a", cpu="500m", memory="1Gi")
    pod["metadata"].update(
        uid=f"uid-{name}",
        managedFields=copy.deepcopy(MANAGED),
        annotations={"karpenter.sh/do-not-disrupt": "true", "controller.kubernetes.io/pod-deletion-cost": "7"},
        ownerReferences=[
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "u", "controller": True}
        ],
        creationTimestamp="2023-11-14T22:13:00Z",
    )
    pod["spec"].update(priority=1000, priorityClassName="high", tolerations=[{"operator": "Exists"}])
    pod["status"] = {
        "phase": "Running",
        "startTime": "2023-11-14T22:13:20Z",
        "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": "2023-11-14T22:13:10Z"}],
        "containerStatuses": copy.deepcopy(CONTAINER_STATUS),
    }
    for path, value in changes.items():
        section, field = path.split("__")
        if value is None:
            pod[section].pop(field, None)
        else:
            pod[section][field] = value
    return pod


PODS = [
    pytest.param(_full_pod("running"), id="running"),
    pytest.param(_full_pod("terminating", metadata__deletionTimestamp="2023-11-14T23:00:00Z"), id="terminating"),
    pytest.param(_full_pod("succeeded", status__phase="Succeeded"), id="terminal"),
    pytest.param(_full_pod("unbound", spec__nodeName=None, status__conditions=[]), id="unbound"),
    pytest.param(
        _full_pod(
            "daemon",
            metadata__ownerReferences=[{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "d", "controller": True}],
        ),
        id="daemonset-pod",
    ),
    pytest.param(
        builders.unschedulable(builders.pod("pending", labels={"app": "web"})) | {"metadata": {"name": "pending"}},
        id="pending",
    ),
]


@pytest.mark.parametrize("pod", PODS)
def test_every_reader_of_a_stored_pod_reads_what_it_would_of_the_full_pod(
    state: cluster.Cluster, pod: dict[str, Any]
) -> None:
    add(state, R.PODS, pod)
    stored = state.raw(R.PODS, facts.key(pod))
    assert stored is not None
    assert "containers" not in stored.get("spec", {})  # trimmed: the parsed model holds the containers
    assert "managedFields" not in stored["metadata"]
    assert "containerStatuses" not in stored.get("status", {})
    for now in (START, START + 3600):
        assert candidates.pod_info(stored, now=now) == candidates.pod_info(pod, now=now)
    assert facts.pod_facts(stored) == facts.pod_facts(pod)
    assert facts.key(stored) == facts.key(pod)
    for later in (_full_pod("later", status__phase="Failed"), None):  # the listeners get the stored pod as "before"
        assert disruption_conditions.pod_event_time(stored, later, now=START) == disruption_conditions.pod_event_time(
            pod, later, now=START
        )
    assert [stored] == [o for o in state.objects(R.PODS)]


def test_the_parsed_pod_keeps_what_the_stored_copy_drops(state: cluster.Cluster) -> None:
    add(state, R.PODS, _full_pod("running"))
    (parsed,) = state.pods_on("node-a")
    assert parsed.requests["cpu"] == 500
    assert parsed.tolerations


def test_a_pod_that_does_not_parse_is_kept_whole(state: cluster.Cluster) -> None:
    broken = _full_pod("broken")
    broken["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "lots"}}
    add(state, R.PODS, broken)
    assert "broken" in " ".join(state.pod_errors())
    (kept,) = state.unreadable(R.PODS)
    assert kept["spec"]["containers"] == broken["spec"]["containers"]


def test_the_listeners_see_the_stored_pod_before_and_the_new_one_after(state: cluster.Cluster) -> None:
    seen: list[tuple[Any, Any]] = []
    state.add_listener(lambda res, old, new: seen.append((old, new)) if res == R.PODS else None)
    first = _full_pod("running")
    add(state, R.PODS, first)
    second = _full_pod("running", status__phase="Succeeded")
    modify(state, R.PODS, second)
    old, new = seen[-1]
    assert old == trimming.stored_pod(trimming.before_parsing(R.PODS, first))
    assert new["spec"]["containers"] == second["spec"]["containers"]  # the change itself arrives whole
    assert "managedFields" not in new["metadata"]


def test_a_node_loses_only_its_managed_fields_and_image_list(state: cluster.Cluster) -> None:
    node = builders.node("node-a", provider_id="aws:///us-east-1a/i-1", labels={"zone": "a"})
    node["metadata"]["managedFields"] = copy.deepcopy(MANAGED)
    node["status"]["images"] = [{"names": ["registry/app:1"], "sizeBytes": 1}]
    add(state, R.NODES, node)
    stored = state.node("node-a")
    assert stored is not None
    expected = copy.deepcopy(node)
    del expected["metadata"]["managedFields"]
    del expected["status"]["images"]
    assert stored == expected
    assert state.objects(R.NODES) == [stored]


def test_an_object_with_nothing_to_drop_is_stored_as_it_came() -> None:
    pod = builders.pod("p")
    assert trimming.before_parsing(R.PODS, pod) is pod
    for res, obj in ((R.NODES, builders.node("node-a")), (R.NODECLAIMS, builders.nodeclaim("c"))):
        assert trimming.before_parsing(res, obj) == obj  # a copy with shared strings (module sharing)


def _decoded_apart(obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Two copies of `obj` decoded from separate documents, as two watch events are: equal, sharing no string."""
    first, second = json.loads(json.dumps(obj)), json.loads(json.dumps(obj))
    assert next(iter(first)) is not next(iter(second))
    return first, second


@pytest.mark.parametrize(
    ("res", "obj", "key", "path"),
    [
        (R.PODS, _full_pod("running"), "default/running", ("status", "conditions", 0, "lastTransitionTime")),
        (R.NODES, builders.node("node-a", labels={"zone": "a"}), "node-a", ("metadata", "labels", "zone")),
    ],
    ids=["pod", "node"],
)
def test_objects_decoded_apart_are_stored_with_shared_strings(
    state: cluster.Cluster, res: resources.Resource, obj: dict[str, Any], key: str, path: tuple[Any, ...]
) -> None:
    first, second = _decoded_apart(obj)
    second["metadata"]["name"] = "other"
    add(state, res, first)
    add(state, res, second)
    one, other = state.raw(res, key), state.raw(res, key.rsplit("/", 1)[0] + "/other" if "/" in key else "other")
    assert one is not None
    assert other is not None
    a: Any = one
    b: Any = other
    for step in path:
        a, b = a[step], b[step]
    assert a == b
    assert a is b
    assert all(x is y for x, y in zip(one, other, strict=True))  # and so is every key
    assert all(x is y for x, y in zip(one["metadata"], other["metadata"], strict=True))
