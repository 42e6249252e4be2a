"""`Cluster`: the in-memory model of the cluster the reconcilers decide on, fed event by event by the informers.

Every `apply` costs O(1) in the size of the cluster (dict updates of the changed object and its indexes), so
thousands of pods churning stay cheap; the read views build fresh snapshots (new lists and frozen values) and never
hand out the live containers. Raw objects (Nodes, PDBs) are shared, not copied: treat them as read-only. They are
kept as module `trimming` says: no managedFields, no node image lists, and of a parsed pod only what raw readers use.

Objects that do not parse are kept out of the views, recorded with their error (`nodepool_errors()` ...) and
reported to the rejection sink (an Event on the object, a log line naming the field, a counter), so one bad object
never stops the others; `apply` never raises. A pod that cannot be read is remembered by the node it is bound to
(`StateNode.unreadable_pods`): a node whose pods are not all known is never disrupted on a partial view.
`synced()` gates decisions until every expected informer has listed.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

from karpy import clock as karpy_clock
from karpy import rejections as karpy_rejections
from karpy.api import capacitybuffer as api_capacitybuffer
from karpy.api import corekinds, errors, labels, parse
from karpy.api import ec2nodeclass as api_ec2nodeclass
from karpy.api import nodeclaim as api_nodeclaim
from karpy.api import nodeoverlay as api_nodeoverlay
from karpy.api import nodepool as api_nodepool
from karpy.kube import client, resources
from karpy.scheduling import pods as scheduling_pods
from karpy.scheduling import podtemplates, volumes
from karpy.state import facts, movable, statenode, trimming, virtualpods

log = logging.getLogger(__name__)
T = TypeVar("T")
Listener = Callable[[resources.Resource, Mapping[str, Any] | None, Mapping[str, Any] | None], None]
"""Told (resource, object before, object after) of every applied change; None when absent. Must be cheap."""
NODES_RESOURCE = "nodes"
"""The pseudo-resource counting a NodePool's nodes in `nodepool_usage` (milli-units, like NodePool limits)."""
FORCED_REVALIDATION = 300.0
"""Seconds after which an unchanged `seq` moves anyway (upstream `ConsolidationState`'s five minutes): a memo of
"nothing to do" must not outlive changes no event reports, such as an offering's capacity error running out or a
disruption budget's schedule window opening."""


class _Parsed(dict[str, T], Generic[T]):
    """Valid objects by key, plus the error strings of the ones that did not parse."""

    def __init__(self) -> None:
        super().__init__()
        self.errors: dict[str, str] = {}


class Cluster:
    def __init__(
        self,
        *,
        clock: karpy_clock.Clock,
        expected: Iterable[resources.Resource] = (),
        rejections: karpy_rejections.Sink | None = None,
    ) -> None:
        self.clock = clock
        self.rejections: karpy_rejections.Sink = rejections or karpy_rejections.Discard()
        self._seq = 0
        self._seq_seen = (0, clock.now())
        """`seq` as last read, and when it first read so: the start of its forced-revalidation period."""
        self._expected: set[resources.Resource] = set(expected)
        self._listed: set[resources.Resource] = set()
        self._nodepools: _Parsed[api_nodepool.NodePool] = _Parsed()
        self._nodeclasses: _Parsed[api_ec2nodeclass.EC2NodeClass] = _Parsed()
        self._nodeclaims: _Parsed[api_nodeclaim.NodeClaim] = _Parsed()
        self._nodeoverlays: _Parsed[api_nodeoverlay.NodeOverlay] = _Parsed()
        self._capacitybuffers: _Parsed[api_capacitybuffer.CapacityBuffer] = _Parsed()
        self.virtual_pods = virtualpods.Cache()
        """The CapacityBuffers' placeholder pods (written by the buffer controller, read by the provisioner)."""
        self._pods: _Parsed[scheduling_pods.Pod] = _Parsed()
        self._pod_templates = podtemplates.Templates()
        self._daemonsets: _Parsed[scheduling_pods.Pod] = _Parsed()
        self._nodes: dict[str, Mapping[str, Any]] = {}
        self._raw: dict[resources.Resource, dict[str, Mapping[str, Any]]] = collections.defaultdict(dict)
        self._malformed: dict[resources.Resource, dict[str, tuple[Mapping[str, Any], str]]] = collections.defaultdict(
            dict
        )
        """Core objects with values of the wrong type, by key: the object and what is wrong."""
        self._pvcs: dict[str, volumes.PersistentVolumeClaim] = {}
        self._pvs: dict[str, volumes.PersistentVolume] = {}
        self._storage_classes: dict[str, volumes.StorageClass] = {}
        self._volume_limits: dict[str, dict[str, int]] = {}  # node name -> CSI driver -> attachable volumes
        # indexes, maintained per event
        self._pod_facts: dict[str, facts.PodFacts] = {}
        self._pods_by_node: dict[str, dict[str, scheduling_pods.Pod]] = collections.defaultdict(dict)
        self._unreadable_by_node: dict[str, dict[str, None]] = {}
        self._unreadable_node_of: dict[str, str] = {}  # unreadable pod key -> the node it is bound to
        self._provisionable: dict[str, None] = {}
        self._nodes_by_provider: dict[str, dict[str, None]] = {}  # spec.providerID -> node keys (usually one)
        # Several claims may name one id (a claim recreated around a live instance, an adopted instance): every
        # one of them is kept, so deleting one never hides the others. Inner dicts are insertion-ordered sets.
        self._claims_by_provider: dict[str, dict[str, None]] = {}
        self._claims_by_node_name: dict[str, dict[str, None]] = {}
        self._usage: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        # controller-side annotations of nodes (by node or NodeClaim name)
        self._nominated: dict[str, float] = {}
        self._next_expiry = math.inf  # the earliest `until` in _nominated (or earlier): nothing expires before it
        self._marked: set[str] = set()
        self._listeners: list[Listener] = []
        # The last `state_nodes()` / `pending_pods()` built, by the (`_seq`, clock time) they were built at: one
        # decision reads them several times (explain: three), and each build walks every node and pod.
        self._read_nodes: tuple[tuple[int, float], tuple[statenode.StateNode, ...]] | None = None
        self._read_pending: tuple[int, tuple[scheduling_pods.Pod, ...]] | None = None
        # Functions, not bound methods: a cluster must not hold itself, or the model it holds (every object of the
        # cluster) waits for the cyclic collector to be freed once the cluster is dropped (1.5 s at 5,000 nodes).
        self._appliers: Mapping[resources.Resource, Callable[[Cluster, str, Mapping[str, Any] | None], None]] = {
            resources.NODEPOOLS: Cluster._apply_nodepool,
            resources.EC2NODECLASSES: Cluster._apply_nodeclass,
            resources.NODEOVERLAYS: Cluster._apply_nodeoverlay,
            resources.CAPACITYBUFFERS: Cluster._apply_capacitybuffer,
            resources.NODECLAIMS: Cluster._apply_nodeclaim,
            resources.NODES: Cluster._apply_node,
            resources.PODS: Cluster._apply_pod,
            resources.DAEMONSETS: Cluster._apply_daemonset,
            resources.PVCS: Cluster._apply_pvc,
            resources.PVS: Cluster._apply_pv,
            resources.STORAGECLASSES: Cluster._apply_storage_class,
            resources.CSINODES: Cluster._apply_csinode,
        }

    # -- feeding ------------------------------------------------------------------------------------------------

    def expect(self, *informed: resources.Resource) -> None:
        """Declare resources whose first LIST `synced()` waits for (informers call it before listing)."""
        self._expected.update(informed)

    def mark_listed(self, res: resources.Resource) -> None:
        self._expected.add(res)
        self._listed.add(res)

    def add_listener(self, listener: Listener) -> None:
        """Call `listener` after every `apply` (e.g. the pod events that move a NodeClaim's lastPodEventTime)."""
        self._listeners.append(listener)

    def synced(self) -> bool:
        """True once every expected informer completed its first LIST (False before any was expected)."""
        return bool(self._expected) and self._expected <= self._listed

    def synced_for_decisions(self) -> bool:
        """Upstream's `Synced()` (pkg/controllers/state/cluster.go): every informer listed once and no launch in
        flight. Provisioning and disruption wait on it; readiness and the metrics wait on `synced()` alone, which
        must not flap with every launch."""
        return self.synced() and self.launches_resolved()

    def launches_resolved(self) -> bool:
        """Every NodeClaim not being deleted has its providerID: no launch is in flight. Upstream's Synced() requires
        this too: an unlaunched claim holds no capacity in a scheduling simulation, so a provisioning or disruption
        decision taken then would buy a second node for the pods the first one is coming up for."""
        return all(c.status.provider_id or c.metadata.deletion_timestamp is not None for c in self.nodeclaims())

    def record_created(self, res: resources.Resource, obj: Mapping[str, Any]) -> None:
        """An object this controller just created, known before its watch event arrives (upstream's provisioner
        puts a created NodeClaim into cluster state the same way). Ignored when the watch delivered it already, so
        a newer version is never replaced by the creation response."""
        key = facts.key(obj)
        if key and key not in self._raw[res]:
            self.apply(res, client.WatchEvent(client.ADDED, obj))

    def apply(self, res: resources.Resource, event: client.WatchEvent) -> None:
        obj = event.object
        key = facts.key(obj)
        if not key:
            log.warning("ignoring a %s event for an object without a name", res)
            return
        current = None if event.type == client.DELETED else trimming.before_parsing(res, obj)
        raw = self._raw[res]
        before = raw.pop(key, None) if current is None else raw.get(key)
        self._malformed[res].pop(key, None)
        if current is None:
            self.rejections.accept(res.kind, key)  # gone: a new object of that name is reported afresh
        malformed = current is not None and self._malformed_shape(res, key, current)
        if malformed:
            raw.pop(key, None)
            current = None  # out of every view, as if gone (it is reported, and `unreadable` still lists it)
        elif current is not None:
            raw[key] = current
        applier = self._appliers.get(res)
        if applier is not None:
            try:
                applier(self, key, current)
            except Exception as exc:  # the parsers report their own failures; this is any other bug
                self._failed(res, obj, exc)
        if res == resources.PODS and current is not None and key in self._pods:
            raw[key] = trimming.stored_pod(current)  # parsed: the model holds the rest (module trimming)
        if malformed and res == resources.PODS:
            self._remember_unreadable(key, obj)  # it still occupies its node
        self._seq += 1
        for listener in self._listeners:
            try:
                listener(res, before, current)
            except Exception as exc:
                self._failed(res, obj, exc)

    def _malformed_shape(self, res: resources.Resource, key: str, obj: Mapping[str, Any]) -> bool:
        """A core object with a value of the wrong type (which no API server stores, but a cache must survive):
        reported and kept out of the views that raw readers read. A pod's node still counts it."""
        if res.kind not in corekinds.api_versions():
            return False
        try:
            _, problems = corekinds.read(obj, res.kind, strict=False)
        except Exception as exc:
            self._failed(res, obj, exc)
            problems = [errors.Problem("", f"{type(exc).__name__}: {exc}")]
        if not problems:
            return False
        problem = "; ".join(map(str, problems))
        self._malformed[res][key] = (obj, problem)
        about = karpy_rejections.about(res, obj)
        self.rejections.report(about, reason=karpy_rejections.Reason.INVALID, problem=problem)
        return True

    def _failed(self, res: resources.Resource, obj: Mapping[str, Any], exc: Exception) -> None:
        self.rejections.report(
            karpy_rejections.about(res, obj),
            reason=karpy_rejections.Reason.HANDLING_FAILED,
            problem=f"{type(exc).__name__}: {exc}",
            exc=exc,
        )

    def _read(
        self, res: resources.Resource, key: str, obj: Mapping[str, Any] | None, parser: Callable[..., T]
    ) -> T | str | None:
        """`obj` parsed; or, when it does not parse, why (reported); None when there is no object."""
        if obj is None:
            return None
        try:
            parsed = parser(obj)
        except errors.ValidationError as error:
            problem = "; ".join(str(p) for p in error.problems) or str(error)
            about = karpy_rejections.about(res, obj)
            self.rejections.report(about, reason=karpy_rejections.Reason.INVALID, problem=problem)
            return str(error)
        except Exception as exc:  # a parser must raise ValidationError only; anything else is a bug to report
            self._failed(res, obj, exc)
            return f"{type(exc).__name__}: {exc}"
        self.rejections.accept(res.kind, key)
        return parsed

    def _parse_into(
        self,
        res: resources.Resource,
        store: _Parsed[T],
        key: str,
        obj: Mapping[str, Any] | None,
        parser: Callable[..., T],
    ) -> None:
        store.pop(key, None)
        store.errors.pop(key, None)
        read = self._read(res, key, obj, parser)
        if isinstance(read, str):
            store.errors[key] = read
        elif read is not None:
            store[key] = read

    def _apply_nodepool(self, key: str, obj: Mapping[str, Any] | None) -> None:
        self._parse_into(resources.NODEPOOLS, self._nodepools, key, obj, parse.nodepool)

    def _apply_nodeclass(self, key: str, obj: Mapping[str, Any] | None) -> None:
        self._parse_into(resources.EC2NODECLASSES, self._nodeclasses, key, obj, parse.ec2nodeclass)

    def _apply_nodeoverlay(self, key: str, obj: Mapping[str, Any] | None) -> None:
        self._parse_into(resources.NODEOVERLAYS, self._nodeoverlays, key, obj, parse.nodeoverlay)

    def _apply_capacitybuffer(self, key: str, obj: Mapping[str, Any] | None) -> None:
        self._parse_into(resources.CAPACITYBUFFERS, self._capacitybuffers, key, obj, parse.capacitybuffer)

    def _apply_nodeclaim(self, key: str, obj: Mapping[str, Any] | None) -> None:
        old = self._nodeclaims.get(key)
        if old is not None:
            self._index_claim(key, old, remove=True)
        self._parse_into(resources.NODECLAIMS, self._nodeclaims, key, obj, parse.nodeclaim)
        new = self._nodeclaims.get(key)
        if new is not None:
            self._index_claim(key, new, remove=False)

    def _index_claim(self, key: str, claim: api_nodeclaim.NodeClaim, *, remove: bool) -> None:
        pairs = (
            (self._claims_by_provider, claim.status.provider_id),
            (self._claims_by_node_name, claim.status.node_name),
        )
        for index, value in pairs:
            if not value:
                continue
            if remove:
                keys = index.get(value)
                if keys is not None:
                    keys.pop(key, None)
                    if not keys:
                        del index[value]
            else:
                index.setdefault(value, {})[key] = None
        pool = claim.metadata.labels.get(labels.LABEL_NODEPOOL, "")
        if pool:
            usage = self._usage[pool]
            sign = -1 if remove else 1
            for name, amount in claim.status.capacity.items():
                usage[name] += sign * amount
            usage[NODES_RESOURCE] += sign * 1000

    def _apply_node(self, key: str, obj: Mapping[str, Any] | None) -> None:
        old = self._nodes.pop(key, None)
        if old is not None and (old_id := facts.node_provider_id(old)):
            keys = self._nodes_by_provider.get(old_id)
            if keys is not None:
                keys.pop(key, None)
                if not keys:
                    del self._nodes_by_provider[old_id]
        if obj is not None:
            self._nodes[key] = obj
            if provider_id := facts.node_provider_id(obj):
                self._nodes_by_provider.setdefault(provider_id, {})[key] = None

    def _apply_pod(self, key: str, obj: Mapping[str, Any] | None) -> None:
        old_facts = self._pod_facts.pop(key, None)
        if old_facts is not None and old_facts.node_name:
            bound = self._pods_by_node.get(old_facts.node_name)
            if bound is not None:
                bound.pop(key, None)
                if not bound:
                    del self._pods_by_node[old_facts.node_name]
        self._provisionable.pop(key, None)
        self._forget_unreadable(key)
        parse_pod = lambda pod: self._pod_templates.parse(facts.with_epoch_creation(pod))  # noqa: E731
        self._parse_into(resources.PODS, self._pods, key, obj, parse_pod)
        pod = self._pods.get(key)
        if obj is not None and pod is None:
            self._remember_unreadable(key, obj)
        if obj is None or pod is None:
            return
        pod_facts = facts.pod_facts(obj)
        self._pod_facts[key] = pod_facts
        if pod_facts.node_name and not pod_facts.terminal:
            self._pods_by_node[pod_facts.node_name][key] = pod
        if pod_facts.provisionable:
            self._provisionable[key] = None

    def _remember_unreadable(self, key: str, obj: Mapping[str, Any]) -> None:
        """A pod that does not parse still occupies its node: remember where (read leniently)."""
        try:
            found = facts.pod_facts(obj)
        except Exception:  # not even its node can be read: it cannot be placed, nor block a node
            return
        if found.node_name and not found.terminal:
            self._unreadable_by_node.setdefault(found.node_name, {})[key] = None
            self._unreadable_node_of[key] = found.node_name

    def _forget_unreadable(self, key: str) -> None:
        node = self._unreadable_node_of.pop(key, None)
        if node is not None:
            keys = self._unreadable_by_node.get(node, {})
            keys.pop(key, None)
            if not keys:
                self._unreadable_by_node.pop(node, None)

    def _apply_daemonset(self, key: str, obj: Mapping[str, Any] | None) -> None:
        parse_daemonset = lambda ds: scheduling_pods.from_manifest(facts.daemonset_pod(ds))  # noqa: E731
        self._parse_into(resources.DAEMONSETS, self._daemonsets, key, obj, parse_daemonset)

    def _apply_volume_object(
        self,
        res: resources.Resource,
        store: dict[str, T],
        key: str,
        obj: Mapping[str, Any] | None,
        parser: Callable[..., T],
    ) -> None:
        store.pop(key, None)
        read = self._read(res, key, obj, parser)
        if read is not None and not isinstance(read, str):
            store[key] = read

    def _apply_pvc(self, key: str, obj: Mapping[str, Any] | None) -> None:
        self._apply_volume_object(resources.PVCS, self._pvcs, key, obj, volumes.pvc_from_manifest)

    def _apply_pv(self, key: str, obj: Mapping[str, Any] | None) -> None:
        self._apply_volume_object(resources.PVS, self._pvs, key, obj, volumes.pv_from_manifest)

    def _apply_storage_class(self, key: str, obj: Mapping[str, Any] | None) -> None:
        self._apply_volume_object(
            resources.STORAGECLASSES, self._storage_classes, key, obj, volumes.storage_class_from_manifest
        )

    def _apply_csinode(self, key: str, obj: Mapping[str, Any] | None) -> None:
        self._volume_limits.pop(key, None)  # a CSINode is named after its node
        if obj is not None:
            self._volume_limits[key] = volumes.csinode_limits(obj)

    # -- controller-side marks ----------------------------------------------------------------------------------

    @property
    def seq(self) -> int:
        """Moves with every change of the model as of now: a watch event applied, a mark for deletion set or
        cleared, a nomination set or run out. The disruption methods remember "nothing to do" per `seq`, so a node
        whose nomination merely ran out, with no event since, must move it too or it would stay out of their reach
        until some unrelated event came. For the same reason it moves when it has stood still for
        `FORCED_REVALIDATION` seconds."""
        self._forget_expired_nominations()
        now = self.clock.now()
        seen, since = self._seq_seen
        if self._seq == seen and now - since >= FORCED_REVALIDATION:
            self._seq += 1
        if self._seq != seen:
            self._seq_seen = (self._seq, now)
        return self._seq

    def nominate(self, node_name: str, until: float) -> None:
        """Keep `node_name` (a Node or NodeClaim name) out of disruption until `until` (epoch seconds)."""
        self._forget_expired_nominations()
        self._nominated[node_name] = max(until, self._nominated.get(node_name, 0.0))
        self._next_expiry = min(self._next_expiry, until)
        self._seq += 1

    def is_nominated(self, node_name: str) -> bool:
        self._forget_expired_nominations()
        return node_name in self._nominated

    def _forget_expired_nominations(self) -> None:
        now = self.clock.now()
        if now < self._next_expiry:
            return
        live = {name: until for name, until in self._nominated.items() if until > now}
        if len(live) != len(self._nominated):
            self._seq += 1
        self._nominated = live
        self._next_expiry = min(live.values(), default=math.inf)

    def mark_for_deletion(self, *names: str) -> None:
        self._marked.update(names)
        self._seq += 1

    def unmark_for_deletion(self, *names: str) -> None:
        self._marked.difference_update(names)
        self._seq += 1

    def changed_since(self, seq: int) -> bool:
        return self.seq != seq

    # -- views --------------------------------------------------------------------------------------------------

    def nodepools(self) -> list[api_nodepool.NodePool]:
        """Valid NodePools not being deleted, by name."""
        pools = (p for p in self._nodepools.values() if p.metadata.deletion_timestamp is None)
        return sorted(pools, key=lambda p: p.metadata.name)

    def nodepool(self, name: str) -> api_nodepool.NodePool | None:
        return self._nodepools.get(name)

    def nodepool_errors(self) -> dict[str, str]:
        return dict(self._nodepools.errors)

    def nodeclasses(self) -> dict[str, api_ec2nodeclass.EC2NodeClass]:
        return dict(self._nodeclasses)

    def nodeclass_errors(self) -> dict[str, str]:
        return dict(self._nodeclasses.errors)

    def nodeoverlays(self) -> list[api_nodeoverlay.NodeOverlay]:
        """Valid NodeOverlays (watched only under the NodeOverlay gate), by name."""
        return sorted(self._nodeoverlays.values(), key=lambda o: o.name)

    def nodeoverlay_errors(self) -> dict[str, str]:
        """Why each NodeOverlay that does not parse is refused, by name."""
        return dict(self._nodeoverlays.errors)

    def capacitybuffer(self, key: str) -> api_capacitybuffer.CapacityBuffer | None:
        """The valid CapacityBuffer `namespace/name` (watched only under the CapacityBuffer gate)."""
        return self._capacitybuffers.get(key)

    def capacitybuffers(self) -> list[api_capacitybuffer.CapacityBuffer]:
        """Valid CapacityBuffers, by namespace/name."""
        return [self._capacitybuffers[k] for k in sorted(self._capacitybuffers)]

    def capacitybuffer_errors(self) -> dict[str, str]:
        """Why each CapacityBuffer that does not parse is refused, by namespace/name."""
        return dict(self._capacitybuffers.errors)

    def buffer_pods(self) -> list[scheduling_pods.Pod]:
        """The CapacityBuffers' virtual pods: pending pods for the provisioner and disruption's simulations."""
        return self.virtual_pods.all()

    def place_buffer_pods(self, counts: Mapping[str, int]) -> None:
        """Where the last provisioning pass put virtual pods; a change moves `seq`, as emptiness decides on it."""
        if self.virtual_pods.place(counts):
            self._seq += 1

    def buffer_pods_on(self, node: str) -> int:
        """Virtual pods the last provisioning pass placed on `node` (emptiness keeps such a node)."""
        return self.virtual_pods.on_node(node)

    def nodeclaims(self) -> list[api_nodeclaim.NodeClaim]:
        return sorted(self._nodeclaims.values(), key=lambda c: c.metadata.name)

    def nodeclaim(self, name: str) -> api_nodeclaim.NodeClaim | None:
        return self._nodeclaims.get(name)

    def nodeclaim_errors(self) -> dict[str, str]:
        return dict(self._nodeclaims.errors)

    def nodeclaims_for_provider_id(self, provider_id: str) -> list[api_nodeclaim.NodeClaim]:
        """The NodeClaims whose status.providerID is `provider_id`, by name (O(1) index; usually zero or one)."""
        return self._claims_in(self._claims_by_provider, provider_id)

    def nodeclaims_for_node(self, node: Mapping[str, Any]) -> list[api_nodeclaim.NodeClaim]:
        """The NodeClaims a Node belongs to: by spec.providerID, else (no claim names that id) by status.nodeName."""
        by_provider = self._claims_in(self._claims_by_provider, facts.node_provider_id(node))
        if by_provider:
            return by_provider
        return self._claims_in(self._claims_by_node_name, facts.key(node))

    def _claims_in(self, index: Mapping[str, Mapping[str, None]], value: str) -> list[api_nodeclaim.NodeClaim]:
        if not value:
            return []
        keys = sorted(index.get(value, ()))
        return [self._nodeclaims[k] for k in keys if k in self._nodeclaims]

    def node(self, name: str) -> Mapping[str, Any] | None:
        return self._nodes.get(name)

    def nodes_for_provider_id(self, provider_id: str) -> list[Mapping[str, Any]]:
        """The Nodes whose spec.providerID is `provider_id`, by name (O(1) index; usually zero or one)."""
        if not provider_id:
            return []
        return [self._nodes[k] for k in sorted(self._nodes_by_provider.get(provider_id, ()))]

    def pod_errors(self) -> dict[str, str]:
        return {**self._pods.errors, **{key: why for key, (_, why) in self._malformed[resources.PODS].items()}}

    def pods(self) -> list[scheduling_pods.Pod]:
        return list(self._pods.values())

    def pending_pods(self) -> list[scheduling_pods.Pod]:
        """Provisionable pods (module `facts`), oldest first."""
        if self._read_pending is None or self._read_pending[0] != self._seq:
            pending = sorted(
                (self._pods[key] for key in self._provisionable),
                key=lambda p: (p.creation_timestamp, p.namespace, p.name),
            )
            self._read_pending = (self._seq, tuple(pending))
        return list(self._read_pending[1])

    def pods_on(self, node_name: str) -> list[scheduling_pods.Pod]:
        """Non-terminal pods bound to `node_name`."""
        return list(self._pods_by_node.get(node_name, {}).values())

    def daemonsets(self) -> list[scheduling_pods.Pod]:
        """The pod each DaemonSet would run on a new node (its template, owned by the DaemonSet)."""
        return list(self._daemonsets.values())

    def pdbs(self) -> list[dict[str, Any]]:
        return [dict(obj) for obj in self._raw[resources.PDBS].values()]

    def raw(self, res: resources.Resource, key: str) -> Mapping[str, Any] | None:
        """The object of `res` stored under `key` ("namespace/name" or "name"), parsed or not, as module `trimming`
        keeps it."""
        return self._raw[res].get(key)

    def unreadable(self, res: resources.Resource) -> list[Mapping[str, Any]]:
        """Raw objects of `res` that do not parse (NodePools, EC2NodeClasses, NodeClaims, pods, DaemonSets) or whose
        values are not of their types (core kinds): what they still hold (an instance, a node) is left alone."""
        stores: Mapping[resources.Resource, _Parsed[Any]] = {
            resources.NODEPOOLS: self._nodepools,
            resources.EC2NODECLASSES: self._nodeclasses,
            resources.NODEOVERLAYS: self._nodeoverlays,
            resources.NODECLAIMS: self._nodeclaims,
            resources.PODS: self._pods,
            resources.DAEMONSETS: self._daemonsets,
        }
        store = stores.get(res)
        raw = self._raw[res]
        unparsed = [raw[key] for key in sorted(store.errors) if key in raw] if store is not None else []
        return unparsed + [obj for _, (obj, _) in sorted(self._malformed[res].items())]

    def objects(self, res: resources.Resource) -> list[Mapping[str, Any]]:
        """Raw objects of any informed resource (e.g. VolumeAttachments), read-only, as module `trimming` keeps
        them."""
        return list(self._raw[res].values())

    def volumes(self) -> volumes.VolumeCatalog:
        return volumes.VolumeCatalog(dict(self._pvcs), dict(self._pvs), dict(self._storage_classes))

    def nodepool_usage(self, name: str) -> dict[str, int]:
        """Σ capacity of the pool's NodeClaims, and `nodes` = their count × 1000 (NodePool limits are milli)."""
        return {resource: amount for resource, amount in self._usage.get(name, {}).items() if amount}

    def state_nodes(self) -> list[statenode.StateNode]:
        """Every NodeClaim joined with its Node (by providerID, else status.nodeName), then unclaimed Nodes."""
        now = self.clock.now()
        # Every change moves `_seq`; what else a state node depends on (nominations, PDB budgets) is read at `now`.
        if self._read_nodes is None or self._read_nodes[0] != (self._seq, now):
            self._read_nodes = ((self._seq, now), tuple(self._build_state_nodes(now)))
        return list(self._read_nodes[1])

    def _build_state_nodes(self, now: float) -> list[statenode.StateNode]:
        joined: set[str] = set()
        out: list[statenode.StateNode] = []
        for claim_key, claim in self._nodeclaims.items():
            # the Node added last, should a re-created Node carry its instance's id under a new name
            node_key = next(reversed(self._nodes_by_provider.get(claim.status.provider_id, {})), "")
            if not node_key and claim.status.node_name in self._nodes:
                node_key = claim.status.node_name
            node = self._nodes.get(node_key) if node_key else None
            if node is not None:
                joined.add(node_key)
            out.append(self._state_node(claim, node, node_key or claim_key, claim_key, now))
        for node_key, node in self._nodes.items():
            if node_key not in joined:
                out.append(self._state_node(None, node, node_key, "", now))
        return sorted(self._hold(out, now), key=lambda n: n.name)

    def _hold(self, nodes: list[statenode.StateNode], now: float) -> list[statenode.StateNode]:
        """`nodes` with `held` set on the leaving ones: their pods that cannot be evicted now."""
        leaving = [i for i, n in enumerate(nodes) if (n.deleting or n.marked_for_deletion) and n.pods]
        if not leaving:
            return nodes
        budgets = movable.budgets(self._raw[resources.PDBS].values())
        stored = self._raw[resources.PODS]
        for i in leaving:
            held = movable.staying(nodes[i].pods, stored.get, budgets, now=now)
            if held:
                nodes[i] = dataclasses.replace(nodes[i], held=held)
        return nodes

    def _state_node(
        self,
        claim: api_nodeclaim.NodeClaim | None,
        node: Mapping[str, Any] | None,
        name: str,
        claim_name: str,
        now: float,
    ) -> statenode.StateNode:
        names = {name, claim_name} - {""}
        nominated = max((self._nominated.get(n, 0.0) for n in names), default=0.0)
        pods = tuple(self._pods_by_node.get(name, {}).values()) if node is not None else ()
        unreadable = tuple(self._unreadable_by_node.get(name, ())) if node is not None else ()
        return statenode.build(
            claim=claim,
            node=node,
            pods=pods,
            unreadable_pods=unreadable,
            marked=bool(names & self._marked),
            nominated_until=nominated if nominated > now else 0.0,
            volume_limits=self._volume_limits.get(name, {}) if node is not None else {},
        )
