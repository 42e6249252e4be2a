"""The CapacityBuffer controller against the emulated API server (karpy.capacitybuffer.controller), on the cases of
upstream's pkg/controllers/capacitybuffer/suite_test.go ("CapacityBuffer Controller"), each naming its `It`: the
pod template resolved from a PodTemplate (state cache) or a Deployment/StatefulSet (read from the API server), the
status written (ReadyForProvisioning, replicas, podTemplateRef, provisioningStrategy), the virtual pods put into
the state cache and the provisioner triggered."""

from __future__ import annotations

from typing import Any

import pytest

from karpy import clock
from karpy.api import capacitybuffer
from karpy.capacitybuffer import controller as capacitybuffer_controller
from karpy.kube import client as kube_client
from karpy.kube import resources, rest
from karpy.state import cluster, virtualpods

NS = "default"
STRATEGY = capacitybuffer.ACTIVE_PROVISIONING_STRATEGY


def _template(labels: dict[str, str], cpu: str = "1", memory: str = "1Gi") -> dict[str, Any]:
    requests = {"cpu": cpu, "memory": memory} if memory else {"cpu": cpu}
    return {
        "metadata": {"labels": labels},
        "spec": {"containers": [{"name": "app", "image": "pause:latest", "resources": {"requests": requests}}]},
    }


def _pod_template(name: str, **kw: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": NS},
        "template": _template({"app": name}, **kw),
    }


def _workload(kind: str, name: str, replicas: int | None, cpu: str = "500m") -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": {"matchLabels": {"app": name}}, "template": _template({"app": name}, cpu, "")}
    if kind == "StatefulSet":
        spec["serviceName"] = name
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": NS}, "spec": spec}


def _buffer(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": capacitybuffer.API_VERSION,
        "kind": capacitybuffer.KIND,
        "metadata": {"name": name, "namespace": NS},
        "spec": {"provisioningStrategy": STRATEGY, **spec},
    }


class Harness:
    def __init__(self, api: rest.RestClient) -> None:
        self.api = api
        self.now = clock.ManualClock(1000.0)
        self.cache = cluster.Cluster(clock=self.now)
        self.triggered: list[str] = []
        self.controller = capacitybuffer_controller.CapacityBufferController(
            api, self.cache, clock=self.now, trigger=self.triggered.append
        )

    async def create(self, res: resources.Resource, body: dict[str, Any]) -> dict[str, Any]:
        made = await self.api.create(res, body)
        self.cache.apply(res, kube_client.WatchEvent(kube_client.ADDED, made))
        return made

    async def refresh(self, name: str) -> dict[str, Any]:
        """The buffer as the API server has it now, fed back into the cache as its watch would."""
        got = await self.api.get(resources.CAPACITYBUFFERS, name, namespace=NS)
        assert got is not None
        self.cache.apply(resources.CAPACITYBUFFERS, kube_client.WatchEvent(kube_client.MODIFIED, got))
        return got

    async def reconcile(self, name: str) -> dict[str, Any]:
        assert await self.controller.reconcile(f"{NS}/{name}") == capacitybuffer_controller.RESYNC
        return await self.refresh(name)


def ready(obj: dict[str, Any]) -> tuple[str, str]:
    (c,) = [c for c in obj["status"]["conditions"] if c["type"] == capacitybuffer.READY_FOR_PROVISIONING]
    return c["status"], c["reason"]


@pytest.fixture
def h(api: rest.RestClient) -> Harness:
    return Harness(api)


async def test_should_resolve_a_podtemplate_and_set_ready_for_provisioning_true(h: Harness) -> None:
    await h.create(resources.PODTEMPLATES, _pod_template("test-template"))
    made = await h.create(
        resources.CAPACITYBUFFERS, _buffer("test-buffer", podTemplateRef={"name": "test-template"}, replicas=5)
    )
    got = await h.reconcile("test-buffer")
    assert ready(got) == ("True", "Resolved")
    assert got["status"]["podTemplateRef"] == {"name": "test-template"}
    assert got["status"]["replicas"] == 5
    assert got["status"]["provisioningStrategy"] == STRATEGY
    # the virtual pods (pkg/state/virtualpods: "should populate the cache after a successful reconcile")
    placeholders = h.cache.buffer_pods()
    assert [p.name for p in placeholders] == [f"capacity-buffer-test-buffer-{i}" for i in range(1, 6)]
    assert all(virtualpods.is_virtual(p) and p.requests["cpu"] == 1000 for p in placeholders)
    assert dict(placeholders[0].labels) == {"app": "test-template"}
    assert h.cache.virtual_pods.buffer_of(placeholders[0].key) == f"{NS}/test-buffer"
    # "should trigger the provisioner after a successful reconcile"
    assert h.triggered == [made["metadata"]["uid"]]


async def test_should_set_ready_for_provisioning_false_when_podtemplate_is_not_found(h: Harness) -> None:
    await h.create(
        resources.CAPACITYBUFFERS, _buffer("test-buffer-missing", podTemplateRef={"name": "nonexistent"}, replicas=3)
    )
    got = await h.reconcile("test-buffer-missing")
    assert ready(got) == ("False", "PodTemplateNotFound")
    # "should NOT trigger the provisioner when resolution fails"; no virtual pods
    assert h.triggered == []
    assert h.cache.buffer_pods() == []


async def test_should_resolve_a_deployment_and_calculate_percentage_based_replicas(h: Harness) -> None:
    await h.api.create(resources.DEPLOYMENTS, _workload("Deployment", "my-app", 10))
    await h.create(
        resources.CAPACITYBUFFERS,
        _buffer(
            "test-buffer-scalable",
            scalableRef={"apiGroup": "apps", "kind": "Deployment", "name": "my-app"},
            percentage=20,
        ),
    )
    got = await h.reconcile("test-buffer-scalable")
    assert ready(got) == ("True", "Resolved")
    assert got["status"]["replicas"] == 2  # 20 % of 10
    assert "podTemplateRef" not in got["status"]  # a scalableRef sets no podTemplateRef in status
    assert len(h.cache.buffer_pods()) == 2


async def test_should_set_ready_for_provisioning_false_when_scalable_ref_is_not_found(h: Harness) -> None:
    await h.create(
        resources.CAPACITYBUFFERS,
        _buffer(
            "test-buffer-missing-ref",
            scalableRef={"apiGroup": "apps", "kind": "Deployment", "name": "nonexistent"},
            replicas=3,
        ),
    )
    assert ready(await h.reconcile("test-buffer-missing-ref")) == ("False", "ScalableRefNotFound")


async def test_should_resolve_a_statefulset(h: Harness) -> None:
    await h.api.create(resources.STATEFULSETS, _workload("StatefulSet", "my-sts", 5))
    await h.create(
        resources.CAPACITYBUFFERS,
        _buffer(
            "test-buffer-sts", scalableRef={"apiGroup": "apps", "kind": "StatefulSet", "name": "my-sts"}, percentage=20
        ),
    )
    got = await h.reconcile("test-buffer-sts")
    assert (ready(got), got["status"]["replicas"]) == (("True", "Resolved"), 1)  # 20 % of 5, rounded up


@pytest.mark.parametrize(
    ("test", "ref", "message"),
    [
        (
            "should return error for unsupported kind",
            {"apiGroup": "apps", "kind": "Job", "name": "j"},
            'unsupported kind "Job"',
        ),
        (
            "should return error for unsupported API group",
            {"apiGroup": "batch", "kind": "Deployment", "name": "d"},
            'unsupported scalableRef API group "batch"',
        ),
    ],
)
async def test_unsupported_scalable_refs(h: Harness, test: str, ref: dict[str, str], message: str) -> None:
    # Upstream also fails the reconcile (retried with backoff); karpy says so on the condition and retries at RESYNC.
    await h.create(resources.CAPACITYBUFFERS, _buffer("bad", scalableRef=ref, percentage=20))
    got = await h.reconcile("bad")
    assert ready(got) == ("False", "ResolutionFailed")
    (c,) = got["status"]["conditions"]
    assert c["message"] == message
    assert h.triggered == []


async def test_should_default_to_1_replica_when_workload_has_nil_spec_replicas(h: Harness) -> None:
    await h.api.create(resources.DEPLOYMENTS, _workload("Deployment", "nil-replicas-app", None))
    await h.create(
        resources.CAPACITYBUFFERS,
        _buffer(
            "nil", scalableRef={"apiGroup": "apps", "kind": "Deployment", "name": "nil-replicas-app"}, percentage=100
        ),
    )
    assert (await h.reconcile("nil"))["status"]["replicas"] == 1


@pytest.mark.parametrize(
    ("test", "spec", "expected"),
    [
        ("fixed replicas only", {"replicas": 7}, 7),
        ("replicas capped by binding limit", {"replicas": 10, "limits": {"cpu": "3"}}, 3),
        ("non-binding limit does not reduce (podTemplateRef)", {"replicas": 3, "limits": {"cpu": "10"}}, 3),
        ("limits only", {"limits": {"cpu": "5"}}, 5),
    ],
)
async def test_replica_calculation(h: Harness, test: str, spec: dict[str, Any], expected: int) -> None:
    """suite_test.go "should resolve buffer replicas from replicas, percentage, and limits", its podTemplateRef
    entries (a 1-CPU pod)."""
    await h.create(resources.PODTEMPLATES, _pod_template("pt"))
    await h.create(resources.CAPACITYBUFFERS, _buffer("cb", podTemplateRef={"name": "pt"}, **spec))
    assert (await h.reconcile("cb"))["status"]["replicas"] == expected


async def test_should_evict_the_cache_entry_when_the_buffer_is_deleted(h: Harness) -> None:
    await h.create(resources.PODTEMPLATES, _pod_template("pt"))
    made = await h.create(resources.CAPACITYBUFFERS, _buffer("cb", podTemplateRef={"name": "pt"}, replicas=2))
    await h.reconcile("cb")
    assert len(h.cache.buffer_pods()) == 2
    await h.api.delete(resources.CAPACITYBUFFERS, "cb", namespace=NS)
    h.cache.apply(resources.CAPACITYBUFFERS, kube_client.WatchEvent(kube_client.DELETED, made))
    assert await h.controller.reconcile(f"{NS}/cb") is None
    assert h.cache.buffer_pods() == []


async def test_should_remove_the_cache_entry_when_resolution_fails_with_not_found(h: Harness) -> None:
    pt = await h.create(resources.PODTEMPLATES, _pod_template("pt"))
    await h.create(resources.CAPACITYBUFFERS, _buffer("cb", podTemplateRef={"name": "pt"}, replicas=2))
    await h.reconcile("cb")
    h.cache.apply(resources.PODTEMPLATES, kube_client.WatchEvent(kube_client.DELETED, pt))
    assert ready(await h.reconcile("cb")) == ("False", "PodTemplateNotFound")
    assert h.cache.buffer_pods() == []


async def test_a_second_reconcile_of_an_unchanged_buffer_writes_nothing(h: Harness) -> None:
    await h.create(resources.PODTEMPLATES, _pod_template("pt"))
    await h.create(resources.CAPACITYBUFFERS, _buffer("cb", podTemplateRef={"name": "pt"}, replicas=2))
    version = (await h.reconcile("cb"))["metadata"]["resourceVersion"]
    h.now.advance(60)
    assert (await h.reconcile("cb"))["metadata"]["resourceVersion"] == version


async def test_should_re_resolve_the_template_when_its_generation_changes(h: Harness) -> None:
    """suite_test.go "PodTemplate watch": a changed PodTemplate queues the buffers that name it, and only them
    (podTemplateToBuffers: "should return multiple requests ...", "should ignore buffers with nil podTemplateRef")."""
    queued: list[str] = []
    h.cache.add_listener(h.controller.listener(queued.append))
    await h.api.create(resources.DEPLOYMENTS, _workload("Deployment", "d", 1))
    await h.create(resources.CAPACITYBUFFERS, _buffer("a", podTemplateRef={"name": "pt"}, replicas=1))
    await h.create(resources.CAPACITYBUFFERS, _buffer("b", podTemplateRef={"name": "pt"}, replicas=1))
    await h.create(resources.CAPACITYBUFFERS, _buffer("other", podTemplateRef={"name": "elsewhere"}, replicas=1))
    await h.create(
        resources.CAPACITYBUFFERS, _buffer("scalable", scalableRef={"kind": "Deployment", "name": "d"}, replicas=1)
    )
    queued.clear()
    await h.create(resources.PODTEMPLATES, _pod_template("pt", cpu="2"))
    assert sorted(queued) == [f"{NS}/a", f"{NS}/b"]
    await h.reconcile("a")
    assert h.cache.buffer_pods()[0].requests["cpu"] == 2000
