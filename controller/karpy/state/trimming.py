"""What the cluster state keeps of a watched object: the fields its readers use, like client-go's informer transforms
(`cache.TransformFunc`, e.g. `TransformStripManagedFields`).

A decoded pod or node costs about 15 times its parsed model, and at 10,000 pods the raw pods were most of the
controller's memory. Two steps, both returning new dicts (the input is never changed):

- `before_parsing` drops what no reader of any object uses: `metadata.managedFields` of every object, and a node's
  `status.images` (the image list a kubelet reports, often the biggest part of a node). Every parser, applier and
  listener sees the object without them.
- `stored_pod` is what `Cluster` keeps of a pod once it has been parsed: the model (`scheduling.pods.Pod`) holds its
  scheduling constraints, so the raw copy keeps only what the raw readers use. Those are
  `disruption.candidates.pod_info` (labels, annotations, owners, deletion, `spec.priority`, `status.phase` and
  `status.startTime`), `state.facts.pod_facts` (`spec.nodeName`, the phase, the PodScheduled condition,
  `status.nominatedNodeName`), the listeners' view of the object before a change
  (`nodeclaim.disruption_conditions.pod_event_time`: `spec.nodeName`, the phase, the PodScheduled condition) and
  the rejection reports (`apiVersion`, `kind`, `metadata`). A pod that does not parse is kept whole, to be reported
  as it is.

What is kept of a pod, and a Node or NodeClaim whole, is stored with its strings interned (module `sharing`): each
watch event is decoded on its own, so without it every stored object held its own copy of every key and of every
value other objects repeat.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpy.kube import resources
from karpy.state import sharing

POD_SPEC_KEPT = ("nodeName", "priority", "priorityClassName", "schedulerName", "preemptionPolicy")
"""Fields of a pod's spec that its stored copy keeps."""
POD_STATUS_DROPPED = (
    "containerStatuses",
    "initContainerStatuses",
    "ephemeralContainerStatuses",
    "resourceClaimStatuses",
)
"""Fields of a pod's status that its stored copy drops (per-container reports: no decision reads them)."""
SHARED_WHOLE = (resources.NODES, resources.NODECLAIMS)
"""Resources stored whole whose strings are interned: one per node, each event a new copy. A pod's strings are
interned in its stored copy (`stored_pod`), the part of it that is kept."""


def before_parsing(res: resources.Resource, obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """`obj` without the fields no reader uses (the same object when it has none of them); a Node or NodeClaim, which
    the cache keeps whole, with its strings shared (`sharing.interned`)."""
    meta = obj.get("metadata")
    strip_meta = isinstance(meta, Mapping) and "managedFields" in meta
    status = obj.get("status")
    strip_images = res == resources.NODES and isinstance(status, Mapping) and "images" in status
    out = obj
    if strip_meta or strip_images:
        out = dict(obj)
        if strip_meta and isinstance(meta, Mapping):
            out["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
        if strip_images and isinstance(status, Mapping):
            out["status"] = {k: v for k, v in status.items() if k != "images"}
    if res in SHARED_WHOLE:
        return sharing.interned(out)  # type: ignore[no-any-return]
    return out


def stored_pod(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """What `Cluster` keeps of a parsed pod (see the module docstring)."""
    out: dict[str, Any] = {k: obj[k] for k in ("apiVersion", "kind", "metadata") if k in obj}
    spec = obj.get("spec")
    if isinstance(spec, Mapping):
        out["spec"] = {k: spec[k] for k in POD_SPEC_KEPT if k in spec}
    status = obj.get("status")
    if isinstance(status, Mapping):
        out["status"] = {k: v for k, v in status.items() if k not in POD_STATUS_DROPPED}
    return sharing.interned(out)  # type: ignore[no-any-return]
