"""Operator wiring: Node events reach their NodeClaim through the state cache's providerID index (no scan of every
claim); an instance-status source becomes a leader-only interruption loop."""

from __future__ import annotations

from typing import Any

from tests import builders

from karpy import clock, settings
from karpy.cloudprovider import parts as cloudprovider_parts
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.kube import client, credentials, resources, rest
from karpy.runtime import leadership, parts, routing
from karpy.state import cluster as state_cluster
from karpy.wiring import graph


class _Source:
    """A QueueClient that never has anything."""

    async def receive(self, *, wait_seconds: int = 20) -> list[Any]:
        return []

    async def delete(self, received: Any) -> None:
        return None


def _controller(*, instance_status: _Source | None = None) -> parts.Controller:
    def cloud(_: settings.Settings, __: state_cluster.Cluster, ___: clock.Clock) -> cloudprovider_parts.CloudParts:
        return cloudprovider_parts.CloudParts(
            provider=fake_provider.FakeCloudProvider(), instance_status=instance_status
        )

    s = settings.Settings.from_env({"CLUSTER_NAME": "demo", "DISABLE_LEADER_ELECTION": "true"})
    inner = rest.RestClient(credentials.Credentials("http://127.0.0.1:1"), clock=clock.SystemClock())
    return graph.build(s, kube=inner, clock=clock.ManualClock(), cloud_factory=cloud, identity="x")


def _apply(ctrl: parts.Controller, res: resources.Resource, kind: str, obj: dict[str, object]) -> None:
    ctrl.cluster.apply(res, client.WatchEvent(kind, obj))


async def test_node_events_find_their_claims_through_the_index() -> None:
    ctrl = _controller()
    launched = builders.nodeclaim("launched", providerID="aws:///z/i-1")
    _apply(ctrl, resources.NODECLAIMS, client.ADDED, launched)
    _apply(ctrl, resources.NODECLAIMS, client.ADDED, builders.nodeclaim("named", nodeName="ip-2"))
    assert routing.claims_for_node(ctrl, builders.node("ip-1", provider_id="aws:///z/i-1")) == ["launched"]
    assert routing.claims_for_node(ctrl, builders.node("ip-2")) == ["named"]
    assert routing.claims_for_node(ctrl, builders.node("stranger", provider_id="aws:///z/i-9")) == []
    _apply(ctrl, resources.NODECLAIMS, client.DELETED, launched)
    assert routing.claims_for_node(ctrl, builders.node("ip-1", provider_id="aws:///z/i-1")) == []
    # The Node finalizer looks a claim up through the same index.
    assert ctrl.termination._claims is ctrl.cluster


def test_an_instance_status_source_runs_as_a_leader_loop_of_its_own() -> None:
    source = _Source()
    ctrl = _controller(instance_status=source)
    assert ctrl.instance_status is not None
    assert ctrl.instance_status._deps.queue is source
    assert ctrl.instance_status._deps.cluster is ctrl.cluster  # instances map to claims through the state cache
    assert ctrl.interruption is None  # no SQS queue configured: the health poll does not need one
    assert "instance status" in leadership.singletons(ctrl)  # started by `lead`, i.e. only while holding the Lease
    bare = _controller()
    assert bare.instance_status is None
    assert "instance status" not in leadership.singletons(bare)


def test_the_state_caches_changes_are_routed_to_the_work_queues() -> None:
    # `karpy run` and the emulation alike: the graph's cache listener queues work from the informer's one watch.
    ctrl = _controller()
    claim = builders.nodeclaim("claim-1", pool="default")
    _apply(ctrl, resources.NODECLAIMS, client.ADDED, claim)
    _apply(ctrl, resources.NODEPOOLS, client.ADDED, builders.nodepool("other"))
    assert (len(ctrl.queue(parts.NODECLAIMS)), len(ctrl.queue(parts.NODEPOOLS))) == (1, 2)
    _apply(ctrl, resources.PODS, client.ADDED, builders.pod("web-1"))  # pods are not routed to a queue
    _apply(ctrl, resources.NODECLAIMS, client.DELETED, claim)  # a deleted claim: its pool's status, not itself
    assert (len(ctrl.queue(parts.NODECLAIMS)), len(ctrl.queue(parts.NODEPOOLS))) == (1, 2)
