"""What the Node finalizer must never do: drain a node nobody is deleting (or whose termination is not ours), lose
track of its NodeClaim, or go quiet about what holds it."""

from __future__ import annotations

from typing import Any

import pytest
from tests.nodeclaim import builders as nodeclaim_builders
from tests.nodeclaim import harness

from karpy.api import labels, parse
from karpy.kube import client as kube_client
from karpy.kube import resources
from karpy.termination import controller, drain

CLAIM = "default-abc12"
NODE = "ip-10-0-0-1"


async def _registered(env: harness.Env) -> dict[str, Any]:
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(CLAIM))
    await env.claims().reconcile(CLAIM)
    raw = env.claim_obj(CLAIM)
    assert raw is not None
    env.kube.put(resources.NODES, nodeclaim_builders.node_dict(NODE, provider_id=raw["status"]["providerID"]))  # type: ignore[index]
    await env.claims().reconcile(CLAIM)
    env.kube.put(resources.PODS, nodeclaim_builders.pod_dict("app"))
    node = env.kube.obj(resources.NODES, NODE)
    assert node is not None
    return node


def _drained_reason(env: harness.Env) -> str | None:
    found = parse.nodeclaim(env.claim_obj(CLAIM) or {}).condition("Drained")
    return None if found is None else found.reason


@pytest.mark.parametrize("state", ["live", "deleting-without-our-finalizer"])
async def test_a_node_that_is_not_ours_to_terminate_is_left_alone(state: str) -> None:
    env = harness.make_env()
    node = await _registered(env)
    if state != "live":
        node["metadata"]["finalizers"] = ["example.com/other"]
        await env.kube.delete(resources.NODES, NODE)
    writes = len(env.kube.writes)
    result = await env.terminator().reconcile(NODE)
    assert result is None
    assert len(env.kube.writes) == writes  # no taint, no eviction, no claim deletion
    assert len(env.cloud.instances) == 1


async def _spy_lists(env: harness.Env, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    listed: list[str] = []
    original = env.kube.list

    async def spy(res: resources.Resource, **kwargs: Any) -> Any:
        listed.append(res.plural)
        return await original(res, **kwargs)

    monkeypatch.setattr(env.kube, "list", spy)
    return listed


async def test_the_claim_is_found_by_the_nodes_owner_reference_without_a_list(monkeypatch: pytest.MonkeyPatch) -> None:
    env = harness.make_env()
    node = await _registered(env)
    assert node["metadata"]["ownerReferences"][0]["name"] == CLAIM
    listed = await _spy_lists(env, monkeypatch)
    await env.kube.delete(resources.NODES, NODE)
    await env.terminator().reconcile(NODE)
    assert _drained_reason(env) == "Draining"
    assert "nodeclaims" not in listed


@pytest.mark.parametrize(
    "owner",
    [
        {"apiVersion": "example.com/v1", "kind": "NodeClaim", "name": CLAIM},  # another group's NodeClaim
        {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": CLAIM},
        {"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": "gone"},  # names a claim that is not there
    ],
)
async def test_without_a_usable_owner_reference_the_claim_is_found_by_provider_id(owner: dict[str, str]) -> None:
    env = harness.make_env()
    node = await _registered(env)
    node["metadata"]["ownerReferences"] = [owner]
    await env.kube.delete(resources.NODES, NODE)
    await env.terminator().reconcile(NODE)
    assert _drained_reason(env) == "Draining"  # the claim was found (by a LIST) and is being reported on


async def test_two_claims_with_the_nodes_provider_id_are_ambiguous() -> None:
    env = harness.make_env()
    node = await _registered(env)
    node["metadata"].pop("ownerReferences")
    twin = env.claim_obj(CLAIM) or {}
    env.kube.put(resources.NODECLAIMS, {**twin, "metadata": {**twin["metadata"], "name": "twin"}})
    await env.kube.delete(resources.NODES, NODE)
    await env.terminator().reconcile(NODE)
    assert _drained_reason(env) is None


async def test_a_node_whose_pods_cannot_leave_says_so() -> None:
    env = harness.make_env()
    await _registered(env)
    env.kube.put(
        resources.PODS, nodeclaim_builders.pod_dict("pinned", annotations={labels.ANNOTATION_DO_NOT_DISRUPT: "true"})
    )
    await env.kube.delete(resources.NODES, NODE)
    term = env.terminator()
    for _ in range(3):
        await term.reconcile(NODE)
        env.clock.advance(controller.DRAIN_POLL)
    claim = parse.nodeclaim(env.claim_obj(CLAIM) or {})
    drained = claim.condition("Drained")
    assert drained is not None
    assert (drained.status, drained.reason, drained.message) == ("Unknown", "Draining", "Draining")
    failed = [
        (e.kind, e.name, e.type, e.reason, e.message) for e in env.recorder.events if e.reason == "FailedDraining"
    ]
    assert failed == [  # told once: upstream dedupes it by the Node's name for 2 minutes
        ("Node", NODE, "Warning", "FailedDraining", "Failed to drain node, 2 pods are waiting to be evicted")
    ]
    assert len(env.cloud.instances) == 1


async def test_awaiting_volume_detachment_is_reported_with_the_attachments() -> None:
    env = harness.make_env()
    await _registered(env)
    del env.kube.objects[("pods", "default", "app")]
    for name in ("csi-1", "csi-2"):
        env.kube.put(
            resources.VOLUMEATTACHMENTS,
            {"metadata": {"name": name}, "spec": {"nodeName": NODE, "source": {"persistentVolumeName": f"pv-{name}"}}},
        )
    await env.kube.delete(resources.NODES, NODE)
    term = env.terminator()
    for _ in range(10):
        await term.reconcile(NODE)
        env.clock.advance(controller.DRAIN_POLL)
    waiting = [
        (e.kind, e.name, e.type, e.reason, e.message)
        for e in env.recorder.events
        if e.reason == "AwaitingVolumeDetachment"
    ]
    assert waiting[-1] == (
        "Node",
        NODE,
        "Normal",
        "AwaitingVolumeDetachment",
        "Awaiting deletion of bound volumeattachments (csi-1, csi-2)",
    )
    claim = parse.nodeclaim(env.claim_obj(CLAIM) or {})
    detached = claim.condition("VolumesDetached")
    assert detached is not None
    assert (detached.status, detached.reason, detached.message) == (
        "Unknown",
        "AwaitingVolumeDetachment",
        "AwaitingVolumeDetachment",
    )
    assert len(env.cloud.instances) == 1


async def test_a_not_ready_node_whose_instance_still_runs_is_drained_not_released() -> None:
    env = harness.make_env()
    node = await _registered(env)
    node["status"]["conditions"] = [{"type": "Ready", "status": "Unknown"}]  # kubelet gone quiet; EC2 says running
    await env.kube.delete(resources.NODES, NODE)
    await env.terminator().reconcile(NODE)
    assert env.kube.obj(resources.NODES, NODE) is not None  # still held: its pods are evicted first
    assert [name for _, name, _ in env.kube.evictions] == ["app"]


async def test_a_claim_of_another_api_group_never_names_the_claim_to_delete() -> None:
    """The owner reference of another group's NodeClaim must not be read as ours, even when a NodeClaim of that
    name exists: that one belongs to another node, and deleting it would take that node down."""
    env = harness.make_env()
    node = await _registered(env)
    env.kube.put(
        resources.NODECLAIMS, nodeclaim_builders.claim_dict("bystander", status={"providerID": "fake://zone-a/i-other"})
    )
    node["metadata"]["ownerReferences"] = [{"apiVersion": "example.com/v1", "kind": "NodeClaim", "name": "bystander"}]
    await env.kube.delete(resources.NODES, NODE)
    await env.terminator().reconcile(NODE)
    bystander = env.claim_obj("bystander")
    assert bystander is not None
    assert not bystander["metadata"].get("deletionTimestamp")
    assert _drained_reason(env) == "Draining"  # its own claim was found by provider id instead


async def test_an_owner_reference_without_api_version_is_not_trusted() -> None:
    env = harness.make_env()
    node = await _registered(env)
    node["metadata"]["ownerReferences"] = [{"kind": "NodeClaim", "name": CLAIM}]
    await env.kube.delete(resources.NODES, NODE)
    await env.terminator().reconcile(NODE)
    assert _drained_reason(env) == "Draining"  # found by provider id


async def test_a_write_conflict_is_retried_soon() -> None:
    env = harness.make_env()
    await _registered(env)
    await env.kube.delete(resources.NODES, NODE)

    async def conflicting(*_: Any, **__: Any) -> Any:
        raise kube_client.Conflict(409, "Conflict", "the object has been modified")

    env.kube.patch = conflicting  # type: ignore[method-assign]
    result = await env.terminator().reconcile(NODE)
    assert result == controller.DRAIN_POLL


async def test_the_instance_is_polled_after_its_termination_starts() -> None:
    env = harness.make_env()
    await _registered(env)
    del env.kube.objects[("pods", "default", "app")]
    await env.kube.delete(resources.NODES, NODE)
    term = env.terminator()
    result = await term.reconcile(NODE)
    while env.cloud.instances:
        env.clock.advance(result or 0.0)
        result = await term.reconcile(NODE)
    assert result == controller.INSTANCE_TERMINATION_POLL  # no event will say the instance is gone


async def test_volumes_of_pods_the_drain_does_not_wait_for_do_not_block() -> None:
    env = harness.make_env()
    await _registered(env)
    del env.kube.objects[("pods", "default", "app")]
    env.kube.put(resources.PODS, nodeclaim_builders.pod_dict("a-done", phase="Succeeded", claims=["done-data"]))
    env.kube.put(
        resources.PODS,
        nodeclaim_builders.pod_dict(
            "b-stuck", deleted=nodeclaim_builders.ts(env.clock.now() - 120), claims=["stuck-data"]
        ),
    )
    for claim, volume in (("done-data", "pv-done"), ("stuck-data", "pv-stuck")):
        env.kube.put(
            resources.PVCS, {"metadata": {"name": claim, "namespace": "default"}, "spec": {"volumeName": volume}}
        )
    env.kube.put(
        resources.VOLUMEATTACHMENTS,
        {"metadata": {"name": "csi-stuck"}, "spec": {"nodeName": NODE, "source": {"persistentVolumeName": "pv-stuck"}}},
    )
    await env.kube.delete(resources.NODES, NODE)
    term = env.terminator()
    took = await harness.drive(lambda: term.reconcile(NODE), env, until=lambda: not env.cloud.instances, limit=30)
    assert took <= controller.MIN_DRAIN_TIME + controller.DRAIN_POLL


async def test_a_node_already_gone_is_done() -> None:
    env = harness.make_env()
    result = await env.terminator().reconcile("never-existed")
    assert result is None
    assert env.kube.writes == []


async def test_the_index_naming_a_claim_that_moved_to_another_instance_finds_none() -> None:
    env = harness.make_env()
    node = await _registered(env)
    node["metadata"].pop("ownerReferences")
    claim = env.claim_obj(CLAIM)
    assert claim is not None
    # Edited in place, unseen by the cache, which still has the old id: the claim itself says otherwise now.
    claim["status"]["providerID"] = "fake://zone-a/i-someone-else"
    await env.kube.delete(resources.NODES, NODE)
    await env.terminator().reconcile(NODE)
    fresh = env.claim_obj(CLAIM)
    assert fresh is not None
    assert not fresh["metadata"].get("deletionTimestamp")  # not deleted on the strength of a stale index


async def test_a_node_without_a_nodepool_label_is_counted_under_none() -> None:
    env = harness.make_env()
    node = await _registered(env)
    del env.kube.objects[("pods", "default", "app")]
    node["metadata"]["labels"].pop(labels.LABEL_NODEPOOL)
    await env.kube.delete(resources.NODES, NODE)
    term = env.terminator()
    await harness.drive(lambda: term.reconcile(NODE), env, until=lambda: env.kube.obj(resources.NODES, NODE) is None)
    assert [pool for pool, _zone in env.terminated.nodes] == [""]


async def test_a_pod_backing_off_does_not_hold_up_the_pods_after_it() -> None:
    env = harness.make_env()
    await _registered(env)
    del env.kube.objects[("pods", "default", "app")]
    env.kube.put(
        resources.PDBS,
        {
            "metadata": {"name": "db", "namespace": "default"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}},
        },
    )
    env.kube.put(resources.PODS, nodeclaim_builders.pod_dict("a-db", labels={"app": "db"}))
    await env.kube.delete(resources.NODES, NODE)
    term = env.terminator(backoff=drain.Backoff(base=10.0, cap=10.0))
    await term.reconcile(NODE)  # refused: a-db backs off for 10 s
    env.kube.put(resources.PODS, nodeclaim_builders.pod_dict("c-web"))
    env.clock.advance(1.0)
    await term.reconcile(NODE)
    assert [(name, outcome) for _, name, outcome in env.kube.evictions] == [
        ("a-db", kube_client.EvictionOutcome.BLOCKED),
        ("c-web", kube_client.EvictionOutcome.EVICTED),
    ]


async def test_conditions_written_without_a_message_have_none() -> None:
    env = harness.make_env()
    await _registered(env)
    del env.kube.objects[("pods", "default", "app")]
    await env.kube.delete(resources.NODES, NODE)
    term = env.terminator()
    await harness.drive(lambda: term.reconcile(NODE), env, until=lambda: not env.cloud.instances)
    claim = parse.nodeclaim(env.claim_obj(CLAIM) or {})
    for type_ in ("Drained", "VolumesDetached", "InstanceTerminating"):
        found = claim.condition(type_)
        assert found is not None
        assert (found.status, found.message) == ("True", "")


async def test_every_released_node_is_counted() -> None:
    env = harness.make_env()
    term = env.terminator()
    for name in ("gone-1", "gone-2"):  # NotReady, instance already gone: released at once
        env.kube.put(
            resources.NODES,
            nodeclaim_builders.node_dict(
                name, provider_id=f"fake://zone-a/i-{name}", ready=False, finalizers=[labels.FINALIZER_TERMINATION]
            ),
        )
        await env.kube.delete(resources.NODES, name)
        await term.reconcile(name)
    assert len(env.terminated.nodes) == 2
