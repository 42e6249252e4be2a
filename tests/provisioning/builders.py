"""Builders and an in-memory `ClusterView` for provisioning tests (import as tests.provisioning.builders)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy.api import ec2nodeclass, meta, nodepool
from karpy.kube import resources
from karpy.scheduling import pods, volumes


@dataclass
class StateNode:
    """Mirrors the read fields of karpy.state's StateNode."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[meta.Taint, ...] = ()
    allocatable: Mapping[str, int] = field(default_factory=dict)
    pods: Sequence[pods.Pod] = ()
    nodepool: str = ""
    initialized: bool = True
    marked_for_deletion: bool = False
    deleting: bool = False
    volume_limits: Mapping[str, int] = field(default_factory=dict)
    held: frozenset[str] = frozenset()


@dataclass
class Cluster:
    """An in-memory `ClusterView`; tests set the fields directly."""

    pools: list[nodepool.NodePool] = field(default_factory=list)
    nodes: list[StateNode] = field(default_factory=list)
    pending: list[pods.Pod] = field(default_factory=list)
    usage: dict[str, dict[str, int]] = field(default_factory=dict)
    classes: dict[str, ec2nodeclass.EC2NodeClass] = field(default_factory=dict)
    is_synced: bool = True
    nominations: dict[str, float] = field(default_factory=dict)
    recorded: list[tuple[resources.Resource, dict[str, Any]]] = field(default_factory=list)

    def synced(self) -> bool:
        return self.is_synced

    def nodepools(self) -> list[nodepool.NodePool]:
        return list(self.pools)

    def nodeclasses(self) -> dict[str, ec2nodeclass.EC2NodeClass]:
        return dict(self.classes)

    def state_nodes(self) -> list[StateNode]:
        return list(self.nodes)

    def pending_pods(self) -> list[pods.Pod]:
        return list(self.pending)

    def daemonsets(self) -> list[pods.Pod]:
        return []

    def volumes(self) -> volumes.VolumeCatalog:
        return volumes.VolumeCatalog()

    def nodepool_usage(self, name: str) -> dict[str, int]:
        return dict(self.usage.get(name, {}))

    def nominate(self, node_name: str, until: float) -> None:
        self.nominations[node_name] = until

    def record_created(self, res: resources.Resource, obj: Mapping[str, Any]) -> None:
        self.recorded.append((res, dict(obj)))
