"""Where `karpy explain` reads a cluster from: a dump (`kubectl get nodepools,ec2nodeclasses,nodeclaims,nodes,pods,
pdbs,pvc,pv,storageclasses,daemonsets -A -o yaml` or `-o json`: List documents, or one document per object) or a
live API server through its kubeconfig (one LIST per resource the controller watches, and a GET of each workload a
CapacityBuffer names, as the buffer controller reads it; nothing else). A dump holds CapacityBuffers, PodTemplates and
the Deployments, StatefulSets and ReplicaSets buffers name when dumped with `capacitybuffers,podtemplates,deployments,
statefulsets,replicasets` too.

Either way the objects are applied, as the controller's informers apply them, to a `state.Cluster`, so explain
decides on exactly the model the controller decides on. YAML is read by `simulate.manifests`; a file whose first
character opens a JSON object or array is read as JSON, which is what a large cluster should be dumped as (Python's
JSON reader is two orders of magnitude faster than a YAML one). Every problem names its file and document, and in
YAML the line of the field at fault.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Final

from karpy import clock as karpy_clock
from karpy.api import decoding, documents, labels, parse, status
from karpy.api import errors as api_errors
from karpy.capacitybuffer import controller as capacitybuffer_controller
from karpy.capacitybuffer import resolve
from karpy.kube import client, resources
from karpy.nodeclaim import disruption_conditions
from karpy.simulate import inputs, manifests
from karpy.state import cluster as state_cluster
from karpy.state import facts, informer

READ: tuple[resources.Resource, ...] = (
    *informer.INFORMED,
    resources.NODEOVERLAYS,
    resources.CAPACITYBUFFERS,
    resources.PODTEMPLATES,
)
"""What explain reads: what the controller's cluster model watches, NodeOverlays included (watched under the
NodeOverlay gate; explain applies them only with --node-overlay, as the controller under its gate), and
CapacityBuffers with the PodTemplates they may name (watched under the CapacityBuffer gate)."""
WORKLOADS: tuple[resources.Resource, ...] = tuple(capacitybuffer_controller.SCALABLE.values())
"""The workloads a CapacityBuffer's scalableRef may name: a dump may hold them; live, explain GETs each one a buffer
names, as the buffer controller does (it watches none of them)."""
KINDS: Mapping[str, resources.Resource] = {r.kind: r for r in (*READ, *WORKLOADS)}
"""The kinds explain reads."""
InputError = manifests.InputError
MAX_JSON_BYTES = 2**30
"""Largest JSON dump read (1 GiB, some 40,000 nodes with 400,000 pods): a bound on the memory explain may take.
YAML goes through `simulate.manifests`, bounded at 50 MiB (and minutes to read at that size: dump as JSON)."""


@dataclass
class Snapshot:
    """The objects read, by resource, and where each came from (for messages about it)."""

    objects: dict[resources.Resource, list[Mapping[str, Any]]] = field(default_factory=dict)
    sources: dict[tuple[resources.Resource, str], manifests.Document | str] = field(default_factory=dict)
    """Where each object came from: its dump document (whose fields' lines messages name), or the live resource."""
    skipped: dict[str, int] = field(default_factory=dict)
    """Objects of kinds explain does not read, by kind (a dump's Services, ConfigMaps, ...)."""

    def add(self, res: resources.Resource, obj: Mapping[str, Any], source: manifests.Document | str) -> None:
        self.objects.setdefault(res, []).append(obj)
        self.sources[res, facts.key(obj)] = source

    @property
    def count(self) -> int:
        return sum(len(v) for v in self.objects.values())


# --- dumps ------------------------------------------------------------------------------------------------------


def _json_documents(name: str, text: str) -> Iterator[manifests.Document]:
    try:
        loaded = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{name}: invalid JSON: {exc}") from exc
    except RecursionError as exc:
        raise InputError(f"{name}: invalid JSON: nested too deeply") from exc
    for index, body in enumerate(loaded if isinstance(loaded, list) else [loaded], start=1):
        if not isinstance(body, dict):
            raise InputError(f"{name}#{index}: a manifest must be a mapping, got {type(body).__name__}")
        yield manifests.Document(source=f"{name}#{index}", body=body)


def _documents(source: inputs.Source, *, stdin: BinaryIO | None) -> Iterator[manifests.Document]:
    data = source.read(stdin=stdin, limit=MAX_JSON_BYTES)
    if data is None:
        raise InputError(f"{source.name}: more than the {MAX_JSON_BYTES // 2**20} MiB read")
    if data[:4096].lstrip()[:1] in (b"{", b"["):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(f"{source.name}: not UTF-8: {exc}") from exc
        yield from _json_documents(source.name, text)
    elif len(data) > documents.MAX_BYTES:
        raise InputError(f"{source.name}: more than the {documents.MAX_BYTES // 2**20} MiB of YAML read (dump as JSON)")
    else:
        yield from manifests.parse_documents(source.name, data)


def _items(doc: manifests.Document) -> Iterator[manifests.Document]:
    """The objects of a document: itself, or the items of a List (`kind: List` or a typed `PodList`)."""
    kind = doc.body.get("kind")
    if not isinstance(kind, str) or not kind:
        raise InputError(f"{doc.at('kind')}: kind: required")
    if not kind.endswith("List"):
        yield doc
        return
    items = doc.body.get("items")
    if not isinstance(items, list):
        raise InputError(f"{doc.at('items')}: items: a {kind} needs a list of items")
    implied = kind[: -len("List")]  # the items of a typed list (PodList) carry no kind of their own
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise InputError(f"{doc.at(f'items[{i}]')}: a manifest must be a mapping, got {type(item).__name__}")
        if implied and "kind" not in item:
            item = {**item, "kind": implied}
        yield doc.item(i, item)


def read_dump(paths: Sequence[str], *, strict: bool = False, stdin: BinaryIO | None = None) -> Snapshot:
    """Every object of the dump files (and YAML/JSON files under directories) of `paths` (`-`: standard input).
    Kinds explain does not read (Service, ConfigMap, ...) are counted in `Snapshot.skipped`, or refused when
    `strict`. Errors name the file, the document and the line of the field at fault, as `karpy simulate`'s do
    (`simulate.manifests.Document.at`)."""
    snap = Snapshot()
    for source in inputs.expand(paths):
        for doc in _documents(source, stdin=stdin):
            for obj in _items(doc):
                kind = obj.body.get("kind")
                res = KINDS.get(str(kind))
                if res is None:
                    if strict:
                        supported = ", ".join(sorted(KINDS))
                        raise InputError(
                            f"{obj.at('kind')}: kind: {kind!r} is not read by karpy explain and --strict refuses "
                            f"it; supported: {supported}"
                        )
                    snap.skipped[str(kind)] = snap.skipped.get(str(kind), 0) + 1
                    continue
                if not facts.key(obj.body):
                    raise InputError(f"{obj.at('metadata.name')}: metadata.name: required")
                snap.add(res, obj.body, obj)
    return snap


def _times(obj: Mapping[str, Any]) -> Iterator[Any]:
    """The timestamps an object carries that explain reads ages from: its creation and deletion, its conditions'
    transitions and heartbeats, and its managed fields' updates."""
    metadata = obj.get("metadata")
    if isinstance(metadata, Mapping):
        yield metadata.get("creationTimestamp")
        yield metadata.get("deletionTimestamp")
        for entry in metadata.get("managedFields") or ():
            yield entry.get("time") if isinstance(entry, Mapping) else None
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, Mapping):
            yield condition.get("lastTransitionTime")
            yield condition.get("lastHeartbeatTime")


def newest_timestamp(snap: Snapshot) -> float | None:
    """The latest time written in the dump (epoch seconds): when it was taken, near enough; None when it has none.
    Evaluated as of then, a dump of any age reads as it did (no negative ages, no consolidateAfter elapsed since)."""
    newest: float | None = None
    for found in snap.objects.values():
        for obj in found:
            for text in _times(obj):
                if not isinstance(text, str) or not text:
                    continue
                try:
                    when = decoding.timestamp(text)
                except ValueError:
                    continue  # the model's own reading reports a bad timestamp where it matters
                newest = when if newest is None or when > newest else newest
    return newest


# --- live -------------------------------------------------------------------------------------------------------


OPTIONAL = frozenset(
    {resources.EC2NODECLASSES, resources.VOLUMEATTACHMENTS, resources.NODEOVERLAYS, resources.CAPACITYBUFFERS}
)
"""Resources a cluster may not serve (another provider's node classes, an old API server): read as empty."""


async def read_live(kube: client.KubeClient) -> tuple[Snapshot, list[str]]:
    """One LIST of every resource the controller watches, all namespaces; and what could not be read."""
    snap = Snapshot()
    skipped: list[str] = []
    for res in READ:
        try:
            items, _ = await kube.list(res)
        except client.NotFound:
            if res not in OPTIONAL:
                raise
            skipped.append(f"{res}: not served by this API server, read as empty")
            continue
        for obj in items:
            # Items of a LIST response carry no kind of their own: the event recorder and messages want one.
            snap.add(res, {"apiVersion": res.api_version, "kind": res.kind, **obj}, f"{res} {facts.key(obj)}")
    await _read_workloads(kube, snap)
    return snap, skipped


async def _read_workloads(kube: client.KubeClient, snap: Snapshot) -> None:
    """The workloads the snapshot's CapacityBuffers name by scalableRef, one GET each where the buffer controller
    makes one: by the controller's own rule (`resolve.workload_ref`), so a buffer it refuses, or one with a
    podTemplateRef, names none. A missing workload is left out: the buffer then says it was not found."""
    wanted = set()
    for obj in snap.objects.get(resources.CAPACITYBUFFERS, ()):
        try:
            buffer = parse.capacitybuffer(obj)
        except api_errors.ValidationError:
            continue  # the model leaves it out and says why (`to_cluster`)
        ref = resolve.workload_ref(buffer)
        if buffer.spec.pod_template_ref is None and not isinstance(ref, resolve.Found):
            wanted.add((capacitybuffer_controller.SCALABLE[ref.kind], buffer.namespace, ref.name))
    for res, namespace, name in sorted(wanted, key=lambda w: (w[0].kind, w[1], w[2])):
        found = await kube.get(res, name, namespace=namespace)
        if found is not None:
            snap.add(res, {"apiVersion": res.api_version, "kind": res.kind, **found}, f"{res} {namespace}/{name}")


# --- the model --------------------------------------------------------------------------------------------------


def to_cluster(snap: Snapshot, *, clock: karpy_clock.Clock) -> tuple[state_cluster.Cluster, list[str]]:
    """A `state.Cluster` fed with the snapshot as the informers would, with the NodeClaims' Consolidatable condition
    brought up to `clock`'s now (the controller refreshes it every second; a dump may be older, and a stopped
    controller does not refresh it at all); and one warning per object the model had to leave out."""
    cluster = state_cluster.Cluster(clock=clock)
    for res in READ:
        cluster.mark_listed(res)
        for obj in snap.objects.get(res, ()):
            cluster.apply(res, client.WatchEvent(client.ADDED, obj))
    _refresh_consolidatable(cluster, now=clock.now())
    warnings = []
    for res, found in (
        (resources.NODEPOOLS, cluster.nodepool_errors()),
        (resources.EC2NODECLASSES, cluster.nodeclass_errors()),
        (resources.NODECLAIMS, cluster.nodeclaim_errors()),
        (resources.PODS, cluster.pod_errors()),
        (resources.NODEOVERLAYS, cluster.nodeoverlay_errors()),
        (resources.CAPACITYBUFFERS, cluster.capacitybuffer_errors()),
    ):
        for key, error in sorted(found.items()):
            where = _where(snap.sources.get((res, key), f"{res.kind} {key}"), res)
            warnings.append(f"{where}: {res.kind} {key} left out, as the controller leaves it out: {error}")
    return cluster, warnings


PARSERS: Final[Mapping[resources.Resource, Callable[[Mapping[str, Any]], object]]] = {
    resources.NODEPOOLS: parse.nodepool,
    resources.EC2NODECLASSES: parse.ec2nodeclass,
    resources.NODECLAIMS: parse.nodeclaim,
    resources.NODEOVERLAYS: parse.nodeoverlay,
    resources.CAPACITYBUFFERS: parse.capacitybuffer,
}
"""The parsers `state.Cluster` reads these kinds with: asked again, for an object it left out, which field is at
fault (the cluster keeps the reason as text)."""


def _where(source: manifests.Document | str, res: resources.Resource) -> str:
    """Where an object the model left out came from: for a dump document, the line of its first problem's field."""
    if isinstance(source, str):
        return source
    path = ""
    parser = PARSERS.get(res)
    if parser is not None:
        try:
            parser(source.body)
        except api_errors.ValidationError as error:
            path = error.problems[0].path if error.problems else ""
    return source.at(path)


def _refresh_consolidatable(cluster: state_cluster.Cluster, *, now: float) -> None:
    raw = {facts.key(o): o for o in cluster.objects(resources.NODECLAIMS)}
    for claim in cluster.nodeclaims():
        pool = cluster.nodepool(claim.metadata.labels.get(labels.LABEL_NODEPOOL, ""))
        if pool is None or claim.name not in raw:
            continue
        fresh = disruption_conditions.with_consolidatable(claim, pool, now=now)
        if fresh == claim.status.conditions:
            continue
        obj = raw[claim.name]
        refreshed = {**obj, "status": {**(obj.get("status") or {}), "conditions": status.conditions(fresh)}}
        cluster.apply(resources.NODECLAIMS, client.WatchEvent(client.MODIFIED, refreshed))
