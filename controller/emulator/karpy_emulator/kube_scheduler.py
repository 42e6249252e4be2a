"""A kube-scheduler stand-in: binds pending pods to nodes where they fit, marks the others Unschedulable.

Where a pod fits and why it fits nowhere is `fit_errors`' (the controller's own solver, and kube-scheduler's FitError
message); what the filters read of a node, and the cache of nodes with their bound pods, `node_facts`'; the condition
written on a pod that fits nowhere, `pod_conditions`'. A pod placed with unbound claims gets its volumes provisioned
in the node's zone before it is bound, as kube-scheduler's VolumeBinding PreBind and the CSI provisioner do. The
Unschedulable message names the node count (`0/5 nodes are available: ...`), so a pod tried again as nodes come
writes again, as kube-scheduler's would; what bounds that is the scheduling queue (`scheduling_queue`): a failed pod
is tried again only after an event that may make it schedulable and its backoff, or after 5 minutes, so an unchanged
cluster costs no attempt and no write.

Its client sends at most `qps` requests a second after a `burst` (50 and 100: KubeSchedulerConfiguration v1's
clientConnection defaults, pkg/scheduler/apis/config/v1/defaults.go, handed to client-go by createKubeConfig in
cmd/kube-scheduler/app/options/options.go; client-go's rest.RESTClientFor gives a client with QPS > 0 a token bucket
whatever the server's API Priority and Fairness does). Binds and condition writes share it, as they share the
scheduler's clientset. A pass tries only as many waiting pods as the bucket holds tokens (kube-scheduler pops one pod
at a time, and its attempts wait on those writes), so later pods are tried against the cluster as it is then, not
as it was when the first was tried; the others wait for the next pass, which comes when tokens do.

A pass costs what changed since the last one, not the cluster: the stand-in keeps its pods and nodes in informers
(`informers.Cache`) and, per changed pod, its queue of pods waiting to be scheduled (kube-scheduler's scheduling
queue takes only unscheduled pods, pkg/scheduler/internal/queue) and its nodes with their bound pods
(`node_facts.NodeCache`). A pod is parsed once per version of its spec and metadata, and the pods of one template
(a ReplicaSet's) from one parse (`podtemplates.Templates`).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy import clock as karpy_clock
from karpy.api import errors
from karpy.kube import client, ratelimit, resources
from karpy.scheduling import pods as scheduling_pods
from karpy.scheduling import podtemplates
from karpy_emulator import fit_errors, informers, loop, node_facts, pod_conditions, reads, scheduling_queue, volumes

log = logging.getLogger(__name__)

DEFAULT_SCHEDULER = "default-scheduler"
TERMINAL_POD_PHASES = frozenset({"Succeeded", "Failed"})
_EVERY_WRITE = frozenset({"resourceVersion", "managedFields"})
"""Metadata every write changes, whatever it changed."""
_UNKNOWN = frozenset({scheduling_queue.Plugin.OTHER})
"""The rejectors of a pod that failed outside the filters (cannot be parsed, volumes lost meanwhile)."""


@dataclass(frozen=True, slots=True)
class SchedulerSettings:
    interval: float = 1.0
    """Seconds between scheduling passes."""
    scheduler_name: str = DEFAULT_SCHEDULER
    """Pods naming another scheduler are left alone, as kube-scheduler does."""
    queue: scheduling_queue.QueueSettings = field(default_factory=scheduling_queue.QueueSettings)
    """When a pod that failed is tried again (kube-scheduler's backoff and podMaxInUnschedulablePodsDuration)."""
    qps: float | None = 50.0
    """Requests a second the stand-in's client sends once its burst is spent (kube-scheduler's clientConnection.qps
    default); None: no limit."""
    burst: int = 100
    """Requests the client may send at once (clientConnection.burst's default)."""
    bind_concurrency: int = 16
    """Bindings (and Unschedulable condition writes) in flight at once: kube-scheduler binds in goroutines of its
    own, and one pod's status write does not wait for another's."""


@dataclass(slots=True)
class ScheduleReport:
    bound: dict[str, str] = field(default_factory=dict)  # "ns/name" -> node
    unschedulable: dict[str, str] = field(default_factory=dict)  # "ns/name" -> message


def pod_key(pod: Mapping[str, Any]) -> str:
    md = pod.get("metadata") or {}
    return f"{md.get('namespace') or 'default'}/{md.get('name')}"


def is_pending(pod: Mapping[str, Any], *, scheduler_name: str = DEFAULT_SCHEDULER) -> bool:
    """Waiting for this scheduler: no node, not deleting, not finished."""
    spec = pod.get("spec") or {}
    return (
        not spec.get("nodeName")
        and not (pod.get("metadata") or {}).get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase") not in TERMINAL_POD_PHASES
        and (spec.get("schedulerName") or DEFAULT_SCHEDULER) == scheduler_name
    )


class KubeScheduler:
    """`await kube_scheduler.run()` schedules on the ticks (every `settings.interval`) after a write to pods, nodes or
    volumes, or when a failed pod's backoff or wait ends, until cancelled; `sync()` is one pass."""

    def __init__(
        self,
        kube: client.KubeClient,
        *,
        clock: karpy_clock.Clock,
        settings: SchedulerSettings | None = None,
        reader: reads.Reader | None = None,
    ) -> None:
        self._kube = kube
        self._reads: reads.Reader = reader or kube
        self._clock = clock
        self._settings = settings or SchedulerSettings()
        self._queue = scheduling_queue.Queue(self._settings.queue)
        qps = self._settings.qps
        self._limiter = None if qps is None else _Bucket(qps, self._settings.burst, clock=clock)
        self._next_due: float | None = None  # when the earliest failed pod may be tried again with no event
        self._deferred = False  # the last pass left waiting pods untried for want of tokens
        self._pods = informers.Cache(resources.PODS)
        self._nodes = informers.Cache(resources.NODES)
        # The scheduling queue: the pods waiting for this scheduler, parsed (None: cannot be parsed).
        self._waiting: dict[informers.Key, tuple[Mapping[str, Any], scheduling_pods.Pod | None]] = {}
        # The cache: each bound, running pod's node, the pods on each node, each node as the solver sees it.
        self._cache = node_facts.NodeCache()
        # Each pod's parse with what it was parsed from (its spec and metadata but the fields every write changes).
        self._parsed: dict[informers.Key, tuple[object, dict[str, Any], scheduling_pods.Pod | None]] = {}
        # A ReplicaSet's pods differ only in their own fields: each template is parsed once, its pods stamped from it
        # (a pod is parsed again when bound, its nodeName new).
        self._templates = podtemplates.Templates()

    async def run(self) -> None:
        watched = (resources.PODS, resources.NODES, resources.PVCS, resources.PVS, resources.STORAGECLASSES)
        watch = loop.watch(self._reads, watched, due=self._due)
        await loop.every(self._settings.interval, self.sync, clock=self._clock, name="kube-scheduler", watch=watch)

    async def _due(self, now: float) -> bool:
        return self._next_due is not None and now >= self._next_due

    async def sync(self) -> ScheduleReport:
        report = ScheduleReport()
        self._deferred = False
        try:
            await self._sync(report)
        finally:
            self._next_due = self._queue.next_due()
            if self._deferred and self._limiter is not None:
                token = self._clock.now() + self._limiter.until_token()
                self._next_due = token if self._next_due is None else min(self._next_due, token)
        return report

    async def _sync(self, report: ScheduleReport) -> None:
        pod_deltas, node_deltas = await informers.refresh(self._reads, [self._pods, self._nodes])
        freed = placed = False
        for delta in pod_deltas:
            left, came = self._pod_changed(delta.key)
            freed, placed = freed or left, placed or came
        changes = tuple(self._cache.node_changed(delta) for delta in node_deltas)
        self._queue.move(scheduling_queue.Events(nodes=changes, freed=freed, placed=placed), self._waiting)
        if not self._waiting:
            return
        # In the cache's order (its LIST's, then each new node after the others), as kube-scheduler walks its node
        # snapshot: sorting every node each pass cost the cluster's size per pass.
        considered = [node for node in self._nodes.objects.values() if not node_facts.is_deleting(node)]
        pending: list[scheduling_pods.Pod] = []
        by_key: dict[str, Mapping[str, Any]] = {}
        now = self._clock.now()
        budget = None if self._limiter is None else int(self._limiter.available())
        tried = 0
        for queued in sorted(self._waiting):  # in a LIST's order, as kube-scheduler's queue receives them
            if not self._queue.ready(queued, now):
                continue
            if budget is not None and tried >= budget:
                self._deferred = True
                break
            tried += 1
            raw, parsed = self._waiting[queued]
            if parsed is None:
                await self._mark(raw, "the pod cannot be parsed for scheduling", now, report)
                continue
            pending.append(parsed)
            by_key[parsed.key] = raw
        # Volumes are read only when a waiting pod has claims: an idle or volume-free cluster pays no extra LIST.
        snap = await volumes.read(self._reads) if any(p.pvc_names for p in pending) else volumes.Snapshot()
        existing = [self._cache.existing(n) for n in considered]
        rejected: dict[str, frozenset[scheduling_queue.Plugin]] = {}
        placements, reasons = fit_errors.plan_on(pending, existing, volume_catalog=snap.catalog, rejected=rejected)
        pods_by_key = {p.key: p for p in pending}
        labels_by_node = {str(n["metadata"]["name"]): (n.get("metadata") or {}).get("labels") or {} for n in considered}
        provisioned: set[str] = set()  # claims given a volume this pass
        plain: list[tuple[str, str]] = []
        for key, node in placements.items():
            claims = volumes.unbound_claims(pods_by_key[key], snap)
            if claims and not await self._prebind(
                by_key[key],
                claims,
                snap,
                node=node,
                node_labels=labels_by_node[node],
                provisioned=provisioned,
                nodes=len(considered),
                report=report,
                now=now,
            ):
                continue
            plain.append((key, node))
        await self._bind_all(plain, report)
        marks = [(by_key[key], message) for key, message in reasons.items()]
        await self._mark_all(marks, now, report, rejected=rejected)

    async def _bind_all(self, placements: Sequence[tuple[str, str]], report: ScheduleReport) -> None:
        """Bind with `bind_concurrency` bindings in flight, started in placement order."""
        done = await loop.gather_limited(
            [functools.partial(self._bind, key, node) for key, node in placements],
            limit=self._settings.bind_concurrency,
        )
        report.bound.update((key, node) for (key, node), ok in zip(placements, done, strict=True) if ok)

    async def _mark_all(
        self,
        marks: Sequence[tuple[Mapping[str, Any], str]],
        now: float,
        report: ScheduleReport,
        *,
        rejected: Mapping[str, frozenset[scheduling_queue.Plugin]] | None = None,
    ) -> None:
        """Record the failed attempts and write the Unschedulable conditions that changed, `bind_concurrency` at a
        time (each pod's failure handling is independent of the others'); the report lists them in the order given."""
        for raw, message in marks:
            report.unschedulable[pod_key(raw)] = message
            key = informers.key_of(raw)
            plugins = (rejected or {}).get(pod_key(raw), _UNKNOWN)
            self._queue.failed(key, now, pod=self._waiting[key][1] if key in self._waiting else None, rejectors=plugins)
        written = await loop.gather_limited(
            [functools.partial(self._write_mark, raw, message, now) for raw, message in marks],
            limit=self._settings.bind_concurrency,
        )
        for (raw, _), ok in zip(marks, written, strict=True):
            if not ok:
                report.unschedulable.pop(pod_key(raw), None)

    async def _bind(self, key: str, node: str) -> bool:
        namespace, name = key.split("/", 1)
        await self._take()
        try:
            await self._kube.bind(namespace, name, node)
        except (client.Conflict, client.NotFound) as error:  # bound or deleted meanwhile
            log.info("kube-scheduler stand-in: binding %s to %s skipped: %s", key, node, error)
            return False
        return True

    def _pod_changed(self, key: informers.Key) -> tuple[bool, bool]:
        """Move a created, changed or deleted pod in or out of the queue and its node's pods (parsed once per
        change: a pod's every version is parsed at most once); (whether it left a node, whether it came to one)."""
        self._waiting.pop(key, None)
        was = self._cache.remove(key)
        raw = self._pods.objects.get(key)
        if raw is None:
            self._queue.forget(key)
            self._parsed.pop(key, None)
            return was is not None, False
        node = (raw.get("spec") or {}).get("nodeName")
        if node and (raw.get("status") or {}).get("phase") not in TERMINAL_POD_PHASES:
            self._queue.forget(key)
            parsed = self._parse_once(key, raw)
            if parsed is not None:
                self._cache.place(key, str(node), parsed)
        elif is_pending(raw, scheduler_name=self._settings.scheduler_name):
            before = self._parsed.get(key)
            self._waiting[key] = (raw, self._parse_once(key, raw))
            if self._parsed.get(key) is not before:  # its spec or metadata changed: the queue's Update
                self._queue.changed(key)
        else:
            self._queue.forget(key)
        now_on = self._cache.node_of(key)
        return was is not None and was != now_on, now_on is not None and was != now_on

    def _parse_once(self, key: informers.Key, raw: Mapping[str, Any]) -> scheduling_pods.Pod | None:
        """The pod parsed, or its last parse while its spec and metadata are unchanged: a pod is parsed from those
        alone (`scheduling.pods.from_manifest`), and most of its writes (the kubelet's, this stand-in's
        conditions) change only its status."""
        spec = raw.get("spec")
        metadata = {k: v for k, v in (raw.get("metadata") or {}).items() if k not in _EVERY_WRITE}
        cached = self._parsed.get(key)
        if cached is not None and cached[0] == spec and cached[1] == metadata:
            return cached[2]
        parsed = _parse(raw, self._templates)
        self._parsed[key] = (spec, metadata, parsed)
        return parsed

    async def _prebind(
        self,
        raw: Mapping[str, Any],
        claims: Sequence[Mapping[str, Any]],
        snap: volumes.Snapshot,
        *,
        node: str,
        node_labels: Mapping[str, str],
        provisioned: set[str],
        nodes: int,
        report: ScheduleReport,
        now: float,
    ) -> bool:
        """VolumeBinding's PreBind: give the pod's waiting claims volumes usable from `node`; True when it may bind."""
        claim_keys = {pod_key(c) for c in claims}
        if claim_keys & provisioned:  # shared with a pod placed earlier in this pass: wait for that volume's zone
            return False
        provisioned |= claim_keys
        try:
            ready = await volumes.provision(
                self._kube, claims, snap, node=node, node_labels=volumes.node_labels(node_labels)
            )
        except (client.Conflict, client.NotFound) as error:  # a claim changed or went meanwhile: next pass
            log.info("kube-scheduler stand-in: volumes of %s not bound: %s", pod_key(raw), error)
            return False
        if not ready:
            await self._mark(raw, f"0/{nodes} nodes are available: {nodes} {volumes.BIND_CONFLICT}.", now, report)
        return ready

    async def _mark(self, raw: Mapping[str, Any], message: str, now: float, report: ScheduleReport) -> None:
        await self._mark_all([(raw, message)], now, report)

    async def _write_mark(self, raw: Mapping[str, Any], message: str, now: float) -> bool:
        """Set the pod's Unschedulable condition unless it already says `message`; False when the pod is gone."""
        key = pod_key(raw)
        patch = pod_conditions.unschedulable_patch(raw, message, now)
        if patch is None:
            return True
        namespace, name = key.split("/", 1)
        await self._take()
        try:
            await self._kube.patch(resources.PODS, name, patch, namespace=namespace, subresource="status")
        except client.NotFound:
            return False
        return True

    async def _take(self) -> None:
        """A token for one request, waiting on the clock when the pass overdrew the bucket (volume PreBind)."""
        if self._limiter is not None:
            await self._limiter.acquire()


class _Bucket(ratelimit.TokenBucket):
    """client-go's token bucket, read without taking: how many pods a pass may try."""

    def available(self) -> float:
        self._refill()
        return self._tokens

    def until_token(self) -> float:
        """Seconds until a whole token is there (0: one is)."""
        return max(0.0, 1.0 - self.available()) / self.qps


def _parse(raw: Mapping[str, Any], templates: podtemplates.Templates) -> scheduling_pods.Pod | None:
    try:
        return templates.parse(raw)
    except errors.ValidationError as error:
        log.warning("kube-scheduler stand-in: %s", error)
        return None
