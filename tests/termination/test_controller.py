"""Scenario tests of the Node finalizer: cordon, tiered drain under PDBs, do-not-disrupt until TGP, volumes,
instance termination, release — on the in-memory KubeClient with the fake provider and a ManualClock."""

from __future__ import annotations

from typing import Any

import pytest
from tests import builders
from tests.nodeclaim import builders as nodeclaim_builders
from tests.nodeclaim import harness

from karpy.api import labels, parse
from karpy.kube import client, fake, resources
from karpy.termination import controller, drain

CLAIM = "default-abc12"
NODE = "ip-10-0-0-1"


def _pod_deletes(env: harness.Env) -> list[str]:
    """The pods deleted (not evicted) so far, by name."""
    return [w.name for w in env.kube.writes if w.plural == "pods" and w.verb == "delete"]


def _terminator(env: harness.Env) -> controller.TerminationController:
    return env.terminator()


async def _registered(env: harness.Env, *, tgp: str | None = None) -> None:
    """A launched, registered, initialized NodeClaim with its Node, through the lifecycle reconciler itself."""
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(CLAIM, termination_grace_period=tgp))
    claims = env.claims()
    await claims.reconcile(CLAIM)
    raw = env.claim_obj(CLAIM)
    assert raw is not None
    env.kube.put(resources.NODES, nodeclaim_builders.node_dict(NODE, provider_id=raw["status"]["providerID"]))  # type: ignore[index]
    await claims.reconcile(CLAIM)
    node = env.kube.obj(resources.NODES, NODE)
    assert node is not None
    assert node["metadata"]["finalizers"] == [labels.FINALIZER_TERMINATION]


def _pods(env: harness.Env) -> list[str]:
    return sorted(p["metadata"]["name"] for p in env.kube.all(resources.PODS))


def _condition(env: harness.Env, type_: str) -> tuple[str, str] | None:
    raw = env.claim_obj(CLAIM)
    assert raw is not None
    found = parse.nodeclaim(raw).condition(type_)
    return None if found is None else (found.status, found.reason)


async def _delete_node(env: harness.Env) -> None:
    await env.kube.delete(resources.NODES, NODE)


def _node_gone(env: harness.Env) -> bool:
    return env.kube.obj(resources.NODES, NODE) is None


async def test_full_termination_in_tier_order() -> None:
    env = harness.make_env()
    await _registered(env)
    for pod in (
        nodeclaim_builders.pod_dict(
            "crit-ds", owners=[nodeclaim_builders.DAEMONSET_OWNER], priorityClassName="system-node-critical"
        ),
        nodeclaim_builders.pod_dict("crit", priorityClassName="system-cluster-critical"),
        nodeclaim_builders.pod_dict("ds", owners=[nodeclaim_builders.DAEMONSET_OWNER]),
        nodeclaim_builders.pod_dict("app-1"),
        nodeclaim_builders.pod_dict("app-2"),
        nodeclaim_builders.pod_dict("mirror", owners=[nodeclaim_builders.MIRROR_OWNER]),
        nodeclaim_builders.pod_dict(
            "tolerant", tolerations=[{"key": labels.TAINT_DISRUPTED_KEY, "operator": "Exists"}]
        ),
        nodeclaim_builders.pod_dict("done", phase="Succeeded"),
        nodeclaim_builders.pod_dict("elsewhere", node="other-node"),
    ):
        env.kube.put(resources.PODS, pod)
    await _delete_node(env)
    term = _terminator(env)

    await term.reconcile(NODE)
    assert [name for _, name, _ in env.kube.evictions] == ["app-1", "app-2"]  # the whole first tier in one pass
    node = env.kube.obj(resources.NODES, NODE)
    assert node is not None
    assert {"key": labels.TAINT_DISRUPTED_KEY, "effect": "NoSchedule"} in node["spec"]["taints"]
    assert node["metadata"]["labels"][labels.LABEL_EXCLUDE_FROM_LB] == "karpenter"
    raw_claim = env.claim_obj(CLAIM)
    assert raw_claim is not None
    assert raw_claim["metadata"]["deletionTimestamp"]  # type: ignore[index]  # node deletion deletes the claim
    assert _condition(env, "Drained") == ("Unknown", "Draining")

    took = await harness.drive(lambda: term.reconcile(NODE), env, until=lambda: _node_gone(env))
    evicted = [name for _, name, outcome in env.kube.evictions if outcome is client.EvictionOutcome.EVICTED]
    assert evicted == ["app-1", "app-2", "ds", "crit", "crit-ds"]
    assert _pods(env) == ["done", "elsewhere", "mirror", "tolerant"]  # never touched
    assert env.recorder.reasons().count("Evicted") == 5
    assert _pod_deletes(env) == []
    assert took >= controller.MIN_DRAIN_TIME
    assert env.cloud.instances == {}
    assert _condition(env, "Drained") == ("True", "Drained")
    assert _condition(env, "VolumesDetached") == ("True", "VolumesDetached")
    assert _condition(env, "InstanceTerminating") == ("True", "InstanceTerminating")

    # The NodeClaim finalizer now sees the Node and the instance gone and lets go.
    await harness.drive(lambda: env.claims().reconcile(CLAIM), env, until=lambda: env.claim_obj(CLAIM) is None)


async def test_empty_node_still_waits_the_minimum_drain_time() -> None:
    env = harness.make_env()
    await _registered(env)
    await _delete_node(env)
    term = _terminator(env)
    start = env.clock.now()
    await harness.drive(
        lambda: term.reconcile(NODE), env, until=lambda: _condition(env, "Drained") == ("True", "Drained")
    )
    assert env.clock.now() - start == controller.MIN_DRAIN_TIME  # no later than the minimum either


async def test_pdb_blocks_until_a_replacement_is_ready_and_is_never_bypassed() -> None:
    env = harness.make_env()
    await _registered(env, tgp="1h")  # even with a TGP, no PDB-protected pod is deleted before it
    env.kube.put(resources.PDBS, builders.pdb("web", {"app": "web"}, minAvailable=2))
    for name in ("web-1", "web-2"):
        env.kube.put(resources.PODS, nodeclaim_builders.pod_dict(name, labels={"app": "web"}))
    await _delete_node(env)
    term = _terminator(env)

    def healthy() -> int:
        return sum(
            1
            for p in env.kube.all(resources.PODS)
            if p["metadata"]["labels"].get("app") == "web" and p["status"]["conditions"][0]["status"] == "True"
        )

    for _ in range(30):  # 30 virtual seconds of retries
        result = await term.reconcile(NODE)
        assert healthy() >= 2
        env.clock.advance(result or 1.0)
    assert _pods(env) == ["web-1", "web-2"]
    assert env.recorder.reasons().count("Evicted") == 0
    blocked_calls = len(env.kube.evictions)
    assert {outcome for _, _, outcome in env.kube.evictions} == {client.EvictionOutcome.BLOCKED}
    assert blocked_calls < 2 * 30  # backoff: far fewer attempts than one per pod per pass
    attempts = [name for _, name, _ in env.kube.evictions]
    assert attempts.count("web-1") == attempts.count("web-2")  # each pod on its own backoff, neither starved

    # A replacement becomes Ready elsewhere: exactly one eviction is allowed, then the budget blocks again.
    env.kube.put(resources.PODS, nodeclaim_builders.pod_dict("web-3", node="other", labels={"app": "web"}))
    for _ in range(30):
        result = await term.reconcile(NODE)
        assert healthy() >= 2
        env.clock.advance(result or 1.0)
    assert env.recorder.reasons().count("Evicted") == 1
    assert len([p for p in _pods(env) if p in ("web-1", "web-2")]) == 1

    env.kube.put(resources.PODS, nodeclaim_builders.pod_dict("web-4", node="other", labels={"app": "web"}))
    await harness.drive(lambda: term.reconcile(NODE), env, until=lambda: _node_gone(env))
    assert env.recorder.reasons().count("Evicted") == 2
    assert _pod_deletes(env) == []
    assert env.clock.now() < nodeclaim_builders.T0 + 3600  # all before the TGP: only evictions were used


async def test_do_not_disrupt_blocks_until_the_termination_grace_period_forces_it() -> None:
    env = harness.make_env()
    await _registered(env, tgp="2m")
    env.kube.put(
        resources.PODS,
        nodeclaim_builders.pod_dict(
            "batch", annotations={labels.ANNOTATION_DO_NOT_DISRUPT: "true"}, terminationGracePeriodSeconds=30
        ),
    )
    deleted_at = env.clock.now()
    await _delete_node(env)
    term = _terminator(env)
    await term.reconcile(NODE)  # deletes the NodeClaim ...
    await env.claims().reconcile(CLAIM)  # ... whose finalizer writes the termination timestamp
    await harness.drive(lambda: term.reconcile(NODE), env, until=lambda: _pods(env) == [])
    pod_deletes = [w for w in env.kube.writes if w.plural == "pods" and w.verb == "delete"]
    assert len(pod_deletes) == 1
    # Forced once now > terminationTime - pod grace (120 - 30 s after deletion), with the time left as grace.
    assert env.clock.now() - deleted_at == pytest.approx(91, abs=1)
    assert pod_deletes[0].body in (29, 30)
    assert not [e for e in env.kube.evictions if e.name == "batch"]  # never evicted
    await harness.drive(lambda: term.reconcile(NODE), env, until=lambda: _node_gone(env))
    assert len(_pod_deletes(env)) == 1


async def test_not_ready_node_without_instance_is_released_at_once() -> None:
    env = harness.make_env()
    await _registered(env)
    env.kube.put(resources.PODS, nodeclaim_builders.pod_dict("app"))
    node = env.kube.obj(resources.NODES, NODE)
    assert node is not None
    node["status"]["conditions"] = [{"type": "Ready", "status": "Unknown"}]
    env.cloud.instances.clear()
    await _delete_node(env)
    await _terminator(env).reconcile(NODE)
    assert _node_gone(env)
    assert env.kube.evictions == []


def _volume_attachment(name: str, pv: str) -> dict[str, Any]:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "VolumeAttachment",
        "metadata": {"name": name},
        "spec": {"attacher": "ebs.csi.aws.com", "nodeName": NODE, "source": {"persistentVolumeName": pv}},
    }


async def test_waits_for_volume_attachments_of_drained_pods() -> None:
    env = harness.make_env()
    await _registered(env)
    env.kube.put(resources.VOLUMEATTACHMENTS, _volume_attachment("csi-1", "pv-1"))
    await _delete_node(env)
    term = _terminator(env)
    for _ in range(20):
        result = await term.reconcile(NODE)
        env.clock.advance(result or 1.0)
    assert _condition(env, "VolumesDetached") == ("Unknown", "AwaitingVolumeDetachment")
    assert _condition(env, "Drained") == ("True", "Drained")  # stays drained while volumes detach
    assert len(env.cloud.instances) == 1
    del env.kube.objects[("volumeattachments", "", "csi-1")]  # the CSI driver detached it
    await harness.drive(lambda: term.reconcile(NODE), env, until=lambda: _node_gone(env))
    assert _condition(env, "VolumesDetached") == ("True", "VolumesDetached")


async def test_volume_attachment_of_an_undrainable_pod_does_not_block() -> None:
    env = harness.make_env()
    await _registered(env)
    env.kube.put(
        resources.PODS,
        nodeclaim_builders.pod_dict(
            "agent", claims=["data"], tolerations=[{"key": labels.TAINT_DISRUPTED_KEY, "operator": "Exists"}]
        ),
    )
    env.kube.put(
        resources.PVCS,
        {"metadata": {"name": "data", "namespace": "default"}, "spec": {"volumeName": "pv-agent"}},
    )
    env.kube.put(resources.VOLUMEATTACHMENTS, _volume_attachment("csi-agent", "pv-agent"))
    await _delete_node(env)
    term = _terminator(env)
    await harness.drive(lambda: term.reconcile(NODE), env, until=lambda: _node_gone(env), limit=60)


async def test_volume_wait_ends_when_the_termination_grace_period_elapses() -> None:
    env = harness.make_env()
    await _registered(env, tgp="1m")
    env.kube.put(resources.VOLUMEATTACHMENTS, _volume_attachment("csi-1", "pv-1"))
    await _delete_node(env)
    term = _terminator(env)
    await term.reconcile(NODE)
    await env.claims().reconcile(CLAIM)
    took = await harness.drive(
        lambda: term.reconcile(NODE),
        env,
        until=lambda: _condition(env, "VolumesDetached") == ("False", "TerminationGracePeriodElapsed"),
    )
    assert took == 60  # the wait ends the moment the grace period does
    await harness.drive(lambda: term.reconcile(NODE), env, until=lambda: _node_gone(env))
    assert _condition(env, "VolumesDetached") == ("False", "TerminationGracePeriodElapsed")
    detached = parse.nodeclaim(env.claim_obj(CLAIM) or {}).condition("VolumesDetached")
    assert detached is not None
    assert detached.message == "TerminationGracePeriodElapsed"


async def test_restart_mid_drain_resumes() -> None:
    env = harness.make_env()
    await _registered(env)
    for name in ("a", "b"):
        env.kube.put(resources.PODS, nodeclaim_builders.pod_dict(name))
    await _delete_node(env)
    env.kube.crash_on = lambda w: w.verb == "evict" and w.name == "b"
    with pytest.raises(fake.Crash):
        await _terminator(env).reconcile(NODE)
    assert _pods(env) == ["b"]
    env.kube.crash_on = lambda w: w.plural == "nodes" and "finalizers" in ((w.body or {}).get("metadata") or {})
    with pytest.raises(fake.Crash):  # crash again right before releasing the finalizer
        await harness.drive(lambda: _terminator(env).reconcile(NODE), env, until=lambda: _node_gone(env))
    assert env.cloud.instances == {}
    await harness.drive(lambda: _terminator(env).reconcile(NODE), env, until=lambda: _node_gone(env))


async def test_node_without_nodeclaim_still_terminates_its_instance() -> None:
    env = harness.make_env()
    await _registered(env)
    node = env.kube.obj(resources.NODES, NODE)
    assert node is not None
    del env.kube.objects[("nodeclaims", "", CLAIM)]  # removed by hand, finalizer and all
    await _delete_node(env)
    await harness.drive(lambda: _terminator(env).reconcile(NODE), env, until=lambda: _node_gone(env))
    assert env.cloud.instances == {}


async def test_failed_eviction_backs_off_and_is_reported() -> None:
    env = harness.make_env()
    await _registered(env)
    env.kube.put(resources.PDBS, builders.pdb("one", {"app": "web"}, minAvailable=0))
    env.kube.put(resources.PDBS, builders.pdb("two", {"app": "web"}, minAvailable=0))
    env.kube.put(resources.PODS, nodeclaim_builders.pod_dict("web-1", labels={"app": "web"}))
    await _delete_node(env)
    term = env.terminator(backoff=drain.Backoff(base=1.0, cap=4.0))
    attempts = []
    for _ in range(12):
        await term.reconcile(NODE)
        attempts.append(len(env.kube.evictions))
        env.clock.advance(1.0)
    # Attempts at t = 0, 1 (after 1 s), 3 (after 2 s), 7 (after 4 s), 11 (cap 4 s).
    assert attempts[-1] == 5
    assert env.recorder.reasons().count("FailedEviction") == 5
    assert [(e.kind, e.name, e.type, e.reason, e.message) for e in env.recorder.events if e.reason == "FailedEviction"][
        -1
    ] == (
        "Pod",
        "web-1",
        "Warning",
        "FailedEviction",
        "Eviction failed (the pod may match several PDBs)",
    )


async def _spy_lists(env: harness.Env, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    listed: list[str] = []
    original = env.kube.list

    async def spy(res: resources.Resource, **kwargs: Any) -> Any:
        listed.append(res.plural)
        return await original(res, **kwargs)

    monkeypatch.setattr(env.kube, "list", spy)
    return listed


async def test_a_node_without_owner_reference_finds_its_claim_through_the_index(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = harness.make_env()
    await _registered(env)
    node = env.kube.obj(resources.NODES, NODE)
    assert node is not None
    node["metadata"].pop("ownerReferences", None)  # e.g. a Node that joined before its claim synced it
    listed = await _spy_lists(env, monkeypatch)
    await _delete_node(env)
    await env.terminator().reconcile(NODE)
    assert _condition(env, "Drained") == ("Unknown", "Draining")  # the claim was found and is being reported on
    assert "nodeclaims" not in listed  # one GET by name, not a LIST of every NodeClaim


async def test_an_ambiguous_provider_id_finds_no_claim(monkeypatch: pytest.MonkeyPatch) -> None:
    env = harness.make_env()
    await _registered(env)
    node = env.kube.obj(resources.NODES, NODE)
    assert node is not None
    node["metadata"].pop("ownerReferences", None)
    claim = env.claim_obj(CLAIM)
    assert claim is not None
    env.kube.put(resources.NODECLAIMS, {**claim, "metadata": {**claim["metadata"], "name": "twin", "uid": "twin-uid"}})
    listed = await _spy_lists(env, monkeypatch)
    await _delete_node(env)
    await env.terminator().reconcile(NODE)
    assert _condition(env, "Drained") is None  # two claims name the instance: neither is reported on (as a LIST)
    assert "nodeclaims" not in listed
