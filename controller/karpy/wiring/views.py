"""What the provisioner sees of the state cache: `state.Cluster`, with upstream's stricter meaning of "synced".

Upstream's `state.Cluster.Synced()` is false while any NodeClaim has not resolved its providerID: an un-launched
claim has no instance type yet, so it holds no capacity in a scheduling simulation, and a provisioning pass run
then would launch a second node for the pods the first one is already coming up for. The informer-level `synced()`
of our Cluster (every informer listed once) also gates readiness and the metrics, which must not flap with every
launch, so the stricter gate is applied here, to the provisioner only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from karpy.api import ec2nodeclass, nodepool
from karpy.kube import resources
from karpy.provisioning import ports
from karpy.scheduling import pods, volumes
from karpy.state import cluster as state_cluster


class ProvisioningView:
    """`ports.ClusterView` over a `Cluster` whose `synced()` also waits for in-flight launches."""

    def __init__(self, cluster: state_cluster.Cluster) -> None:
        self._cluster = cluster

    def synced(self) -> bool:
        return self._cluster.synced() and self._cluster.launches_resolved()

    def nodepools(self) -> list[nodepool.NodePool]:
        return self._cluster.nodepools()

    def nodeclasses(self) -> dict[str, ec2nodeclass.EC2NodeClass]:
        return self._cluster.nodeclasses()

    def state_nodes(self) -> Sequence[ports.StateNodeView]:
        return self._cluster.state_nodes()

    def pending_pods(self) -> list[pods.Pod]:
        return self._cluster.pending_pods()

    def daemonsets(self) -> list[pods.Pod]:
        return self._cluster.daemonsets()

    def volumes(self) -> volumes.VolumeCatalog:
        return self._cluster.volumes()

    def nodepool_usage(self, name: str) -> dict[str, int]:
        return self._cluster.nodepool_usage(name)

    def nominate(self, node_name: str, until: float) -> None:
        self._cluster.nominate(node_name, until)

    def record_created(self, res: resources.Resource, obj: Mapping[str, Any]) -> None:
        self._cluster.record_created(res, obj)
