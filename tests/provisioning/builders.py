"""Builders and in-memory stand-ins for provisioning tests (import as tests.provisioning.builders)."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy.api import ec2nodeclass, meta, nodepool, parse
from karpy.kube import client, resources
from karpy.scheduling import pods, volumes

NODECLASS_REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


def parsed_nodepool(name: str = "default", *, uid: str = "", **template_spec: Any) -> nodepool.NodePool:
    """A NodePool through the real parser; keyword arguments are spec.template.spec fields, plus `metadata_`
    (spec.template.metadata), `limits` and `annotations_` (the pool's own annotations)."""
    template_meta = template_spec.pop("metadata_", {})
    limits = template_spec.pop("limits", None)
    own_annotations = template_spec.pop("annotations_", {})
    spec: dict[str, Any] = {
        "template": {
            "metadata": template_meta,
            "spec": {"nodeClassRef": NODECLASS_REF, "requirements": [], **template_spec},
        }
    }
    if limits is not None:
        spec["limits"] = limits
    metadata: dict[str, Any] = {"name": name, "annotations": own_annotations}
    if uid:
        metadata["uid"] = uid
    return parse.nodepool({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": metadata, "spec": spec})


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


class MemoryClient:
    """Just enough of `KubeClient` for the reconcilers: an object store with generateName, create failures on demand."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.fail_creates: int = 0
        self._suffix = itertools.count()

    def of(self, res: resources.Resource) -> list[dict[str, Any]]:
        return [o for (plural, _, _), o in self.objects.items() if plural == res.plural]

    async def get(self, res: resources.Resource, name: str, *, namespace: str = "") -> dict[str, Any] | None:
        return self.objects.get((res.plural, namespace, name))

    async def list(
        self, res: resources.Resource, *, namespace: str = "", label_selector: str = "", field_selector: str = ""
    ) -> tuple[list[dict[str, Any]], str]:
        return self.of(res), "1"

    async def create(self, res: resources.Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        if self.fail_creates:
            self.fail_creates -= 1
            raise client.KubeError(500, "InternalError", "injected")
        obj = {**body, "metadata": dict(body["metadata"])}
        md = obj["metadata"]
        if not md.get("name"):
            md["name"] = f"{md['generateName']}{next(self._suffix):05d}"
        self.objects[(res.plural, md.get("namespace", ""), md["name"])] = obj
        return obj

    async def delete(
        self, res: resources.Resource, name: str, *, namespace: str = "", grace_period_seconds: int | None = None
    ) -> bool:
        return self.objects.pop((res.plural, namespace, name), None) is not None

    async def patch(
        self,
        res: resources.Resource,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        namespace: str = "",
        subresource: str = "",
    ) -> dict[str, Any]:
        obj = self.objects.get((res.plural, namespace, name))
        if obj is None:
            raise client.NotFound(404, "NotFound", f"{res} {name} not found")
        if not isinstance(patch, Mapping):
            raise NotImplementedError("JSON patch is not needed by these tests")
        _merge(obj, patch)
        return obj

    def watch(
        self, res: resources.Resource, *, resource_version: str, namespace: str = "", timeout_seconds: int = 300
    ) -> AsyncIterator[client.WatchEvent]:
        raise NotImplementedError("the reconcilers under test read state, not watches")

    async def evict(self, namespace: str, name: str) -> client.EvictionOutcome:
        raise NotImplementedError

    async def bind(self, namespace: str, name: str, node: str) -> None:
        raise NotImplementedError


def _merge(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = value
