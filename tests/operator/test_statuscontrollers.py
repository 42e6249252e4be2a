"""The EC2NodeClass status controller against the emulated API server: what it writes and when it comes back."""

from __future__ import annotations

from tests import builders

from karpy import clock
from karpy.api import ec2nodeclass, labels, meta
from karpy.cloudprovider.aws import cache
from karpy.kube import resources, rest
from karpy.operator import statuscontrollers
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
    controller = statuscontrollers.NodeClassController(
        statuscontrollers.NodeClassDeps(kube=api, cluster=cluster.Cluster(clock=now), cloud=resolver, clock=now)
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
