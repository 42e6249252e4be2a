"""The end of termination, checked field by field: the release patch keeps every other finalizer and is guarded by
the Node's resourceVersion, the metrics name the NodePool, and Events point at the pods they are about."""

from __future__ import annotations

from tests.nodeclaim import builders as nodeclaim_builders
from tests.nodeclaim import harness

from karpy.api import labels
from karpy.kube import resources

CLAIM = "default-abc12"
NODE = "ip-10-0-0-1"
OTHER_FINALIZER = "example.com/keep-me"


async def _registered(env: harness.Env, *, tgp: str | None = None) -> None:
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(CLAIM, termination_grace_period=tgp, pool="team"))
    await env.claims().reconcile(CLAIM)
    raw = env.claim_obj(CLAIM)
    assert raw is not None
    env.kube.put(
        resources.NODES,
        nodeclaim_builders.node_dict(NODE, provider_id=raw["status"]["providerID"]),  # type: ignore[index]
    )
    await env.claims().reconcile(CLAIM)


def _released(env: harness.Env) -> bool:
    node = env.kube.obj(resources.NODES, NODE)
    return node is None or labels.FINALIZER_TERMINATION not in node["metadata"]["finalizers"]


def _pod_events(env: harness.Env, reason: str) -> list[dict[str, object]]:
    return [ref for ref, event in zip(env.recorder.refs, env.recorder.events, strict=True) if event.reason == reason]


async def test_release_keeps_other_finalizers_and_reports_the_nodepool() -> None:
    env = harness.make_env()
    await _registered(env)
    node = env.kube.obj(resources.NODES, NODE)
    assert node is not None
    node["metadata"]["finalizers"] = [OTHER_FINALIZER, *node["metadata"]["finalizers"]]
    await env.kube.delete(resources.NODES, NODE)
    term = env.terminator()
    await harness.drive(lambda: term.reconcile(NODE), env, until=lambda: _released(env))
    node = env.kube.obj(resources.NODES, NODE)
    assert node is not None
    assert node["metadata"]["finalizers"] == [OTHER_FINALIZER]  # only our own finalizer went
    release = [
        w for w in env.kube.writes if w.plural == "nodes" and w.verb == "patch" and "finalizers" in w.body["metadata"]
    ][-1]
    assert release.body["metadata"]["resourceVersion"]  # a concurrent change to the list gets a 409
    assert [pool for pool, _zone in env.terminated.nodes] == ["team"]
    assert env.cloud.instances == {}


async def test_eviction_and_forced_deletion_events_point_at_their_pods() -> None:
    env = harness.make_env()
    await _registered(env, tgp="10m")
    env.kube.put(resources.PODS, nodeclaim_builders.pod_dict("web", namespace="shop", uid="uid-shop-web"))
    for name in ("pinned", "pinned-too"):
        env.kube.put(
            resources.PODS,
            nodeclaim_builders.pod_dict(
                name, namespace="shop", uid=f"uid-shop-{name}", annotations={labels.ANNOTATION_DO_NOT_DISRUPT: "true"}
            ),
        )
    await env.kube.delete(resources.NODES, NODE)
    term = env.terminator()
    await term.reconcile(NODE)  # deletes the NodeClaim ...
    await env.claims().reconcile(CLAIM)  # ... whose finalizer writes the termination timestamp
    await harness.drive(lambda: term.reconcile(NODE), env, until=lambda: _released(env))
    pod_ref = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "shop", "uid": "uid-shop-web"},
    }
    assert _pod_events(env, "Evicted") == [pod_ref]
    assert ("Pod", "web", "Normal", "Evicted", "Evicted pod: Forceful Termination") in [
        (e.kind, e.name, e.type, e.reason, e.message) for e in env.recorder.events
    ]
    pinned = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pinned", "namespace": "shop", "uid": "uid-shop-pinned"},
    }
    assert _pod_events(env, "Disrupted")[0] == pinned  # deleted once the 10 min grace period forced it
    deleted = [e for e in env.recorder.events if e.reason == "Disrupted"]
    assert [e.name for e in deleted] == ["pinned", "pinned-too"]
    assert deleted[0].type == "Normal"  # upstream: DisruptPodDelete is a Normal event
    assert deleted[0].message.startswith(
        "Deleting the pod to accommodate the terminationTime of its node, grace period "
    )
    assert env.recorder.reasons().count("Evicted") == 1
