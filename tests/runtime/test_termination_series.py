"""The termination series, driven through the real Node finalizer and NodeClaim finalizer with the operator's
hooks (core: node/termination/controller.go, terminator/eviction.go, nodeclaim/lifecycle/controller.go): each is
read back from the registry, so an update that stops being made fails here."""

from __future__ import annotations

import dataclasses
from typing import Any

from tests import builders
from tests.nodeclaim import builders as nodeclaim_builders
from tests.nodeclaim import harness
from tests.runtime import test_metrics_hooks as runtime_test_metrics_hooks

from karpy.kube import resources
from karpy.nodeclaim import controller as nodeclaim_controller
from karpy.nodeclaim import lifecycle_observer
from karpy.runtime import metrics
from karpy.termination import controller

CLAIM = "team-abc12"
NODE = "ip-10-0-0-1"


def _claims(env: harness.Env, m: metrics.Metrics) -> nodeclaim_controller.NodeClaimController:
    deps = dataclasses.replace(env.deps, observer=lifecycle_observer.Observer(env.recorder, m.nodeclaim_hooks()))
    return nodeclaim_controller.NodeClaimController(deps)


async def _registered(env: harness.Env, m: metrics.Metrics) -> None:
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(CLAIM, pool="team"))
    await _claims(env, m).reconcile(CLAIM)
    raw: Any = env.claim_obj(CLAIM)
    env.kube.put(resources.NODES, nodeclaim_builders.node_dict(NODE, provider_id=raw["status"]["providerID"]))
    await _claims(env, m).reconcile(CLAIM)


def value(m: metrics.Metrics, name: str, **label_values: str) -> float:
    return runtime_test_metrics_hooks.counter(m, name, **label_values)


async def test_a_node_terminated_end_to_end_feeds_every_termination_series() -> None:
    m, env = metrics.Metrics(), harness.make_env()
    await _registered(env, m)
    env.kube.put(resources.PODS, nodeclaim_builders.pod_dict("web"))
    env.kube.put(resources.PODS, nodeclaim_builders.pod_dict("db", labels={"app": "db"}))
    env.kube.put(resources.PDBS, builders.pdb("db", {"app": "db"}, namespace="default", minAvailable=1))
    env.clock.advance(7200)  # two hours old when its deletion is asked for
    await env.kube.delete(resources.NODES, NODE)
    term = env.terminator(env.termination_counted(m.termination_hooks()))
    for _ in range(5):  # the budget refuses db's eviction: 429s, retried with backoff
        result = await term.reconcile(NODE)
        env.clock.advance(result or 1.0)
    assert value(m, "karpenter_pods_eviction_requests_total", code="429") >= 1
    assert value(m, "karpenter_pods_eviction_requests_total", code="200") == 1  # web went at once
    assert value(m, "karpenter_pods_drained_total", reason=controller.FORCEFUL) == 1  # no DisruptionReason
    env.kube.put(resources.PODS, nodeclaim_builders.pod_dict("db-2", node="other", labels={"app": "db"}))
    started = env.clock.now() - 5 * 1.0
    await harness.drive(lambda: term.reconcile(NODE), env, until=lambda: env.kube.obj(resources.NODES, NODE) is None)
    assert value(m, "karpenter_pods_drained_total", reason=controller.FORCEFUL) == 2
    assert value(m, "karpenter_nodes_drained_total", nodepool="team") == 1  # once, over many passes
    assert value(m, "karpenter_nodes_termination_duration_seconds_count", nodepool="team") == 1
    assert value(m, "karpenter_nodes_termination_duration_seconds_sum", nodepool="team") >= env.clock.now() - started
    assert value(m, "karpenter_nodes_lifetime_duration_seconds_count", nodepool="team") == 1
    assert value(m, "karpenter_nodes_lifetime_duration_seconds_bucket", nodepool="team", le="7200.0") == 0
    assert value(m, "karpenter_nodes_lifetime_duration_seconds_bucket", nodepool="team", le="14400.0") == 1

    claims = _claims(env, m)
    await harness.drive(lambda: claims.reconcile(CLAIM), env, until=lambda: env.claim_obj(CLAIM) is None)
    assert value(m, "karpenter_nodeclaims_termination_duration_seconds_count", nodepool="team") == 1
    assert value(m, "karpenter_nodeclaims_instance_termination_duration_seconds_count", nodepool="team") == 1


async def test_drained_pods_carry_their_nodes_disruption_reason() -> None:
    m, env = metrics.Metrics(), harness.make_env()
    await _registered(env, m)
    raw: Any = env.claim_obj(CLAIM)
    raw["status"]["conditions"].append(
        {
            "type": "DisruptionReason",
            "status": "True",
            "reason": "Underutilized",
            "lastTransitionTime": nodeclaim_builders.ts(nodeclaim_builders.T0),
        }
    )
    env.kube.put(resources.PODS, nodeclaim_builders.pod_dict("web"))
    await env.kube.delete(resources.NODES, NODE)
    term = env.terminator(env.termination_counted(m.termination_hooks()))
    await harness.drive(lambda: term.reconcile(NODE), env, until=lambda: env.kube.obj(resources.NODES, NODE) is None)
    assert value(m, "karpenter_pods_drained_total", reason="Underutilized") == 1
