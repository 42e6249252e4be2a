"""The label sets upstream puts on its per-node and per-pod gauges (pure).

- per node (core: pkg/controllers/metrics/node/controller.go `getNodeLabels`): every well-known label of the cloud
  provider under its name after the `/`, lowercased with `-` as `_` (`karpenter.k8s.aws/instance-cpu` →
  `instance_cpu`), valued from the Node's own labels, plus `node_name`, `phase` (the Node's status.phase) and
  `managed` (the node has a NodeClaim);
- per pod (core: pkg/controllers/metrics/pod/controller.go `makeLabels`): name, namespace, owner (a self link made
  from the first owner reference), node, scheduled, ready, phase, and the zone, arch, capacity type, instance type
  and NodePool of the Node it is bound to, with `managed` (that Node has a NodePool).

Prometheus holds a label with an empty value to be no label at all, so `present` leaves empty values out of a
sample: the same series as upstream's, without rendering dozens of `label=""` per node on every scrape.
`PerObject` keeps each object's labels from one scrape to the next while the state cache holds the same object.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, Final, Generic, TypeVar

from karpy.api import labels
from karpy.runtime.metrics import textformat
from karpy.state import facts

T = TypeVar("T")

UPSTREAM_WELL_KNOWN: Final[frozenset[str]] = labels.WELL_KNOWN_LABELS - {labels.LABEL_EC2NODECLASS}
"""Upstream's well-known labels (core WellKnownLabels + the AWS provider's): karpy also counts the ec2nodeclass
label as well-known for requirements, upstream does not, so it is no label of these series."""


def metric_label_name(key: str) -> str:
    """`karpenter.k8s.aws/instance-cpu` → `instance_cpu` (core: metrics/node/controller.go getWellKnownLabels)."""
    return key.split("/", 1)[1].lower().replace("-", "_")


WELL_KNOWN_NAMES: Final[tuple[tuple[str, str], ...]] = tuple(
    sorted((key, metric_label_name(key)) for key in UPSTREAM_WELL_KNOWN if key.count("/") == 1)
)
"""(node label key, metric label name) of every well-known label."""
NODE_LABELS: Final[tuple[str, ...]] = (*sorted(name for _, name in WELL_KNOWN_NAMES), "node_name", "phase", "managed")
"""The labels of `karpenter_nodes_current_lifetime_seconds`."""
NODE_RESOURCE_LABELS: Final[tuple[str, ...]] = (*NODE_LABELS, "resource_type")
"""The labels of the per-node resource gauges (`karpenter_nodes_allocatable`, ...)."""
POD_LABELS: Final[tuple[str, ...]] = (
    "name", "namespace", "owner", "node", "scheduled", "nodepool", "zone", "arch", "capacity_type", "instance_type",
    "phase", "ready", "managed",
)  # fmt: skip
"""The labels of `karpenter_pods_state`."""


RESOURCE_TYPE: Final = "resource_type"


@dataclasses.dataclass(frozen=True, slots=True)
class Rendered:
    """An object's labels and their label text, split where `resource_type` sorts in (`textformat.label_text`)."""

    labels: Mapping[str, str]
    before: str
    after: str

    @classmethod
    def of(cls, labels: Mapping[str, str]) -> Rendered:
        ordered = sorted(labels.items())
        split = sum(1 for name, _ in ordered if name < RESOURCE_TYPE)
        return cls(labels, textformat.label_text(ordered[:split]), textformat.label_text(ordered[split:]))

    @property
    def text(self) -> str:
        return textformat.joined(self.before, self.after)

    def with_resource(self, resource_type: str) -> str:
        """The label text with `resource_type` added."""
        added = f'{RESOURCE_TYPE}="{textformat.escape(resource_type)}"'
        return textformat.joined(self.before, added, self.after)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _flag(value: bool) -> str:
    return "true" if value else "false"


def present(values: Mapping[str, str]) -> dict[str, str]:
    """The labels with a value: Prometheus reads `l=""` and no `l` alike."""
    return {k: v for k, v in values.items() if v}


def node_labels(node: Mapping[str, Any], *, managed: bool) -> dict[str, str]:
    """A Node's labels on the per-node gauges (empty values left out)."""
    md = facts.metadata(node)
    on_node = _mapping(md.get("labels"))
    out = {name: str(on_node[key]) for key, name in WELL_KNOWN_NAMES if on_node.get(key)}
    out["node_name"] = str(md.get("name", ""))
    phase = _mapping(node.get("status")).get("phase")
    if phase:
        out["phase"] = str(phase)
    out["managed"] = _flag(managed)
    return out


def owner(pod: Mapping[str, Any]) -> str:
    """The self link of the pod's first owner reference, as upstream builds it ("" without one)."""
    md = facts.metadata(pod)
    refs = md.get("ownerReferences") or ()
    if not refs:
        return ""
    ref = _mapping(refs[0])
    kind = str(ref.get("kind", "")).lower()
    return f"/apis/{ref.get('apiVersion', '')}/namespaces/{md.get('namespace', '')}/{kind}s/{ref.get('name', '')}"


def pod_labels(pod: Mapping[str, Any], node: Mapping[str, Any] | None, *, ready: bool) -> dict[str, str]:
    """A pod's labels on `karpenter_pods_state`; `node` is the Node it is bound to, None when unbound or unknown
    (empty values left out)."""
    md = facts.metadata(pod)
    node_name = str(_mapping(pod.get("spec")).get("nodeName") or "")
    on_node = _mapping(facts.metadata(node).get("labels")) if node is not None else {}
    pool = str(on_node.get(labels.LABEL_NODEPOOL, ""))
    return present(
        {
            "name": str(md.get("name", "")),
            "namespace": str(md.get("namespace", "")),
            "owner": owner(pod),
            "node": node_name,
            "scheduled": _flag(bool(node_name)),
            "nodepool": pool,
            "zone": str(on_node.get(labels.LABEL_ZONE, "")),
            "arch": str(on_node.get(labels.LABEL_ARCH, "")),
            "capacity_type": str(on_node.get(labels.LABEL_CAPACITY_TYPE, "")),
            "instance_type": str(on_node.get(labels.LABEL_INSTANCE_TYPE, "")),
            "phase": str(_mapping(pod.get("status")).get("phase") or ""),
            "ready": _flag(ready),
            "managed": _flag(bool(pool)),
        }
    )


def rendered_node(node: Mapping[str, Any], *, managed: bool) -> Rendered:
    return Rendered.of(node_labels(node, managed=managed))


def rendered_pod(pod: Mapping[str, Any], node: Mapping[str, Any] | None, *, ready: bool) -> Rendered:
    return Rendered.of(pod_labels(pod, node, ready=ready))


class PerObject(Generic[T]):
    """What a scrape derives from an object (its labels), derived again only for an object the state cache replaced
    since the last scrape: it stores a new object on every change, so the same object, with the same `depends_on`,
    gives the same result. Objects are told apart by identity, which an entry keeps valid by holding its object."""

    def __init__(self) -> None:
        self._kept: dict[int, tuple[object, object, T]] = {}
        self._seen: dict[int, tuple[object, object, T]] = {}

    def get(self, obj: object, depends_on: object, build: Callable[[], T]) -> T:
        hit = self._kept.get(id(obj))
        if hit is None or hit[1] is not depends_on:
            hit = (obj, depends_on, build())
        self._seen[id(obj)] = hit  # the entry itself when kept: nothing new for the collector to trace
        return hit[2]

    def scraped(self) -> None:
        """The scrape is over: keep what it saw, forget the objects gone since."""
        self._kept, self._seen = self._seen, {}
