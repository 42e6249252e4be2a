"""Table tests for the pure layers: toleration matching, effective pod requests, workload expansion."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.api import errors, labels, meta, quantity
from karpy.scheduling import resources, taints, workloads

T = taints.Toleration
GPU_NO_SCHEDULE = meta.Taint("gpu", "NoSchedule", "true")


@pytest.mark.parametrize(
    ("toleration", "taint", "tolerated"),
    [
        (T("gpu", "Equal", "true", "NoSchedule"), GPU_NO_SCHEDULE, True),
        (T("gpu", "Equal", "false", "NoSchedule"), GPU_NO_SCHEDULE, False),  # value differs
        (T("gpu", "Equal", "true", "NoExecute"), GPU_NO_SCHEDULE, False),  # effect differs
        (T("gpu", "Equal", "true", ""), GPU_NO_SCHEDULE, True),  # empty effect matches every effect
        (T("gpu", "Exists", "", ""), GPU_NO_SCHEDULE, True),  # Exists ignores the value
        (T("other", "Exists", "", ""), GPU_NO_SCHEDULE, False),  # key differs
        (T("", "Exists", "", ""), GPU_NO_SCHEDULE, True),  # empty key + Exists tolerates everything
        (T("", "Exists", "", "NoExecute"), GPU_NO_SCHEDULE, False),  # ... of the given effect only
        (T("", "Equal", "", ""), meta.Taint("", "NoSchedule"), False),  # empty key needs Exists
        (T("soft", "Equal", "", "PreferNoSchedule"), meta.Taint("soft", "PreferNoSchedule"), True),  # empty value
        (taints.TOLERATE_PREFER_NO_SCHEDULE, meta.Taint("any", "PreferNoSchedule", "x"), True),
        (taints.TOLERATE_PREFER_NO_SCHEDULE, GPU_NO_SCHEDULE, False),
    ],
)
def test_toleration_matching(toleration: taints.Toleration, taint: meta.Taint, tolerated: bool) -> None:
    assert toleration.tolerates(taint) is tolerated


def test_untolerated_names_every_missing_taint() -> None:
    other = meta.Taint("zone", "NoExecute", "bad")
    why = taints.untolerated([GPU_NO_SCHEDULE, other], [T("gpu", "Exists")])
    assert why == "did not tolerate zone=bad:NoExecute"
    assert taints.untolerated([GPU_NO_SCHEDULE], [T("gpu", "Exists")]) is None


CPU, MEM, PODS = labels.RESOURCE_CPU, labels.RESOURCE_MEMORY, labels.RESOURCE_PODS
C = resources.Container


@pytest.mark.parametrize(
    ("containers", "init", "overhead", "expected"),
    [
        # plain sum of containers, plus one pod slot
        ([C({CPU: 100}), C({CPU: 200, MEM: 5})], [], None, {CPU: 300, MEM: 5}),
        # a limit without a request requests the limit
        ([C(limits={CPU: 500})], [], None, {CPU: 500}),
        ([C({CPU: 100}, {CPU: 500})], [], None, {CPU: 100}),
        # a big init container dominates the run phase (max, not sum)
        ([C({CPU: 100})], [C({CPU: 1000}), C({CPU: 300})], None, {CPU: 1000}),
        # init containers smaller than the run phase do not add
        ([C({CPU: 800})], [C({CPU: 500})], None, {CPU: 800}),
        # a sidecar keeps running: it adds to later init containers and to the run phase
        ([C({CPU: 100})], [C({CPU: 50}, sidecar=True), C({CPU: 300})], None, {CPU: 350}),
        ([C({CPU: 400})], [C({CPU: 50}, sidecar=True), C({CPU: 300})], None, {CPU: 450}),
        # overhead is added on top
        ([C({CPU: 100})], [], {CPU: 10, MEM: 7}, {CPU: 110, MEM: 7}),
        # extended resources pass through
        ([C({"nvidia.com/gpu": 1000})], [], None, {"nvidia.com/gpu": 1000}),
    ],
)
def test_pod_requests(
    containers: list[resources.Container],
    init: list[resources.Container],
    overhead: dict[str, int] | None,
    expected: dict[str, int],
) -> None:
    got = resources.pod_requests(containers, init, overhead=overhead)
    assert got == {**expected, PODS: quantity.MILLI}


@pytest.mark.parametrize(
    ("requests", "allocatable", "exceeded"),
    [
        ({CPU: 1000}, {CPU: 1000}, []),
        ({CPU: 1001}, {CPU: 1000}, [CPU]),
        ({"nvidia.com/gpu": 1000}, {CPU: 1000}, ["nvidia.com/gpu"]),  # missing allocatable counts as zero
        ({CPU: 0, MEM: 5}, {MEM: 5}, []),  # zero requests always fit
    ],
)
def test_exceeded(requests: dict[str, int], allocatable: dict[str, int], exceeded: list[str]) -> None:
    assert resources.exceeded(requests, allocatable) == exceeded
    assert resources.fits(requests, allocatable) is (not exceeded)


def _workload(kind: str, spec: dict[str, Any], name: str = "w") -> dict[str, Any]:
    template = {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c"}]}}
    return {"kind": kind, "metadata": {"name": name, "namespace": "ns"}, "spec": {"template": template, **spec}}


@pytest.mark.parametrize(
    ("obj", "names"),
    [
        (_workload("Deployment", {"replicas": 3}), ["w-0", "w-1", "w-2"]),
        (_workload("Deployment", {}), ["w-0"]),  # replicas default to 1
        (_workload("ReplicaSet", {"replicas": 0}), []),
        (_workload("StatefulSet", {"replicas": 2}), ["w-0", "w-1"]),
        (_workload("Job", {"parallelism": 4, "completions": 2}), ["w-0", "w-1"]),  # min(parallelism, completions)
        (_workload("Job", {"parallelism": 3}), ["w-0", "w-1", "w-2"]),
        (_workload("Job", {}), ["w-0"]),
        (_workload("DaemonSet", {}), ["w-daemon"]),
    ],
)
def test_expand_names(obj: dict[str, Any], names: list[str]) -> None:
    assert [p.name for p in workloads.expand(obj)] == names


def test_expanded_pods_carry_owner_namespace_and_labels() -> None:
    ds, dep = workloads.expand(_workload("DaemonSet", {})), workloads.expand(_workload("Deployment", {"replicas": 2}))
    assert ds[0].is_daemon
    assert [p.is_daemon for p in dep] == [False, False]
    assert {(p.namespace, p.uid, dict(p.labels)["app"]) for p in dep} == {("ns", "ns/w-0", "w"), ("ns", "ns/w-1", "w")}


def test_statefulset_claims_follow_kubernetes_naming() -> None:
    obj = _workload("StatefulSet", {"replicas": 2, "volumeClaimTemplates": [{"metadata": {"name": "data"}}]}, "db")
    assert [p.pvc_names for p in workloads.expand(obj)] == [("data-db-0",), ("data-db-1",)]


@pytest.mark.parametrize(
    ("obj", "path"),
    [
        (_workload("Deployment", {"replicas": -1}), "spec.replicas"),
        (_workload("Deployment", {"replicas": "3"}), "spec.replicas"),
        (_workload("Job", {"parallelism": True}), "spec.parallelism"),
        ({"kind": "Deployment", "metadata": {"name": "w"}, "spec": {}}, "spec.template"),
        ({"kind": "Deployment", "metadata": {}, "spec": {}}, "metadata.name"),
        ({"kind": "CronJob", "metadata": {"name": "w"}}, "kind"),
    ],
)
def test_expand_rejects_bad_input_with_the_field_path(obj: dict[str, Any], path: str) -> None:
    with pytest.raises(errors.ValidationError) as caught:
        workloads.expand(obj)
    assert path in [p.path for p in caught.value.problems]
