"""A CapacityBuffer's size and status (karpy.capacitybuffer.sizing), on the cases of upstream's
pkg/controllers/capacitybuffer/helpers_test.go ("Helpers"), each naming its `It`. The pod requests those cases
feed in come from karpy's own pod parser (scheduling.pods), so its init-container and sidecar rules are checked
against upstream's RequestsForSpec cases too."""

from __future__ import annotations

from typing import Any

import pytest

from karpy.api import capacitybuffer, meta
from karpy.capacitybuffer import sizing
from karpy.scheduling import pods

GI = 1024**3 * 1000  # milli-units


def _c(cpu: str = "", memory: str = "", *, sidecar: bool = False) -> dict[str, Any]:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
    container: dict[str, Any] = {"name": "c", "image": "x", "resources": {"requests": requests} if requests else {}}
    if sidecar:
        container["restartPolicy"] = "Always"
    return container


def requests(containers: list[dict[str, Any]], init: list[dict[str, Any]] = ()) -> dict[str, int]:  # type: ignore[assignment]
    spec: dict[str, Any] = {"containers": containers}
    if init:
        spec["initContainers"] = list(init)
    pod = pods.from_manifest({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
    return {k: v for k, v in pod.requests.items() if v and k in ("cpu", "memory")}


LIMIT_CASES = [
    ("should calculate replicas based on CPU limits", {"cpu": 4000}, [_c("1")], [], 4),
    ("should calculate replicas based on memory limits", {"memory": 2 * GI}, [_c(memory="512Mi")], [], 4),
    ("should take the minimum across multiple resources", {"cpu": 8000, "memory": 4 * GI}, [_c("1", "1Gi")], [], 4),
    ("should sum requests across multiple containers", {"cpu": 3000}, [_c("500m"), _c("500m")], [], 3),
    ("should use init container max if larger than sum of containers", {"cpu": 8000}, [_c("1")], [_c("4")], 2),
    ("should use container sum if larger than init containers", {"cpu": 6000}, [_c("2")], [_c("500m")], 3),
    ("should return false when pod has no resource requests", {"cpu": 4000}, [_c()], [], None),
    ("should return false when no limit resources match pod requests", {"memory": 4 * GI}, [_c("1")], [], None),
    ("should floor divide (no rounding up)", {"cpu": 10000}, [_c("3")], [], 3),
    ("should handle millicore-level precision", {"cpu": 1000}, [_c("250m")], [], 4),
    ("should return 0 when limit is smaller than a single pod request", {"cpu": 1000}, [_c("2")], [], 0),
]


@pytest.mark.parametrize(
    ("test", "limits", "containers", "init", "expected"), LIMIT_CASES, ids=[c[0] for c in LIMIT_CASES]
)
def test_calculate_limit_replicas(
    test: str, limits: dict[str, int], containers: list[Any], init: list[Any], expected: int | None
) -> None:
    assert sizing.limit_replicas(limits, requests(containers, init)) == expected


TOTAL_CASES = [
    ("should sum requests from all containers", [_c("1", "512Mi"), _c("500m", "256Mi")], [], 1500, 768 * 1024**2),
    ("should take max of init containers vs regular containers", [_c("1")], [_c("4"), _c("2")], 4000, None),
    ("should return empty list for pod with no requests", [_c()], [], None, None),
    ("should handle mixed resources across containers", [_c("1"), _c(memory="1Gi")], [], 1000, 1024**3),
    ("should sum sidecar init containers with regular containers", [_c("1")], [_c("500m", sidecar=True)], 1500, None),
    (
        "should sum multiple sidecar init containers with regular containers",
        [_c("1")],
        [_c("500m", sidecar=True), _c("200m", sidecar=True)],
        1700,
        None,
    ),
    (
        "should use max of regular init container + preceding sidecars vs running total",
        [_c("1")],
        [_c("500m", sidecar=True), _c("4")],
        4500,
        None,
    ),
    ("should handle sidecar after regular init container", [_c("1")], [_c("4"), _c("500m", sidecar=True)], 4000, None),
    ("should not treat init containers without restartPolicy as sidecars", [_c("1")], [_c("2")], 2000, None),
]


@pytest.mark.parametrize(("test", "containers", "init", "cpu", "memory"), TOTAL_CASES, ids=[c[0] for c in TOTAL_CASES])
def test_total_pod_requests(
    test: str, containers: list[Any], init: list[Any], cpu: int | None, memory: int | None
) -> None:
    found = requests(containers, init)
    assert found.get("cpu") == cpu
    assert found.get("memory") == (memory * 1000 if memory is not None else None)


PERCENTAGE_CASES = [
    ("should calculate percentage and ceil", 10, 20, 2),
    ("should ceil fractional results", 3, 10, 1),
    ("should return at least 1 when percentage > 0 and replicas > 0", 1, 1, 1),
    ("should return 0 when scalable has 0 replicas", 0, 50, 0),
    ("should return 0 when percentage is 0", 10, 0, 0),
    ("should handle 100 percent", 5, 100, 5),
    ("should handle large percentages (>100)", 5, 200, 10),
    ("should handle large replica counts", 1000, 10, 100),
]


@pytest.mark.parametrize(
    ("test", "scalable", "percentage", "expected"), PERCENTAGE_CASES, ids=[c[0] for c in PERCENTAGE_CASES]
)
def test_calculate_percentage_replicas(test: str, scalable: int, percentage: int, expected: int) -> None:
    assert sizing.percentage_replicas(scalable, percentage) == expected


def _buffer(generation: int = 0, **spec: Any) -> capacitybuffer.CapacityBuffer:
    return capacitybuffer.CapacityBuffer(
        metadata=meta.ObjectMeta(name="b", namespace="default", generation=generation),
        spec=capacitybuffer.CapacityBufferSpec(**spec),
    )


def test_replicas_take_the_larger_of_replicas_and_percentage_capped_by_limits() -> None:
    # controller.go computeReplicas: max(replicas, percentage), then min with what the limits fit; limits alone
    scalable = capacitybuffer.ScalableRef(kind="Deployment", name="web", api_group="apps")
    chunk = {"cpu": 1000}
    both = capacitybuffer.CapacityBufferSpec(scalable_ref=scalable, replicas=2, percentage=50)
    assert sizing.replicas(both, chunk, scalable_replicas=10) == 5
    capped = capacitybuffer.CapacityBufferSpec(scalable_ref=scalable, replicas=2, percentage=50, limits={"cpu": 3000})
    assert sizing.replicas(capped, chunk, scalable_replicas=10) == 3
    alone = capacitybuffer.CapacityBufferSpec(pod_template_ref="t", limits={"cpu": 3500})
    assert sizing.replicas(alone, chunk, scalable_replicas=None) == 3
    unmatched = capacitybuffer.CapacityBufferSpec(pod_template_ref="t", replicas=4, limits={"memory": 1})
    assert sizing.replicas(unmatched, chunk, scalable_replicas=None) == 4


def test_set_condition_cases_through_the_status() -> None:
    # helpers_test.go "SetCondition": add, update in place, several types, observed generation
    buffer = _buffer(generation=7, pod_template_ref="t", replicas=3)
    missing = sizing.resolved_status(
        buffer, sizing.Resolution(error='podtemplates "t" not found', not_found=True), now=10.0
    )
    (cond,) = missing.conditions
    assert (cond.type, cond.status, cond.reason, cond.message, cond.observed_generation) == (
        capacitybuffer.READY_FOR_PROVISIONING,
        "False",
        sizing.REASON_POD_TEMPLATE_NOT_FOUND,
        'podtemplates "t" not found',
        7,
    )
    assert missing.replicas is None
    found = sizing.resolved_status(
        capacitybuffer.CapacityBuffer(buffer.metadata, buffer.spec, missing),
        sizing.Resolution(requests={"cpu": 1000}, pod_template="t", pod_template_generation=2),
        now=20.0,
    )
    (cond,) = found.conditions
    assert (cond.status, cond.reason, cond.message, cond.last_transition_time) == (
        "True",
        sizing.REASON_RESOLVED,
        sizing.RESOLVED_MESSAGE,
        20.0,
    )
    assert (found.replicas, found.pod_template_ref, found.pod_template_generation) == (3, "t", 2)
    other = meta.Condition(type=capacitybuffer.PROVISIONING, status="True", reason="RequiresNewCapacity")
    kept = sizing.resolved_status(
        capacitybuffer.CapacityBuffer(
            buffer.metadata, buffer.spec, capacitybuffer.CapacityBufferStatus(conditions=(other,))
        ),
        sizing.Resolution(requests={"cpu": 1000}, pod_template="t"),
        now=30.0,
    )
    assert [c.type for c in kept.conditions] == [capacitybuffer.PROVISIONING, capacitybuffer.READY_FOR_PROVISIONING]


def test_a_buffer_without_a_reference_or_with_a_missing_workload_is_not_ready() -> None:
    (cond,) = sizing.resolved_status(_buffer(replicas=1), sizing.Resolution(), now=0.0).conditions
    assert (cond.status, cond.reason, cond.message) == ("False", sizing.REASON_RESOLUTION_FAILED, sizing.NO_REF_MESSAGE)
    scalable = capacitybuffer.ScalableRef(kind="Deployment", name="web", api_group="apps")
    gone = sizing.resolved_status(
        _buffer(scalable_ref=scalable), sizing.Resolution(error="not found", not_found=True), now=0.0
    )
    assert gone.conditions[0].reason == sizing.REASON_SCALABLE_REF_NOT_FOUND
    failed = sizing.resolved_status(_buffer(scalable_ref=scalable), sizing.Resolution(error="boom"), now=0.0)
    assert failed.conditions[0].reason == sizing.REASON_RESOLUTION_FAILED
    percent = sizing.resolved_status(
        _buffer(scalable_ref=scalable, percentage=20),
        sizing.Resolution(requests={"cpu": 500}, scalable_replicas=10),
        now=0.0,
    )
    assert (percent.replicas, percent.pod_template_ref) == (2, None)
