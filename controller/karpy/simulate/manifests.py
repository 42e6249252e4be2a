"""Read manifests from files and directories and sort them into the scheduler's inputs.

Reading is strict, like `kubectl apply --validate=strict` against an API server: YAML through the bounded reader
(`karpy.api.documents`: 50 MiB, nesting, aliases), core kinds against their OpenAPI structure (`corekinds`: the
right apiVersion, no unknown fields, the right types) and the API server's semantic checks (`corerules`), Karpenter
kinds through the parsers the controller uses (CRD schema and CEL rules). The whole set must also hold together:
one object per kind and name, an EC2NodeClass for every NodePool that names one, at most `MAX_PODS` pods. Any
problem becomes one `InputError` naming the file, the document (and its line) and the field, so the CLI can print
it and exit 2; no other exception escapes `load`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Final

from karpy.api import (
    capacitybuffer,
    corekinds,
    corerules,
    documents,
    ec2nodeclass,
    errors,
    fieldlines,
    labels,
    nodeoverlay,
    nodepool,
    parse,
)
from karpy.scheduling import pods as scheduling_pods
from karpy.scheduling import volumes, workloads
from karpy.simulate import inputs

log = logging.getLogger(__name__)

WORKLOAD_KINDS = frozenset({"Deployment", "ReplicaSet", "StatefulSet", "Job"})
SUPPORTED_KINDS = (
    "NodePool, EC2NodeClass, Pod, Deployment, ReplicaSet, StatefulSet, Job, DaemonSet, PersistentVolumeClaim, "
    "PersistentVolume, StorageClass, CSINode, PodDisruptionBudget, Node, NodeClaim, NodeOverlay, CapacityBuffer, "
    "PodTemplate"
)
MAX_PODS: Final = 200_000
"""Pods one simulation takes (pending and bound, workloads' replicas included): twice the benchmark's largest run,
and bounded so that `replicas: 100000000` is an error, not an hour of work or an exhausted memory."""
_SUPPORTED: Final = frozenset(SUPPORTED_KINDS.split(", "))
CLUSTER_SCOPED: Final = frozenset(
    {"NodePool", "EC2NodeClass", "Node", "NodeClaim", "CSINode", "PersistentVolume", "StorageClass", "NodeOverlay"}
)


InputError = inputs.InputError
"""Input the simulation cannot use; the message names where and what."""


@dataclass(frozen=True, slots=True)
class Document:
    source: str  # "path/to/file.yaml#2": file and 1-based document index
    body: Mapping[str, Any]
    line: int = 1
    text: bytes = field(default=b"", repr=False, compare=False)
    """The whole file the document is in (shared, not copied): where a field's own line is found on an error."""
    index: int = 0
    """1-based position of the document in `text` (0: no text to look a field up in)."""
    prefix: str = ""
    """Where `body` sits in the document (`items[3]`: an item of a List), before the paths `at` is given."""

    @property
    def where(self) -> str:
        return f"{self.source} (line {self.line})"

    def at(self, path: str) -> str:
        """Where the field `path` is: the document and the line the field is written on (the document's first line
        when the field is not written at all); the document alone when there is no text to find lines in (JSON read
        as JSON)."""
        if not self.text:
            return self.source
        full = ".".join(part for part in (self.prefix, path) if part)
        found = fieldlines.line(self.text, document=self.index, path=full) if full else None
        return f"{self.source} (line {found or self.line})"

    def item(self, index: int, body: Mapping[str, Any]) -> Document:
        """The `index`-th item of this document's `items` (a List), as a document of its own: messages name it
        `file#1 items[3]` and find its fields' lines within this document."""
        return dataclasses.replace(self, source=f"{self.source} items[{index}]", body=body, prefix=f"items[{index}]")


@dataclass
class Cluster:
    """Everything the manifests describe, parsed."""

    nodepools: list[nodepool.NodePool] = field(default_factory=list)
    nodeclasses: dict[str, ec2nodeclass.EC2NodeClass] = field(default_factory=dict)
    nodeoverlays: list[nodeoverlay.NodeOverlay] = field(default_factory=list)
    capacitybuffers: list[capacitybuffer.CapacityBuffer] = field(default_factory=list)
    pod_templates: dict[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    """PodTemplates by (namespace, name): what buffers' podTemplateRefs name."""
    workloads: dict[tuple[str, str, str], Mapping[str, Any]] = field(default_factory=dict)
    """Deployments, ReplicaSets, StatefulSets and Jobs by (kind, namespace, name): what buffers' scalableRefs name."""
    pending: list[scheduling_pods.Pod] = field(default_factory=list)
    bound: list[scheduling_pods.Pod] = field(default_factory=list)
    bound_manifests: list[Mapping[str, Any]] = field(default_factory=list)  # the same pods, as written
    daemonsets: list[scheduling_pods.Pod] = field(default_factory=list)
    nodes: list[Mapping[str, Any]] = field(default_factory=list)
    nodeclaims: list[Mapping[str, Any]] = field(default_factory=list)  # launched, maybe not registered (in flight)
    pvcs: list[volumes.PersistentVolumeClaim] = field(default_factory=list)
    pvs: list[volumes.PersistentVolume] = field(default_factory=list)
    storage_classes: list[volumes.StorageClass] = field(default_factory=list)
    pdbs: list[Mapping[str, Any]] = field(default_factory=list)
    sources: dict[tuple[str, str, str], Document] = field(default_factory=dict)
    """(kind, namespace, name) -> the document that defines it, for duplicate and reference errors."""
    templates: dict[tuple[str, str], _Read] = field(default_factory=dict)
    """Objects already read strictly, but for their name (see `_read`)."""
    csinodes: list[Mapping[str, Any]] = field(default_factory=list)
    documents: int = 0
    """Documents read, skipped ones included."""
    skipped: dict[str, int] = field(default_factory=dict)
    """Documents left out because their kind takes no part in scheduling, by kind."""


def read_documents(found: Sequence[inputs.Source], *, stdin: BinaryIO | None = None) -> Iterator[Document]:
    """Every non-empty document of `found`, in order; together at most `documents.MAX_BYTES`."""
    total = 0
    for source in found:
        data = source.read(stdin=stdin, limit=documents.MAX_BYTES - total)
        if data is None:
            raise InputError(f"{source.name}: the manifests exceed {documents.MAX_BYTES // 2**20} MiB in all")
        total += len(data)
        yield from parse_documents(source.name, data)


def parse_documents(name: str, data: bytes) -> Iterator[Document]:
    """The non-empty documents of one file's bytes; `name` is what messages call the file."""
    try:
        loaded = documents.load_all(data)
    except documents.DocumentError as exc:
        raise InputError(f"{name}: {exc}") from exc
    for doc in loaded:
        if doc.body is None:
            continue  # an empty document between two '---'
        where = f"{name}#{doc.index} (line {doc.line})"
        if not isinstance(doc.body, dict):
            raise InputError(f"{where}: a manifest must be a mapping, got {type(doc.body).__name__}")
        yield Document(source=f"{name}#{doc.index}", body=doc.body, line=doc.line, text=data, index=doc.index)


def _kind(doc: Document) -> str:
    kind = doc.body.get("kind")
    if not isinstance(kind, str) or not kind:
        raise InputError(f"{doc.at('kind')}: kind: Required value")
    if kind == "List":
        raise InputError(f"{doc.at('kind')}: kind: List is not supported; write one document per object")
    return kind


def _name(body: Mapping[str, Any]) -> str:
    metadata = body.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    return name if isinstance(name, str) else ""


@dataclass(frozen=True, slots=True)
class _Read:
    """A core-kind object as read, and (for Pods) the scheduler's pod parsed from it, once."""

    body: Mapping[str, Any]
    pod: scheduling_pods.Pod | None = None


def _template_key(kind: str, body: Mapping[str, Any]) -> tuple[str, str] | None:
    """What an object is, but for its name, as JSON; None when it has no plain name (or is not JSON)."""
    metadata = body.get("metadata")
    if type(metadata) is not dict or not isinstance(metadata.get("name"), str) or not metadata["name"]:
        return None
    try:
        return kind, json.dumps({**body, "metadata": {k: v for k, v in metadata.items() if k != "name"}})
    except (TypeError, ValueError):  # not JSON (an integer past 4,300 digits): no shortcut
        return None


def _read(doc: Document, kind: str, known: dict[tuple[str, str], _Read]) -> _Read:
    """A core kind read strictly: structure, then the API server's semantics; raises ValidationError.

    Objects that differ only in their name (pods stamped from one template) are read, and parsed, once: `known`
    holds what each such template read as."""
    key = _template_key(kind, doc.body)
    seen = known.get(key) if key is not None else None
    name = doc.body["metadata"]["name"] if key is not None else ""
    if seen is not None:
        body = {**seen.body, "metadata": {**seen.body["metadata"], "name": name}}
        if seen.pod is None:
            return _Read(body)
        uid = str(body["metadata"].get("uid") or f"{seen.pod.namespace}/{name}")
        return _Read(body, dataclasses.replace(seen.pod, name=name, uid=uid))
    body, problems = corekinds.read(doc.body, kind)
    problems = problems or corerules.check(body, kind)
    if problems:
        raise errors.ValidationError(kind, _name(doc.body), problems)
    pod = scheduling_pods.from_manifest(body) if kind == "Pod" else None
    read = _Read(body, pod)
    # A pod's generic ephemeral volumes are claims named after it: such pods are parsed one by one.
    if key is not None and not (pod is not None and any("ephemeral" in v for v in body["spec"].get("volumes", ()))):
        known[key] = read
    return read


def _register(cluster: Cluster, doc: Document, kind: str, body: Mapping[str, Any]) -> None:
    metadata = body.get("metadata") or {}
    namespace = "" if kind in CLUSTER_SCOPED else str(metadata.get("namespace") or "default")
    name = str(metadata.get("name") or metadata.get("generateName") or "")
    key = (kind, namespace, name)
    first = cluster.sources.get(key)
    if first is not None and metadata.get("name"):
        what = f"{kind} {namespace + '/' if namespace else ''}{name}"
        raise InputError(
            f"{doc.at('metadata.name')}: metadata.name: {what} is defined more than once "
            f"(first in {first.at('metadata.name')})"
        )
    cluster.sources.setdefault(key, doc)


def _replicas(kind: str, spec: Mapping[str, Any]) -> tuple[str, int]:
    """The field that sets how many pods a (valid) workload makes, and how many."""
    if kind == "Job":
        parallelism = spec.get("parallelism", 1)
        completions = spec.get("completions")
        return "spec.parallelism", parallelism if completions is None else min(parallelism, completions)
    return "spec.replicas", spec.get("replicas", 1)


def _add(cluster: Cluster, doc: Document) -> None:
    kind = _kind(doc)
    read = _read(doc, kind, cluster.templates) if kind in corekinds.api_versions() else _Read(doc.body)
    body = read.body
    if kind == "NodePool":
        cluster.nodepools.append(parse.nodepool(body))
    elif kind == "EC2NodeClass":
        nodeclass = parse.ec2nodeclass(body)
        cluster.nodeclasses[nodeclass.name] = nodeclass
    elif kind == "NodeOverlay":
        cluster.nodeoverlays.append(parse.nodeoverlay(body))
    elif kind == "CapacityBuffer":
        body = _namespaced(body)
        cluster.capacitybuffers.append(parse.capacitybuffer(body))
    elif kind == "PodTemplate":
        body = _namespaced(body)
        _check_pod_template(body)
        cluster.pod_templates[(body["metadata"]["namespace"], _name(body))] = body
    elif kind == "NodeClaim":
        parse.nodeclaim(body)  # refuse what the controller would not read, naming the field
        cluster.nodeclaims.append(body)
    elif kind == "CSINode":
        _check_csinode(doc, body)
        cluster.csinodes.append(body)
    elif kind not in corekinds.api_versions():
        raise InputError(f"{doc.at('kind')}: kind: unknown kind {kind!r}; supported kinds: {SUPPORTED_KINDS}")
    _register(cluster, doc, kind, body)
    if kind == "Pod":
        _admit(cluster, doc, "metadata.name", 1)
        pod = read.pod or scheduling_pods.from_manifest(body)
        (cluster.bound if pod.node_name else cluster.pending).append(pod)
        if pod.node_name:
            cluster.bound_manifests.append(body)
    elif kind in WORKLOAD_KINDS:
        path, count = _replicas(kind, body.get("spec") or {})
        _admit(cluster, doc, path, count)
        cluster.pending.extend(workloads.expand(body))
        cluster.workloads[(kind, str(body["metadata"].get("namespace") or "default"), _name(body))] = body
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


def _namespaced(body: Mapping[str, Any]) -> dict[str, Any]:
    """A namespaced object without a namespace is in "default", as `kubectl apply` puts it."""
    metadata = body.get("metadata")
    if not isinstance(metadata, Mapping):
        return dict(body)
    return {**body, "metadata": {**metadata, "namespace": metadata.get("namespace") or "default"}}


def _check_pod_template(body: Mapping[str, Any]) -> None:
    """A PodTemplate's template read as the pod it stamps (strict, as the API server reads the template)."""
    if body.get("apiVersion") != "v1":
        raise errors.ValidationError("PodTemplate", _name(body), [errors.Problem("apiVersion", "must be v1")])
    template = body.get("template")
    if not isinstance(template, Mapping) or not isinstance(template.get("spec"), Mapping):
        raise errors.ValidationError("PodTemplate", _name(body), [errors.Problem("template.spec", "Required value")])
    metadata = {**(template.get("metadata") or {}), "name": _name(body) or "template"}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": template["spec"]}
    _, problems = corekinds.read(pod, "Pod")
    problems = problems or corerules.check(pod, "Pod")
    if problems:
        moved = [errors.Problem(f"template.{p.path}" if p.path else "template", p.message) for p in problems]
        raise errors.ValidationError("PodTemplate", _name(body), moved)


def _check_csinode(doc: Document, body: Mapping[str, Any]) -> None:
    """The fields of a CSINode the scheduler reads (storage.k8s.io/v1): a name, and per driver a name and an
    optional non-negative `allocatable.count`."""
    if not (body.get("metadata") or {}).get("name"):
        raise InputError(f"{doc.at('metadata.name')}: metadata.name: required")
    drivers = (body.get("spec") or {}).get("drivers") or []
    if not isinstance(drivers, list):
        raise InputError(f"{doc.at('spec.drivers')}: spec.drivers: must be a list")
    for i, driver in enumerate(drivers):
        if not isinstance(driver, Mapping) or not isinstance(driver.get("name"), str) or not driver["name"]:
            raise InputError(f"{doc.at(f'spec.drivers[{i}].name')}: spec.drivers[{i}].name: required")
        count = (driver.get("allocatable") or {}).get("count")
        if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 0):
            field_ = f"spec.drivers[{i}].allocatable.count"
            raise InputError(f"{doc.at(field_)}: {field_}: must be a non-negative integer")


def _admit(cluster: Cluster, doc: Document, path: str, count: int) -> None:
    if len(cluster.pending) + len(cluster.bound) + count > MAX_PODS:
        raise InputError(
            f"{doc.at(path)}: {path}: {count:,} more pod(s) would bring the simulation past {MAX_PODS:,} pods, "
            "the most it takes"
        )


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
        storage_class = (template.get("spec") or {}).get("storageClassName")  # None: the default class applies
        out.extend(
            volumes.PersistentVolumeClaim(
                namespace, f"{template_name}-{name}-{i}", "", None if storage_class is None else str(storage_class)
            )
            for i in range(replicas if isinstance(replicas, int) else 0)
        )
    return out


def load(paths: Iterable[str], *, strict: bool = False, stdin: BinaryIO | None = None) -> Cluster:
    """Parse every manifest under `paths` (`-`: standard input); raise InputError on the first document that
    cannot be used. Kinds that take no part in scheduling (Service, ConfigMap, Secret, ...: any kind not in
    `SUPPORTED_KINDS`) are counted in `Cluster.skipped`, or refused when `strict`."""
    cluster = Cluster()
    for doc in read_documents(inputs.expand(paths), stdin=stdin):
        cluster.documents += 1
        kind = _kind(doc)
        if kind not in _SUPPORTED:
            if strict:
                raise InputError(
                    f"{doc.at('kind')}: kind: {kind!r} takes no part in scheduling and --strict refuses it; supported "
                    f"kinds: {SUPPORTED_KINDS}"
                )
            cluster.skipped[kind] = cluster.skipped.get(kind, 0) + 1
            continue
        try:
            _add(cluster, doc)
        except errors.ValidationError as exc:
            raise InputError(f"{doc.at(exc.problems[0].path if exc.problems else '')}: {exc}") from exc
        except InputError:
            raise
        except Exception as exc:  # a reader bug must still name the document, never print a traceback
            log.debug("reading %s failed", doc.where, exc_info=True)
            raise InputError(f"{doc.where}: cannot read this document: {type(exc).__name__}: {exc}") from exc
    _check_references(cluster)
    return cluster


class NothingToPlan(InputError):
    """Input that reads fine but gives a plan nothing to work on: no documents, or no NodePool."""


def check_plannable(cluster: Cluster, paths: Sequence[str]) -> None:
    """Raise NothingToPlan, saying why, when the input is empty or holds no NodePool: a plan would say "0 NodeClaims"
    for the wrong reason (Karpenter provisions only for NodePools)."""
    given = ", ".join(inputs.STDIN_NAME if p == inputs.STDIN else p for p in paths)
    if cluster.documents == 0:
        raise NothingToPlan(f"{given}: no documents: the input is empty")
    if not cluster.nodepools:
        raise NothingToPlan(
            f"{given}: no NodePool in the input: Karpenter launches nodes only for a NodePool (and its "
            f"EC2NodeClass); add them, e.g. examples/manifests/00-ec2nodeclass.yaml and 01-nodepools.yaml"
        )


def skipped_summary(skipped: Mapping[str, int], *, reader: str = "") -> str:
    """One line naming what was left out: `skipped 3 documents that take no part in scheduling: ConfigMap (1), ...`;
    with a `reader` ("karpy explain"), `... that karpy explain does not read: ...` instead."""
    if not skipped:
        return ""
    total = sum(skipped.values())
    kinds = ", ".join(f"{kind} ({count})" for kind, count in sorted(skipped.items()))
    one = total == 1
    why = f"{reader} does not read" if reader else f"take{'s' if one else ''} no part in scheduling"
    return f"skipped {total} document{'' if one else 's'} that {why}: {kinds} (--strict refuses them)"


def _check_references(cluster: Cluster) -> None:
    """Every NodePool's EC2NodeClass is in the manifests: without it the pool is not Ready and gets no nodes."""
    for pool in cluster.nodepools:
        ref = pool.template.node_class_ref
        if ref.group == labels.AWS_GROUP and ref.kind == "EC2NodeClass" and ref.name not in cluster.nodeclasses:
            doc = cluster.sources[("NodePool", "", pool.name)]
            path = "spec.template.spec.nodeClassRef.name"
            raise InputError(
                f"{doc.at(path)}: {path}: EC2NodeClass {ref.name!r} is not in the manifests (a NodePool whose "
                "EC2NodeClass does not exist is not Ready and gets no nodes)"
            )


def volume_catalog(cluster: Cluster) -> volumes.VolumeCatalog:
    return volumes.VolumeCatalog.build(cluster.pvcs, cluster.pvs, cluster.storage_classes)
