"""The Node finalizer never drains or terminates on the strength of what it cannot read: a Node whose NodeClaim does
not parse keeps its finalizer and its instance; a pod whose manifest cannot be read holds the drain and is never
evicted or deleted, while the node's other pods are evicted as usual."""

from __future__ import annotations

import dataclasses
from typing import Any

from tests.nodeclaim import builders as nodeclaim_builders
from tests.nodeclaim import harness

from karpy import rejections
from karpy.api import labels
from karpy.kube import client, resources
from karpy.termination import controller, drain

CLAIM = "default-abc12"
NODE = "ip-10-0-0-1"


async def _registered(env: harness.Env, *, tgp: str | None = None) -> None:
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(CLAIM, termination_grace_period=tgp))
    claims = env.claims()
    await claims.reconcile(CLAIM)
    raw: Any = env.claim_obj(CLAIM)
    node = nodeclaim_builders.node_dict(NODE, provider_id=raw["status"]["providerID"])
    node["metadata"]["ownerReferences"] = [{"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "name": CLAIM}]
    env.kube.put(resources.NODES, node)
    await claims.reconcile(CLAIM)


def _terminator(env: harness.Env, sink: rejections.MemorySink) -> controller.TerminationController:
    return env.terminator(dataclasses.replace(env.termination_deps, rejections=sink))


async def test_a_node_whose_nodeclaim_cannot_be_read_is_neither_drained_nor_terminated() -> None:
    env = harness.make_env()
    await _registered(env)
    env.kube.put(resources.PODS, nodeclaim_builders.pod_dict("app"))
    raw: Any = env.claim_obj(CLAIM)
    raw["spec"]["requirements"][0]["operator"] = "Equals"  # what karpy's parser refuses
    await env.kube.delete(resources.NODES, NODE)
    sink = rejections.MemorySink()
    term = _terminator(env, sink)
    for _ in range(3):
        result = await term.reconcile(NODE)
        assert result == controller.UNREADABLE_POLL
        env.clock.advance(controller.UNREADABLE_POLL)
    node: Any = env.kube.obj(resources.NODES, NODE)
    assert node["metadata"]["finalizers"] == [labels.FINALIZER_TERMINATION]
    assert "taints" not in node["spec"] or not node["spec"]["taints"], "not even cordoned"
    assert len(env.cloud.instances) == 1
    assert env.kube.evictions == []
    assert set(sink.keys("NodeClaim")) == {CLAIM}


async def test_an_unreadable_pod_holds_the_drain_and_is_left_alone_even_past_the_grace_period() -> None:
    env = harness.make_env()
    await _registered(env, tgp="1m")
    env.kube.put(resources.PODS, nodeclaim_builders.pod_dict("app"))
    strange = nodeclaim_builders.pod_dict("strange")
    strange["spec"]["tolerations"] = [5]  # what from_manifest cannot read
    env.kube.put(resources.PODS, strange)
    await env.kube.delete(resources.NODES, NODE)
    sink = rejections.MemorySink()
    term = _terminator(env, sink)
    for _ in range(10):  # well past the claim's one-minute terminationGracePeriod
        await term.reconcile(NODE)
        env.clock.advance(30)
    evicted = [name for _, name, outcome in env.kube.evictions if outcome is client.EvictionOutcome.EVICTED]
    assert evicted == ["app"]
    assert env.kube.obj(resources.PODS, "strange", namespace="default") is not None
    assert env.kube.obj(resources.NODES, NODE) is not None, "the drain waits for it"
    assert len(env.cloud.instances) == 1
    assert set(sink.keys("Pod")) == {"default/strange"}


def test_a_drain_plan_never_evicts_or_deletes_an_unreadable_pod() -> None:
    held = drain.unreadable({"metadata": {"name": "x", "namespace": "ns"}})
    plan = drain.plan([held], now=1_000.0, termination_time=0.0)
    assert (plan.evict, plan.delete, plan.waiting) == ((), (), (held,))
