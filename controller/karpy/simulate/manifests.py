"""Read manifests from files and directories and sort them into the scheduler's inputs.

Every document is parsed by the same parsers the controller uses; any problem (bad YAML, unknown kind, an invalid
NodePool) becomes one `InputError` naming the file, the document and the field, so the CLI can print it and exit 2.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from karpy.api import ec2nodeclass, errors, labels, meta, nodepool, parse, quantity
from karpy.scheduling import pods as pod_model
from karpy.scheduling import scheduler, volumes, workloads

YAML_SUFFIXES = (".yaml", ".yml", ".json")
WORKLOAD_KINDS = frozenset({"Deployment", "ReplicaSet", "StatefulSet", "Job"})
SUPPORTED_KINDS = (
    "NodePool, EC2NodeClass, Pod, Deployment, ReplicaSet, StatefulSet, Job, DaemonSet, PersistentVolumeClaim, "
    "PersistentVolume, StorageClass, PodDisruptionBudget, Node"
)


class InputError(ValueError):
    """Input the simulation cannot use; the message names where and what."""


@dataclass(frozen=True, slots=True)
class Document:
    source: str  # "path/to/file.yaml#2": file and 1-based document index
    body: Mapping[str, Any]


@dataclass
class Cluster:
    """Everything the manifests describe, parsed."""

    nodepools: list[nodepool.NodePool] = field(default_factory=list)
    nodeclasses: dict[str, ec2nodeclass.EC2NodeClass] = field(default_factory=dict)
    pending: list[pod_model.Pod] = field(default_factory=list)
    bound: list[pod_model.Pod] = field(default_factory=list)
    daemonsets: list[pod_model.Pod] = field(default_factory=list)
    nodes: list[Mapping[str, Any]] = field(default_factory=list)
    pvcs: list[volumes.PersistentVolumeClaim] = field(default_factory=list)
    pvs: list[volumes.PersistentVolume] = field(default_factory=list)
    storage_classes: list[volumes.StorageClass] = field(default_factory=list)
    pdbs: list[Mapping[str, Any]] = field(default_factory=list)


def expand_paths(paths: Iterable[str]) -> list[Path]:
    """Files as given, directories as their YAML files in name order (so numbered files apply in order)."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            out.extend(sorted(p for p in path.iterdir() if p.is_file() and p.suffix in YAML_SUFFIXES))
        elif path.is_file():
            out.append(path)
        else:
            raise InputError(f"{raw}: no such file or directory")
    if not out:
        raise InputError(f"no manifests found in {', '.join(paths)}")
    return out


def read_documents(paths: Sequence[Path]) -> Iterator[Document]:
    for path in paths:
        try:
            loaded = list(yaml.safe_load_all(path.read_text()))
        except yaml.YAMLError as exc:
            raise InputError(f"{path}: invalid YAML: {exc}") from exc
        except OSError as exc:
            raise InputError(f"{path}: {exc.strerror}") from exc
        for index, body in enumerate(loaded, start=1):
            if body is None:
                continue  # an empty document between two '---'
            if not isinstance(body, dict):
                raise InputError(f"{path}#{index}: a manifest must be a mapping, got {type(body).__name__}")
            yield Document(source=f"{path}#{index}", body=body)


def _kind(doc: Document) -> str:
    kind = doc.body.get("kind")
    if not isinstance(kind, str) or not kind:
        raise InputError(f"{doc.source}: kind: required")
    if kind == "List":
        raise InputError(f"{doc.source}: kind: List is not supported; write one document per object")
    return kind


def _add(cluster: Cluster, doc: Document) -> None:
    kind = _kind(doc)
    body = doc.body
    if kind == "NodePool":
        cluster.nodepools.append(parse.nodepool(body))
    elif kind == "EC2NodeClass":
        nodeclass = parse.ec2nodeclass(body)
        cluster.nodeclasses[nodeclass.name] = nodeclass
    elif kind == "Pod":
        pod = pod_model.from_manifest(body)
        (cluster.bound if pod.node_name else cluster.pending).append(pod)
    elif kind in WORKLOAD_KINDS:
        cluster.pending.extend(workloads.expand(body))
        if kind == "StatefulSet":
            cluster.pvcs.extend(statefulset_claims(body))
    elif kind == "DaemonSet":
        cluster.daemonsets.extend(workloads.expand(body))
    elif kind == "PersistentVolumeClaim":
        cluster.pvcs.append(volumes.pvc_from_manifest(body))
    elif kind == "PersistentVolume":
        cluster.pvs.append(volumes.pv_from_manifest(body))
    elif kind == "StorageClass":
        cluster.storage_classes.append(volumes.storage_class_from_manifest(body))
    elif kind == "PodDisruptionBudget":
        cluster.pdbs.append(body)
    elif kind == "Node":
        cluster.nodes.append(body)
    else:
        raise InputError(f"{doc.source}: kind: unknown kind {kind!r}; supported kinds: {SUPPORTED_KINDS}")


def statefulset_claims(obj: Mapping[str, Any]) -> list[volumes.PersistentVolumeClaim]:
    """The claims a StatefulSet controller would create for its replicas (`<template>-<set>-<ordinal>`), unbound.

    In a cluster they exist before the pods are scheduled; offline nobody creates them, so the simulation does, or
    every pod with a claim template would be reported as waiting for a missing claim.
    """
    metadata, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    name, namespace = str(metadata.get("name", "")), str(metadata.get("namespace") or "default")
    replicas = spec.get("replicas", 1)
    out: list[volumes.PersistentVolumeClaim] = []
    for template in spec.get("volumeClaimTemplates") or []:
        template_name = str((template.get("metadata") or {}).get("name", ""))
        storage_class = str((template.get("spec") or {}).get("storageClassName") or "")
        out.extend(
            volumes.PersistentVolumeClaim(namespace, f"{template_name}-{name}-{i}", "", storage_class)
            for i in range(replicas if isinstance(replicas, int) else 0)
        )
    return out


def load(paths: Iterable[str]) -> Cluster:
    """Parse every manifest under `paths`; raise InputError on the first document that cannot be used."""
    cluster = Cluster()
    for doc in read_documents(expand_paths(paths)):
        try:
            _add(cluster, doc)
        except errors.ValidationError as exc:
            raise InputError(f"{doc.source}: {exc}") from exc
    names = [pool.name for pool in cluster.nodepools]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InputError(f"NodePool {duplicates[0]!r} is defined more than once")
    return cluster


def _node_taints(spec: Mapping[str, Any]) -> tuple[meta.Taint, ...]:
    raw = spec.get("taints") or []
    return tuple(
        meta.Taint(key=str(t.get("key", "")), effect=str(t.get("effect", "")), value=str(t.get("value", "")))
        for t in raw
        if isinstance(t, Mapping)
    )


def existing_nodes(cluster: Cluster) -> list[scheduler.ExistingNode]:
    """Nodes from the manifests with the pods bound to them; allocatable from status (capacity if absent)."""
    by_node: dict[str, list[pod_model.Pod]] = {}
    for pod in cluster.bound:
        by_node.setdefault(pod.node_name, []).append(pod)
    out: list[scheduler.ExistingNode] = []
    for body in cluster.nodes:
        metadata = body.get("metadata") or {}
        name = str(metadata.get("name", ""))
        node_labels = {str(k): str(v) for k, v in (metadata.get("labels") or {}).items()}
        node_labels.setdefault(labels.LABEL_HOSTNAME, name)
        status = body.get("status") or {}
        raw_alloc = status.get("allocatable") or status.get("capacity") or {}
        try:
            allocatable = {str(k): quantity.parse(v) for k, v in raw_alloc.items()}
        except quantity.QuantityError as exc:
            raise InputError(f"Node {name!r}: status.allocatable: {exc}") from exc
        out.append(
            scheduler.ExistingNode(
                name=name,
                labels=node_labels,
                taints=_node_taints(body.get("spec") or {}),
                allocatable=allocatable,
                pods=tuple(by_node.get(name, ())),
                nodepool=node_labels.get(labels.LABEL_NODEPOOL),
            )
        )
    return out


def volume_catalog(cluster: Cluster) -> volumes.VolumeCatalog:
    return volumes.VolumeCatalog.build(cluster.pvcs, cluster.pvs, cluster.storage_classes)
