"""What the provisioner does with the buffers' virtual pods, and what a pass tells the buffers.

The pure rules (karpy.capacitybuffer.provisioning) on the cases of upstream's
pkg/controllers/provisioning/buffers_test.go, each naming its `It`; then the provisioner on the real cluster-state
model with the buffer controller wired as `karpy run` wires it: a buffer's room is launched without a nomination or
a pod event, and once that room is in flight the next pass launches nothing and says the buffer fits."""

from __future__ import annotations

from typing import Any

import pytest
from tests import builders
from tests.provisioning.test_with_state import _launched
from tests.scheduling.conftest import fake_catalog

from karpy import events, rejections, requirements
from karpy.api import capacitybuffer, meta, parse
from karpy.capacitybuffer import controller as capacitybuffer_controller
from karpy.capacitybuffer import provisioning
from karpy.clock import ManualClock
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.kube import client, resources
from karpy.kube import fake as kube_fake
from karpy.provisioning import provisioner
from karpy.scheduling import pods, results
from karpy.state import cluster, virtualpods

R = resources
NS = "default"


def _virtual(buffer: str, i: int, namespace: str = NS) -> pods.Pod:
    (m,) = virtualpods.manifests(
        namespace=namespace, name=buffer, uid="u", template={"spec": {"containers": [{"name": "c"}]}}, replicas=i
    )[i - 1 :]
    return pods.from_manifest(m)


def _real(name: str) -> pods.Pod:
    return pods.from_manifest(builders.pod(name))


def _claim(*placed: pods.Pod) -> results.PlannedNodeClaim:
    return results.PlannedNodeClaim("default", requirements.Requirements(), (), tuple(placed), {}, None)


def _cache(*placeholders: pods.Pod) -> virtualpods.Cache:
    cache = virtualpods.Cache()
    by: dict[str, list[pods.Pod]] = {}
    for p in placeholders:
        by.setdefault(f"{p.namespace}/{p.name.removeprefix('capacity-buffer-').rsplit('-', 1)[0]}", []).append(p)
    for key, ps in by.items():
        cache.update(key, ps)
    return cache


def test_should_bucket_virtual_pods_by_buffer_namespace_name_across_existing_and_new_nodes() -> None:
    a1, a2, b1 = _virtual("a", 1), _virtual("a", 2), _virtual("b", 1)
    plan = results.Results(new_nodeclaims=[_claim(a2, b1)], existing_nodes={"n1": [a1]})
    got = provisioning.classify(plan, _cache(a1, a2, b1).buffer_of)
    assert got == {f"{NS}/a": provisioning.Placed(1, 1, 0), f"{NS}/b": provisioning.Placed(0, 1, 0)}


def test_should_ignore_real_pods() -> None:
    plan = results.Results(new_nodeclaims=[_claim(_real("r1"))], existing_nodes={"n1": [_real("r2")]})
    assert provisioning.classify(plan, _cache().buffer_of) == {}


def test_should_distinguish_buffers_with_the_same_name_in_different_namespaces() -> None:
    x, y = _virtual("a", 1, "ns1"), _virtual("a", 1, "ns2")
    plan = results.Results(existing_nodes={"n1": [x]}, unschedulable={y.key: "no room"})
    got = provisioning.classify(plan, _cache(x, y).buffer_of)
    assert got == {"ns1/a": provisioning.Placed(existing=1), "ns2/a": provisioning.Placed(failed=1)}


def _status_buffer(*, ready: str | None = "True", replicas: int | None = 3) -> capacitybuffer.CapacityBuffer:
    conditions = () if ready is None else (meta.Condition(capacitybuffer.READY_FOR_PROVISIONING, ready),)
    return capacitybuffer.CapacityBuffer(
        meta.ObjectMeta(name="b", namespace=NS),
        capacitybuffer.CapacityBufferSpec(pod_template_ref="pt"),
        capacitybuffer.CapacityBufferStatus(replicas=replicas, conditions=conditions),
    )


@pytest.mark.parametrize(
    ("test", "buffer", "placed", "expected"),
    [
        (
            "should return True/FitsExistingCapacity when all pods fit",
            _status_buffer(),
            provisioning.Placed(3),
            ("True", "FitsExistingCapacity"),
        ),
        (
            "should return False/RequiresNewCapacity when new nodes are needed",
            _status_buffer(),
            provisioning.Placed(1, 2),
            ("False", "RequiresNewCapacity"),
        ),
        (
            "should return False/NotReadyForProvisioning when buffer is not ready",
            _status_buffer(ready="False"),
            None,
            ("False", "NotReadyForProvisioning"),
        ),
        (
            "should return False/BufferEmpty when replicas is zero",
            _status_buffer(replicas=0),
            None,
            ("False", "BufferEmpty"),
        ),
        ("should return nil when ready but no results observed", _status_buffer(), None, None),
    ],
)
def test_compute_provisioning_condition(
    test: str,
    buffer: capacitybuffer.CapacityBuffer,
    placed: provisioning.Placed | None,
    expected: tuple[str, str] | None,
) -> None:
    got = provisioning.condition(buffer, placed)
    assert (got[:2] if got is not None else None) == expected


def test_should_count_virtual_pods_per_node_on_existing_nodes_only() -> None:
    """buffers_test.go bufferPodCountsFromResults: "should count virtual pods per providerID on existing nodes",
    "should return empty map when only real pods are present"."""
    a1, a2, a3 = _virtual("a", 1), _virtual("a", 2), _virtual("a", 3)
    plan = results.Results(new_nodeclaims=[_claim(a3)], existing_nodes={"n1": [a1, a2, _real("r")], "n2": [_real("s")]})
    assert provisioning.counts_on_nodes(plan, _cache(a1, a2, a3).buffer_of) == {"n1": 2}
    assert provisioning.counts_on_nodes(results.Results(), _cache().buffer_of) == {}


# ---- the provisioner with a buffer --------------------------------------------------------------------------


def _template(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": name, "namespace": NS},
        "template": {"metadata": {"labels": {"app": name}}, "spec": builders.pod("x", cpu="1")["spec"]},
    }


def _buffer(name: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": capacitybuffer.API_VERSION,
        "kind": capacitybuffer.KIND,
        "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}", "generation": 1},
        "spec": {
            "provisioningStrategy": capacitybuffer.ACTIVE_PROVISIONING_STRATEGY,
            "podTemplateRef": {"name": "pt"},
            "replicas": replicas,
        },
    }


def _provisioning(kube: kube_fake.FakeKubeClient, name: str) -> tuple[str, str] | None:
    obj = kube.obj(R.CAPACITYBUFFERS, name, NS) or {}
    found = parse.capacitybuffer(obj).status.conditions
    c = meta.condition(found, capacitybuffer.PROVISIONING)
    return (c.status, c.reason) if c is not None else None


async def test_a_buffers_room_is_launched_then_kept_without_nominations() -> None:
    clock = ManualClock(1_700_000_000.0)
    state = cluster.Cluster(clock=clock)
    for res in (R.NODEPOOLS, R.NODECLAIMS, R.NODES, R.PODS, R.CAPACITYBUFFERS, R.PODTEMPLATES):
        state.mark_listed(res)
    kube, recorder = kube_fake.FakeKubeClient(clock), events.MemoryRecorder()
    state.apply(R.NODEPOOLS, client.WatchEvent(client.ADDED, builders.nodepool("default")))
    for res, body in ((R.PODTEMPLATES, _template("pt")), (R.CAPACITYBUFFERS, _buffer("warm", 3))):
        state.apply(res, client.WatchEvent(client.ADDED, kube.put(res, body)))
    triggered: list[str] = []
    buffers = capacitybuffer_controller.CapacityBufferController(kube, state, clock=clock, trigger=triggered.append)
    prov = provisioner.Provisioner(
        provisioner.Deps(
            client=kube,
            cluster=state,
            cloud=fake_provider.FakeCloudProvider(fake_catalog(8)),
            clock=clock,
            recorder=recorder,
            rejections=rejections.Discard(),
            buffer_pods=state.buffer_pods,
            observe_plan=buffers.observe_plan,
        )
    )
    assert await prov.provision() == provisioner.Outcome()  # nothing pending, no buffer resolved yet

    await buffers.reconcile(f"{NS}/warm")
    assert triggered == ["uid-warm"]
    state.apply(R.CAPACITYBUFFERS, client.WatchEvent(client.MODIFIED, kube.obj(R.CAPACITYBUFFERS, "warm", NS) or {}))
    first = await prov.provision()
    # the room is launched, for no real pod: no nomination, no pod event, nothing failed
    assert [c.pods for c in first.created] == [()]
    assert first.nominated == {}
    assert first.failed == {}
    assert recorder.events == []
    assert _provisioning(kube, "warm") == ("False", "RequiresNewCapacity")

    (created,) = kube.all(R.NODECLAIMS)
    name = created["metadata"]["name"]
    state.apply(R.NODECLAIMS, client.WatchEvent(client.ADDED, _launched(created)))
    state.apply(R.CAPACITYBUFFERS, client.WatchEvent(client.MODIFIED, kube.obj(R.CAPACITYBUFFERS, "warm", NS) or {}))
    second = await prov.provision()
    # kept: the in-flight claim holds the buffer's pods; it is not nominated (that would block every disruption)
    assert second.created == ()
    assert second.nominated == {}
    assert not state.is_nominated(name)
    assert state.buffer_pods_on(name) == 3
    assert _provisioning(kube, "warm") == ("True", "FitsExistingCapacity")
