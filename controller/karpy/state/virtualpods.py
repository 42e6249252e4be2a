"""The CapacityBuffers' virtual pods (core: pkg/state/virtualpods/virtualpods.go, utilities.go).

A ready buffer asking for N chunks is N placeholder pods shaped like its pod template, never created in the API:
the provisioner schedules them with the pending pods, so room for them is launched, and disruption's simulations
schedule them too, so consolidation keeps that room while the buffer asks for it. The buffer controller writes an
entry per buffer (`Cache.update`) and drops it when the buffer goes or is not ready; the provisioner records which
nodes its last pass put virtual pods on (`Cache.place`), which emptiness reads (core: state/cluster.go
UpdateBufferPodCounts, HasBufferPods).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from karpy.api import capacitybuffer
from karpy.scheduling import pods

OWNER_KIND: Final = capacitybuffer.KIND
"""A virtual pod's controller kind: how the provisioner tells it from a real pod (upstream marks it with the
annotation karpenter.sh/capacity-buffer-fake-pod)."""
FAKE_POD_ANNOTATION: Final = "karpenter.sh/capacity-buffer-fake-pod"
BUFFER_NAME_ANNOTATION: Final = "karpenter.sh/capacity-buffer-name"
BUFFER_NAMESPACE_ANNOTATION: Final = "karpenter.sh/capacity-buffer-namespace"
PRIORITY: Final = -(2**31)
"""Upstream's VirtualPodPriority (math.MinInt32): the least valuable pods of the cluster."""


def is_virtual(pod: pods.Pod) -> bool:
    return pod.owner_kind == OWNER_KIND


def pod_name(buffer: str, index: int) -> str:
    """`capacity-buffer-<buffer>-<i>`, i from 1 (utilities.go BuildVirtualPods)."""
    return f"capacity-buffer-{buffer}-{index}"


def _sanitized(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The template's spec without what a placeholder cannot have: a nodeName, and PVC-backed or ephemeral volumes
    (their claims never exist) with their mounts (utilities.go sanitizeVirtualPodSpec)."""
    out = dict(spec)
    out.pop("nodeName", None)
    volumes = [v for v in spec.get("volumes") or () if isinstance(v, Mapping)]
    dropped = {v.get("name") for v in volumes if "persistentVolumeClaim" in v or "ephemeral" in v}
    if dropped:
        out["volumes"] = [v for v in volumes if v.get("name") not in dropped]
        for field in ("containers", "initContainers"):
            out[field] = [
                {**c, "volumeMounts": [m for m in c.get("volumeMounts") or () if m.get("name") not in dropped]}
                for c in spec.get(field) or ()
            ]
    out["priority"] = PRIORITY
    return out


def manifests(
    *, namespace: str, name: str, uid: str, template: Mapping[str, Any], replicas: int
) -> list[dict[str, Any]]:
    """`replicas` placeholder pod manifests for the buffer `namespace/name` from its pod template (labels kept, so
    spreads and affinities count them as upstream's do)."""
    meta = template.get("metadata") or {}
    spec = _sanitized(template.get("spec") or {})
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": pod_name(name, i),
                "namespace": namespace,
                "uid": f"{uid}-{i}",
                "labels": dict(meta.get("labels") or {}),
                "annotations": {
                    FAKE_POD_ANNOTATION: "true",
                    BUFFER_NAME_ANNOTATION: name,
                    BUFFER_NAMESPACE_ANNOTATION: namespace,
                },
                "ownerReferences": [
                    {
                        "apiVersion": capacitybuffer.API_VERSION,
                        "kind": OWNER_KIND,
                        "name": name,
                        "uid": uid,
                        "controller": True,
                    }
                ],
            },
            "spec": spec,
            "status": {"phase": "Pending"},
        }
        for i in range(1, replicas + 1)
    ]


class Cache:
    """Virtual pods by buffer (`namespace/name`), and the nodes the provisioner last placed some on."""

    __slots__ = ("_buffer_of", "_by_buffer", "_on_nodes")

    def __init__(self) -> None:
        self._by_buffer: dict[str, tuple[pods.Pod, ...]] = {}
        self._buffer_of: dict[str, str] = {}
        self._on_nodes: dict[str, int] = {}

    def update(self, buffer: str, placeholders: Sequence[pods.Pod]) -> None:
        self.remove(buffer)
        if placeholders:
            self._by_buffer[buffer] = tuple(placeholders)
            self._buffer_of.update((p.key, buffer) for p in placeholders)

    def remove(self, buffer: str) -> None:
        for p in self._by_buffer.pop(buffer, ()):
            self._buffer_of.pop(p.key, None)

    def all(self) -> list[pods.Pod]:
        return [p for key in sorted(self._by_buffer) for p in self._by_buffer[key]]

    def buffer_of(self, pod_key: str) -> str | None:
        """The buffer a virtual pod belongs to, or None for any other pod."""
        return self._buffer_of.get(pod_key)

    def place(self, counts: Mapping[str, int]) -> bool:
        """Replace the virtual pods counted per node after a provisioning pass (state/cluster.go
        UpdateBufferPodCounts): existing nodes only, as a new claim has no node yet. True when that changed."""
        placed = {node: n for node, n in counts.items() if n > 0}
        changed = placed != self._on_nodes
        self._on_nodes = placed
        return changed

    def on_node(self, node: str) -> int:
        return self._on_nodes.get(node, 0)
