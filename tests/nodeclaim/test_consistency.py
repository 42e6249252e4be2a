"""The consistency reconciler on the in-memory API + real `state.Cluster`, virtual time (upstream's cases from
core pkg/controllers/nodeclaim/consistency/suite_test.go, plus the scan period and what is not scanned)."""

from __future__ import annotations

from typing import Any

from tests import builders
from tests.nodeclaim import builders as nodeclaim_builders

from karpy import clock as karpy_clock
from karpy import events
from karpy.api import nodeclaim, parse
from karpy.kube import client, fake, resources
from karpy.nodeclaim import consistency, roles
from karpy.state import cluster as state_cluster

NODE = "ip-10-0-0-1"
PROVIDER_ID = "fake://zone-a/i-00000001"
REQUESTS = {"cpu": "8", "memory": "64Gi", "pods": "5"}
PROMISED = {"cpu": "16", "memory": "128Gi", "pods": "10"}
UNMANAGED_CLASS = {"group": "karpenter.test.sh", "kind": "UnmanagedNodeClass", "name": "default"}


class Env:
    def __init__(self) -> None:
        self.clock = karpy_clock.ManualClock(nodeclaim_builders.T0)
        self.kube = fake.FakeKubeClient(self.clock)
        self.cluster = state_cluster.Cluster(clock=self.clock)
        self.recorder = events.MemoryRecorder()
        self.ctrl = consistency.ConsistencyController(
            roles.ClusterRoles(client=self.kube, cluster=self.cluster, clock=self.clock),
            consistency.Observer(self.recorder),
        )
        self.kube.put(resources.NODEPOOLS, builders.nodepool())

    def claim(
        self,
        *,
        node_capacity: dict[str, str],
        initialized: bool = True,
        spec: dict[str, Any] | None = None,
        provider_id: str = PROVIDER_ID,
    ) -> None:
        conds = [nodeclaim_builders.cond(nodeclaim.CONSISTENT_STATE_FOUND, "Unknown", self.clock.now(), "Unknown")]
        if initialized:
            conds.append(nodeclaim_builders.cond(nodeclaim.INITIALIZED, "True", self.clock.now()))
        self.kube.put(
            resources.NODECLAIMS,
            builders.nodeclaim(
                "default-abc12",
                uid="claim-uid",
                created=nodeclaim_builders.ts(self.clock.now()),
                requests=REQUESTS,
                capacity=PROMISED,
                provider_id=provider_id,
                node_name=NODE,
                conditions=conds,
                spec=spec,
            ),
        )
        node = builders.node(NODE, provider_id=PROVIDER_ID, ready=True)
        node["status"]["capacity"] = dict(node_capacity)
        self.kube.put(resources.NODES, node)
        self.sync()

    def sync(self) -> None:
        """Feed the store to the cluster model as the informers would."""
        for res in (resources.NODEPOOLS, resources.NODECLAIMS, resources.NODES):
            for obj in self.kube.all(res):
                self.cluster.apply(res, client.WatchEvent(client.MODIFIED, obj))
            self.cluster.mark_listed(res)

    def stored(self) -> nodeclaim.NodeClaim:
        raw = self.kube.obj(resources.NODECLAIMS, "default-abc12")
        assert raw is not None
        return parse.nodeclaim(raw)

    def state(self) -> str:
        found = self.stored().condition(nodeclaim.CONSISTENT_STATE_FOUND)
        assert found is not None
        return found.status


async def test_a_node_of_the_promised_shape_is_consistent() -> None:
    env = Env()
    env.claim(node_capacity=PROMISED)
    await env.ctrl.scan_due()
    assert env.state() == "True"
    assert env.recorder.reasons() == []


async def test_a_claim_of_another_node_class_is_left_alone() -> None:
    env = Env()
    env.claim(node_capacity=PROMISED, spec={"nodeClassRef": UNMANAGED_CLASS})
    await env.ctrl.scan_due()
    assert env.state() == "Unknown"


async def test_a_node_with_half_the_memory_fails_the_check() -> None:
    env = Env()
    env.claim(node_capacity={**PROMISED, "memory": "64Gi"})
    await env.ctrl.scan_due()
    assert [(e.reason, e.type, e.message) for e in env.recorder.events] == [
        ("FailedConsistencyCheck", "Warning", "expected 128Gi of resource memory, but found 64Gi (50.0% of expected)")
    ]
    assert env.recorder.events[0].kind == "NodeClaim"
    found = env.stored().condition(nodeclaim.CONSISTENT_STATE_FOUND)
    assert found is not None
    assert (found.status, found.reason) == ("False", "ConsistencyCheckFailed")


async def test_ninety_percent_is_enough_and_unrequested_resources_are_not_checked() -> None:
    env = Env()
    # 90 % of the cpu exactly; no ephemeral-storage was requested, so none on the node is fine
    env.claim(node_capacity={"cpu": "14400m", "memory": "128Gi", "pods": "10"})
    await env.ctrl.scan_due()
    assert env.state() == "True"


async def test_a_claim_not_yet_initialized_passes_whatever_its_node() -> None:
    env = Env()
    env.claim(node_capacity={**PROMISED, "memory": "1Gi"}, initialized=False)
    await env.ctrl.scan_due()
    assert env.state() == "True"
    assert env.recorder.reasons() == []


async def test_a_claim_whose_node_has_another_provider_id_is_not_scanned() -> None:
    env = Env()
    env.claim(node_capacity={**PROMISED, "memory": "1Gi"}, provider_id="fake://zone-a/i-00000009")
    await env.ctrl.scan_due()
    assert env.state() == "Unknown"
    assert env.recorder.reasons() == []


async def test_each_claim_is_scanned_once_per_scan_period() -> None:
    env = Env()
    env.claim(node_capacity={**PROMISED, "memory": "64Gi"})
    await env.ctrl.scan_due()
    env.sync()
    env.clock.advance(consistency.SCAN_PERIOD - 1)
    await env.ctrl.scan_due()
    assert env.recorder.reasons() == ["FailedConsistencyCheck"]
    env.clock.advance(1)
    await env.ctrl.scan_due()
    assert env.recorder.reasons() == ["FailedConsistencyCheck"] * 2


async def test_a_fixed_node_turns_the_condition_true_at_the_next_scan() -> None:
    env = Env()
    env.claim(node_capacity={**PROMISED, "memory": "64Gi"})
    await env.ctrl.scan_due()
    assert env.state() == "False"
    node = env.kube.obj(resources.NODES, NODE)
    assert node is not None
    node["status"]["capacity"] = dict(PROMISED)
    env.kube.put(resources.NODES, node)
    env.sync()
    env.clock.advance(consistency.SCAN_PERIOD)
    await env.ctrl.scan_due()
    assert env.state() == "True"
