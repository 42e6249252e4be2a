"""The NodePool and EC2NodeClass status controllers against the emulated API server: what they write (status, hash
stamps, re-stamped NodeClaims) and when they come back."""

from __future__ import annotations

from tests import builders

from karpy import clock, events
from karpy.api import ec2nodeclass, hashing, labels, meta, parse
from karpy.cloudprovider.aws import cache, drift
from karpy.kube import client as kube_client
from karpy.kube import resources, rest
from karpy.nodeclaim import disruption_conditions, registration
from karpy.nodeclass import controller as nodeclass_controller
from karpy.nodepool import controller as nodepool_controller
from karpy.nodepool import status as nodepool_status
from karpy.state import cluster


class Resolver:
    """The node-class half of a provider: every class resolves Ready; counts its calls."""

    def __init__(self, now: clock.ManualClock) -> None:
        self._now = now
        self.resolved: list[str] = []

    async def reconcile_nodeclass(self, nc: ec2nodeclass.EC2NodeClass) -> ec2nodeclass.EC2NodeClassStatus:
        self.resolved.append(nc.name)
        ready = meta.Condition("Ready", "True", "Ready", "", self._now.now())
        return ec2nodeclass.EC2NodeClassStatus(instance_profile=f"profile-{nc.name}", conditions=(ready,))

    async def finalize_nodeclass(self, nc: ec2nodeclass.EC2NodeClass) -> None:
        raise AssertionError("not deleting")


async def test_nodeclass_status_is_refreshed_every_minute_like_upstream(api: rest.RestClient) -> None:
    now = clock.ManualClock()
    resolver = Resolver(now)
    controller = nodeclass_controller.NodeClassController(
        nodeclass_controller.Deps(
            client=api,
            cluster=cluster.Cluster(clock=now),
            cloud=resolver,
            clock=now,
            recorder=events.MemoryRecorder(now),
        )
    )
    await api.create(resources.EC2NODECLASSES, builders.ec2nodeclass("default"))

    again = await controller.reconcile("default")

    # aws: the subnet reconciler requeues after 1 min (settings "AMI / subnet refresh 1 min").
    assert again == 60.0
    # A refresh never comes back before the resolver's caches expire, so every periodic one sees fresh data.
    assert again >= cache.DEFAULT_TTL
    stored = await api.get(resources.EC2NODECLASSES, "default")
    assert stored is not None
    assert stored["status"]["instanceProfile"] == "profile-default"
    assert labels.FINALIZER_AWS_TERMINATION in stored["metadata"]["finalizers"]
    assert resolver.resolved == ["default"]


UPSTREAM_STAMPS = {
    # What upstream v1.14 leaves on a NodeClaim: hashstructure values under its own versions.
    labels.ANNOTATION_NODEPOOL_HASH: "4012279412359526432",
    labels.ANNOTATION_NODEPOOL_HASH_VERSION: "v3",
    labels.ANNOTATION_EC2NODECLASS_HASH: "14186958226245426398",
    labels.ANNOTATION_EC2NODECLASS_HASH_VERSION: "v6",
}


async def _taken_over(api: rest.RestClient, now: clock.ManualClock) -> cluster.Cluster:
    """A NodePool, its EC2NodeClass and a Launched NodeClaim as upstream stamped them, in the API and the cache."""
    cache = cluster.Cluster(clock=now)
    launched = {"type": "Launched", "status": "True", "reason": "Launched", "message": "",
                "lastTransitionTime": "2023-11-14T22:13:20Z"}  # fmt: skip
    objects = (
        (resources.EC2NODECLASSES, builders.ec2nodeclass("default")),
        (resources.NODEPOOLS, builders.nodepool("default")),
        (resources.NODECLAIMS, builders.nodeclaim("default-abcde", conditions=[launched])),
    )
    objects[2][1]["metadata"]["labels"][labels.LABEL_ARCH] = "amd64"
    for res, body in objects:
        body["metadata"]["annotations"] = dict(UPSTREAM_STAMPS)
        cache.apply(res, kube_client.WatchEvent(kube_client.ADDED, await api.create(res, body)))
    return cache


async def test_a_claim_stamped_by_upstream_is_restamped_with_karpys_hashes_and_not_drifted(
    api: rest.RestClient,
) -> None:
    now = clock.ManualClock()
    cache = await _taken_over(api, now)
    tracker = registration.RegistrationHealth()
    pools = nodepool_controller.NodePoolController(api, cache, clock=now, registration=tracker)
    await pools.reconcile("default")
    await nodeclass_controller.NodeClassController(
        nodeclass_controller.Deps(
            client=api, cluster=cache, cloud=Resolver(now), clock=now, recorder=events.MemoryRecorder(now)
        )
    ).reconcile("default")

    stored = await api.get(resources.NODECLAIMS, "default-abcde")
    pool = await api.get(resources.NODEPOOLS, "default")
    nodeclass = await api.get(resources.EC2NODECLASSES, "default")
    assert stored is not None
    assert pool is not None
    assert nodeclass is not None
    claim = parse.nodeclaim(stored)
    by_pool = {
        labels.ANNOTATION_NODEPOOL_HASH: hashing.nodepool_hash(parse.nodepool(pool)),
        labels.ANNOTATION_NODEPOOL_HASH_VERSION: labels.NODEPOOL_HASH_VERSION,
    }
    by_class = {
        labels.ANNOTATION_EC2NODECLASS_HASH: hashing.ec2nodeclass_hash(parse.ec2nodeclass(nodeclass)),
        labels.ANNOTATION_EC2NODECLASS_HASH_VERSION: labels.EC2NODECLASS_HASH_VERSION,
    }
    assert claim.metadata.annotations.items() >= {**by_pool, **by_class}.items()
    # The owners carry the same stamps, so neither core's nor the provider's hash comparison finds drift.
    assert pool["metadata"]["annotations"].items() >= by_pool.items()
    assert nodeclass["metadata"]["annotations"].items() >= by_class.items()
    assert disruption_conditions.static_drift(claim, parse.nodepool(pool)) is None
    assert not drift.hash_drifted(claim, parse.ec2nodeclass(nodeclass))


async def test_without_restamping_upstreams_claims_would_sit_outside_hash_drift(api: rest.RestClient) -> None:
    # The control: left as upstream stamped it, the claim is never hash-drifted (versions differ), but a real
    # change of the pool's template would then go unnoticed; re-stamped, the same change is drift.
    now = clock.ManualClock()
    cache = await _taken_over(api, now)
    tracker = registration.RegistrationHealth()
    pools = nodepool_controller.NodePoolController(api, cache, clock=now, registration=tracker)
    await pools.reconcile("default")
    stored = await api.get(resources.NODECLAIMS, "default-abcde")
    assert stored is not None
    changed = parse.nodepool(builders.nodepool("default", template={
        "metadata": {"labels": {"team": "new"}},
        "spec": builders.nodepool()["spec"]["template"]["spec"],
    }))  # fmt: skip
    assert disruption_conditions.static_drift(parse.nodeclaim(stored), changed) == "NodePoolDrifted"


async def test_node_registration_healthy_is_written_and_reset_by_a_pool_change(api: rest.RestClient) -> None:
    now = clock.ManualClock()
    tracker = registration.RegistrationHealth()
    cache = cluster.Cluster(clock=now)
    for res, body in (
        (resources.EC2NODECLASSES, builders.ec2nodeclass("default")),
        (resources.NODEPOOLS, builders.nodepool("default")),
    ):
        cache.apply(res, kube_client.WatchEvent(kube_client.ADDED, await api.create(res, body)))
    controller = nodepool_controller.NodePoolController(api, cache, clock=now, registration=tracker)

    async def condition() -> tuple[str, str]:
        stored = await api.get(resources.NODEPOOLS, "default")
        assert stored is not None
        found = meta.condition(nodepool_status.observed_conditions(stored), "NodeRegistrationHealthy")
        assert found is not None
        return found.status, found.reason

    await controller.reconcile("default")
    assert await condition() == ("Unknown", "AwaitingReconciliation")
    pool = await api.get(resources.NODEPOOLS, "default")
    assert pool is not None
    owned = builders.nodeclaim("default-abcde")
    owned["metadata"]["ownerReferences"] = [{"kind": "NodePool", "name": "default", "uid": pool["metadata"]["uid"]}]
    tracker.record(parse.nodeclaim(owned), registered=True)
    await controller.reconcile("default")
    assert await condition() == ("True", "NodeRegistrationHealthy")
    # A new generation of the pool: what was learned about the old one no longer holds.
    await api.patch(resources.NODEPOOLS, "default", {"spec": {"weight": 10}})
    await controller.reconcile("default")
    assert await condition() == ("Unknown", "AwaitingReconciliation")
    stored = await api.get(resources.NODEPOOLS, "default")
    assert stored is not None
    ready = meta.condition(nodepool_status.observed_conditions(stored), "Ready")
    assert ready is not None
    assert "NodeRegistrationHealthy" not in ready.message  # no dependent of Ready


async def test_a_deleted_nodeclass_in_use_says_which_nodeclaims_it_waits_on(api: rest.RestClient) -> None:
    """aws: nodeclass/controller.go `finalize` publishes WaitingOnNodeClaimTermination, again every 10 minutes."""
    now = clock.ManualClock()
    cache = cluster.Cluster(clock=now)
    body = builders.ec2nodeclass("default")
    body["metadata"]["finalizers"] = [labels.FINALIZER_AWS_TERMINATION]
    cache.apply(
        resources.EC2NODECLASSES,
        kube_client.WatchEvent(kube_client.ADDED, await api.create(resources.EC2NODECLASSES, body)),
    )
    for i in range(7):
        claim = builders.nodeclaim(f"default-{i}", pool="default")
        cache.apply(resources.NODECLAIMS, kube_client.WatchEvent(kube_client.ADDED, claim))
    await api.delete(resources.EC2NODECLASSES, "default")
    recorder = events.MemoryRecorder(now)
    controller = nodeclass_controller.NodeClassController(
        nodeclass_controller.Deps(client=api, cluster=cache, cloud=Resolver(now), clock=now, recorder=recorder)
    )
    assert await controller.reconcile("default") == nodeclass_controller.NODECLASS_IN_USE_POLL
    (told,) = recorder.events
    assert (told.type, told.reason) == ("Normal", "WaitingOnNodeClaimTermination")
    expected = "default-0, default-1, default-2, default-3, default-4 and 2 other(s)"
    assert told.message == f"Waiting on NodeClaim termination for {expected}"
    now.advance(nodeclass_controller.NODECLASS_IN_USE_POLL)
    await controller.reconcile("default")
    assert len(recorder.events) == 1  # not on every poll
    now.advance(nodeclass_controller.WAITING_EVENT_PERIOD)
    await controller.reconcile("default")
    assert len(recorder.events) == 2
