"""The provisioner on the real cluster-state model (fed the way informers feed it) and through the dry-run client."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest
from tests import builders
from tests.scheduling.conftest import fake_catalog

from karpy import events, rejections
from karpy.clock import ManualClock
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.kube import client, dryrun, resources
from karpy.kube import fake as kube_fake
from karpy.provisioning import provisioner
from karpy.state import cluster

R = resources


def _state(clock: ManualClock) -> cluster.Cluster:
    state = cluster.Cluster(clock=clock)
    for res in (R.NODEPOOLS, R.NODECLAIMS, R.NODES, R.PODS):
        state.mark_listed(res)
    state.apply(R.NODEPOOLS, client.WatchEvent(client.ADDED, builders.nodepool("default")))
    for i in range(4):
        pod = builders.unschedulable(builders.pod(f"web-{i}"))
        pod["metadata"]["uid"] = f"uid-web-{i}"
        state.apply(R.PODS, client.WatchEvent(client.ADDED, pod))
    return state


def _launched(created: dict[str, Any]) -> dict[str, Any]:
    """What the NodeClaim looks like once the lifecycle controller launched it: allocatable and resolved labels."""
    claim = copy.deepcopy(created)
    claim["metadata"]["labels"].update({"node.kubernetes.io/instance-type": "fake-it-7", "kubernetes.io/arch": "amd64"})
    claim["status"] = {
        "providerID": "fake://test-zone-1a/i-00000001",
        "capacity": {"cpu": "8", "memory": "16Gi", "pods": "80"},
        "allocatable": {"cpu": "8", "memory": "16Gi", "pods": "80"},
    }
    return claim


async def test_pending_pods_then_in_flight_claim_is_reused() -> None:
    clock = ManualClock(1_700_000_000.0)
    state = _state(clock)
    kube, recorder = kube_fake.FakeKubeClient(clock), events.MemoryRecorder()
    prov = provisioner.Provisioner(
        provisioner.Deps(
            client=kube,
            cluster=state,
            cloud=fake_provider.FakeCloudProvider(fake_catalog(8)),
            clock=clock,
            recorder=recorder,
            rejections=rejections.Discard(),
        )
    )
    first = await prov.provision()
    assert len(first.created) == 1
    (created,) = kube.all(R.NODECLAIMS)
    assert set(first.created[0].pods) == {f"default/web-{i}" for i in range(4)}
    # Known to the state before its watch event arrives, as in flight: the next decisions wait for its launch.
    assert [c.metadata.name for c in state.nodeclaims()] == [created["metadata"]["name"]]
    assert not state.launches_resolved()

    # The informer sees the claim launched; the pods are still pending: the next batch nominates the in-flight
    # claim instead of launching a second one.
    state.apply(R.NODECLAIMS, client.WatchEvent(client.ADDED, _launched(created)))
    second = await prov.provision()
    assert second.created == ()
    name = created["metadata"]["name"]
    assert second.nominated == {name: tuple(f"default/web-{i}" for i in range(4))}
    assert state.is_nominated(name)
    assert len(kube.all(R.NODECLAIMS)) == 1


def _leaving_node(clock: ManualClock, **pod_fields: Any) -> cluster.Cluster:
    """A cluster with node "old" running pod default/db (labelled app=db)."""
    state = cluster.Cluster(clock=clock)
    for res in (R.NODEPOOLS, R.NODECLAIMS, R.NODES, R.PODS, R.PDBS):
        state.mark_listed(res)
    state.apply(R.NODEPOOLS, client.WatchEvent(client.ADDED, builders.nodepool("default")))
    node = builders.node("old", labels={"karpenter.sh/nodepool": "default"})
    state.apply(R.NODES, client.WatchEvent(client.ADDED, node))
    bound = builders.ready(builders.pod("db", node="old", labels={"app": "db"}, **pod_fields))
    state.apply(R.PODS, client.WatchEvent(client.ADDED, bound))
    return state


def _provisioner(
    state: cluster.Cluster, clock: ManualClock, *, kube: client.KubeClient | None = None
) -> provisioner.Provisioner:
    return provisioner.Provisioner(
        provisioner.Deps(
            client=kube or kube_fake.FakeKubeClient(clock),
            cluster=state,
            cloud=fake_provider.FakeCloudProvider(fake_catalog(8)),
            clock=clock,
            recorder=events.MemoryRecorder(),
            rejections=rejections.Discard(),
        )
    )


# core: pkg/controllers/provisioning/scheduling/suite_test.go, DescribeTable("should not reschedule pods from a
# deleting node when pods are blocked due to fully blocking PDBs") (#2033), and do-not-disrupt beside them.
BLOCKED = pytest.mark.parametrize(
    ("pod_fields", "pdb_spec"),
    [
        ({}, {"maxUnavailable": 0}),
        ({}, {"maxUnavailable": "0%"}),
        ({}, {"minAvailable": "100%"}),
        ({"annotations": {"karpenter.sh/do-not-disrupt": "true"}}, None),
    ],
    ids=["0 max unavailable", "0% max unavailable", "100% min available", "do-not-disrupt"],
)


@BLOCKED
@pytest.mark.parametrize("leaving", ["marked", "deleting"])
async def test_a_pod_that_cannot_be_evicted_gets_no_replacement_until_it_can(
    pod_fields: dict[str, Any], pdb_spec: dict[str, Any] | None, leaving: str
) -> None:
    clock = ManualClock(1_700_000_000.0)
    state = _leaving_node(clock, **pod_fields)
    pdb = builders.pdb("db", {"app": "db"}, **(pdb_spec or {"maxUnavailable": 1}))
    state.apply(R.PDBS, client.WatchEvent(client.ADDED, pdb))
    if leaving == "marked":
        state.mark_for_deletion("old")
    else:
        node = builders.deleting(builders.node("old", labels={"karpenter.sh/nodepool": "default"}))
        state.apply(R.NODES, client.WatchEvent(client.MODIFIED, node))
    prov = _provisioner(state, clock)
    assert (await prov.provision()).created == ()  # it stays where it is: a new node would stand empty
    if pdb_spec is None:
        free = builders.ready(builders.pod("db", node="old", labels={"app": "db"}))
        state.apply(R.PODS, client.WatchEvent(client.MODIFIED, free))
    else:
        state.apply(R.PDBS, client.WatchEvent(client.DELETED, pdb))
    outcome = await prov.provision()
    assert [c.pods for c in outcome.created] == [("default/db",)]


async def test_pods_of_a_node_marked_for_deletion_get_a_replacement() -> None:
    clock = ManualClock(1_700_000_000.0)
    state = _leaving_node(clock)
    kube = kube_fake.FakeKubeClient(clock)
    prov = provisioner.Provisioner(
        provisioner.Deps(
            client=kube,
            cluster=state,
            cloud=fake_provider.FakeCloudProvider(fake_catalog(8)),
            clock=clock,
            recorder=events.MemoryRecorder(),
            rejections=rejections.Discard(),
        )
    )
    assert (await prov.provision()).created == ()  # nothing pending, nothing leaving
    state.mark_for_deletion("old")
    outcome = await prov.provision()
    assert [c.pods for c in outcome.created] == [("default/db",)]


async def test_dry_run_creates_nothing_but_says_what_it_would_do(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(1_700_000_000.0)
    state = _state(clock)
    inner = kube_fake.FakeKubeClient(clock)
    prov = _provisioner(state, clock, kube=dryrun.DryRunClient(inner))
    with caplog.at_level(logging.INFO):
        outcome = await prov.provision()
    assert inner.all(R.NODECLAIMS) == []
    assert [c.name for c in outcome.created] == ["default-"]  # no server to complete generateName
    messages = [r.getMessage() for r in caplog.records]
    assert any(m.startswith("dry run: would create nodeclaims.karpenter.sh/default-") for m in messages), messages
    by_message = {r.getMessage(): r for r in caplog.records}
    computed = by_message["computed new nodeclaim(s) to fit pod(s)"]
    assert (computed.nodeclaims, computed.pods) == (1, 4)
    assert by_message["created nodeclaim"].nodeclaim == "default-"
