"""Pure readings of raw Kubernetes objects the cluster model indexes by (pod provisionability, node shape).

Upstream's rules (core:pkg/utils/pod/scheduling.go `IsProvisionable`): a pod is
provisionable iff its PodScheduled condition is False with reason Unschedulable, it has no nodeName, no
nominatedNodeName (the scheduler is preempting for it), it is neither DaemonSet-owned nor a mirror pod, and it is
neither terminal nor being deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from karpy.api import decoding, meta, quantity

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return _mapping(obj.get("metadata"))


def key(obj: Mapping[str, Any]) -> str:
    """`namespace/name` for namespaced objects, `name` for cluster-scoped ones."""
    meta_ = metadata(obj)
    namespace, name = str(meta_.get("namespace") or ""), str(meta_.get("name") or "")
    return f"{namespace}/{name}" if namespace else name


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What the cluster model indexes a pod by; computed once per event."""

    node_name: str
    terminal: bool
    deleting: bool
    provisionable: bool


def _unschedulable(status: Mapping[str, Any]) -> bool:
    for condition in status.get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == "PodScheduled":
            return condition.get("status") == "False" and condition.get("reason") == "Unschedulable"
    return False


def _daemonset_owned(meta_: Mapping[str, Any]) -> bool:
    return any(
        isinstance(ref, Mapping) and ref.get("controller") and ref.get("kind") == "DaemonSet"
        for ref in meta_.get("ownerReferences") or ()
    )


def pod_facts(obj: Mapping[str, Any]) -> PodFacts:
    meta_, spec, status = metadata(obj), _mapping(obj.get("spec")), _mapping(obj.get("status"))
    node_name = str(spec.get("nodeName") or "")
    terminal = status.get("phase") in TERMINAL_PHASES
    deleting = bool(meta_.get("deletionTimestamp"))
    provisionable = (
        _unschedulable(status)
        and not node_name
        and not status.get("nominatedNodeName")
        and not _daemonset_owned(meta_)
        and MIRROR_ANNOTATION not in _mapping(meta_.get("annotations"))
        and not terminal
        and not deleting
    )
    return PodFacts(node_name=node_name, terminal=terminal, deleting=deleting, provisionable=provisionable)


def with_epoch_creation(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The pod with an RFC 3339 creationTimestamp turned into epoch seconds, which `scheduling.pods` reads
    (its queue order breaks ties by age); shallow copies only, the input is not touched."""
    meta_ = metadata(obj)
    created = meta_.get("creationTimestamp")
    if not isinstance(created, str):
        return obj
    try:
        epoch = decoding.timestamp(created)
    except ValueError:
        return obj
    return {**obj, "metadata": {**meta_, "creationTimestamp": epoch}}


def resource_list(value: Any) -> dict[str, int]:
    """A node's `status.capacity`/`allocatable` as milli-units; unparsable entries are skipped, not fatal."""
    out: dict[str, int] = {}
    for name, amount in _mapping(value).items():
        try:
            out[str(name)] = quantity.parse(amount)
        except (quantity.QuantityError, TypeError, AttributeError):
            continue
    return out


def node_taints(node: Mapping[str, Any]) -> tuple[meta.Taint, ...]:
    taints = []
    for taint in _mapping(node.get("spec")).get("taints") or ():
        if isinstance(taint, Mapping) and taint.get("key"):
            taints.append(meta.Taint(str(taint["key"]), str(taint.get("effect") or ""), str(taint.get("value") or "")))
    return tuple(taints)


def node_provider_id(node: Mapping[str, Any]) -> str:
    return str(_mapping(node.get("spec")).get("providerID") or "")


def daemonset_pod(daemonset: Mapping[str, Any]) -> dict[str, Any]:
    """The pod a DaemonSet would create (its template, owned by it) for daemon-overhead accounting."""
    meta_ = metadata(daemonset)
    template = _mapping(_mapping(daemonset.get("spec")).get("template"))
    template_meta = _mapping(template.get("metadata"))
    owner = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "name": meta_.get("name", ""),
        "uid": meta_.get("uid", ""),
        "controller": True,
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            **template_meta,
            "name": meta_.get("name", ""),
            "namespace": meta_.get("namespace", ""),
            "uid": meta_.get("uid", ""),
            "ownerReferences": [owner],
        },
        "spec": dict(_mapping(template.get("spec"))),
    }
