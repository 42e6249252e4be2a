"""Pending pods: explain's reasons are the provisioner's FailedScheduling events, word for word, and a pod that fits
gets the NodeClaim or node the provisioner nominates it to; per NodePool and per kind of node, it says what rules
each place out."""

from __future__ import annotations

from typing import Any

from tests.disruption import world as disruption_world

from karpy import events, rejections
from karpy.api import labels
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.explain import pending, run
from karpy.kube import fake as kube_fake
from karpy.kube import resources
from karpy.provisioning import provisioner

World = disruption_world.World
CATALOG = {"default": list(disruption_world.CATALOG)}


def zone_pinned(w: World, name: str, zone: str) -> None:
    w.pending_pod(name)
    body: dict[str, Any] = w.kube.obj(resources.PODS, name, "default") or {}
    body["spec"]["nodeSelector"] = {labels.LABEL_ZONE: zone}
    w.kube.put(resources.PODS, body)


def scenario() -> World:
    w = World()
    w.pool()
    w.node("room")  # c4 with 1 cpu used: the small pending pod fits here
    w.pod("resident", "room", cpu="1")
    w.pending_pod("small", cpu="1")
    w.pending_pod("huge", cpu="64")  # bigger than every instance type
    zone_pinned(w, "elsewhere", "no-such-zone")
    w.pending_pod("new", cpu="3")  # does not fit beside small on "room": a new NodeClaim
    w.sync()
    return w


def explained(w: World) -> dict[str, pending.PendingPod]:
    found = run.explain(run.prepare(w.cluster, CATALOG, clock=w.clock, options=run.Options(repack=False)))
    return {p.pod.key: p for p in found.pending}


async def provisioned(w: World) -> tuple[events.MemoryRecorder, provisioner.Outcome]:
    recorder = events.MemoryRecorder()
    prov = provisioner.Provisioner(
        provisioner.Deps(
            client=kube_fake.FakeKubeClient(w.clock),
            cluster=w.cluster,
            cloud=fake_provider.FakeCloudProvider(list(disruption_world.CATALOG)),
            clock=w.clock,
            recorder=recorder,
            rejections=rejections.Discard(),
        )
    )
    return recorder, await prov.provision()


async def test_reasons_are_the_failed_scheduling_events_word_for_word() -> None:
    w = scenario()
    found = explained(w)
    recorder, _ = await provisioned(w)
    failed = {
        f"{e.namespace}/{e.name}": e.message.removeprefix("Failed to schedule pod, ")
        for e in recorder.events
        if e.reason == "FailedScheduling"
    }
    assert set(failed) == {"default/huge", "default/elsewhere"}
    assert {key: p.reason for key, p in found.items() if p.reason} == failed


async def test_pods_that_fit_get_what_the_provisioner_gives_them() -> None:
    w = scenario()
    found = explained(w)
    _, outcome = await provisioned(w)
    assert found["default/small"].node == "room"
    assert outcome.nominated == {"room": ("default/small",)}
    claim = found["default/new"].nodeclaim
    assert claim is not None
    assert [c.pods for c in outcome.created] == [tuple(p.key for p in claim.pods)]


async def test_each_place_says_which_constraint_rules_it_out() -> None:
    w = scenario()
    found = explained(w)
    huge, elsewhere = found["default/huge"].diagnosis, found["default/elsewhere"].diagnosis
    assert huge is not None
    assert elsewhere is not None
    assert [(r.kind, r.count) for r in huge.nodes] == [("resources", 1)]
    assert [(p.nodepool, p.kind) for p in huge.nodepools] == [("default", "resources")]
    assert [(r.kind, r.count) for r in elsewhere.nodes] == [("requirements", 1)]
    assert [(p.nodepool, p.kind) for p in elsewhere.nodepools] == [("default", "requirements")]


def test_the_pending_solve_shares_the_nodes_the_simulations_derived() -> None:
    """Deriving what a solve needs of each node is most of a solve's set-up at 5,000 nodes: the pending pods' solve
    takes the nodes the pass's simulations use, derived once, and still answers as the provisioner does (above)."""
    w = scenario()
    prepared = run.prepare(w.cluster, CATALOG, clock=w.clock, options=run.Options(repack=False))
    assert prepared.batch is not None
    nodes = prepared.batch.input.existing_nodes
    assert [n.name for n in nodes] == ["room"]
    assert all(n.derived is not None for n in nodes)
