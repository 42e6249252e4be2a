"""A minimal Deployment + ReplicaSet controller (and their garbage collection) for the emulated cluster.

A Deployment owns one ReplicaSet per pod template (`<name>-<pod-template-hash>`); the current one gets
`spec.replicas`, older ones are scaled to zero (a Recreate rollout: enough for the demo). A ReplicaSet keeps
`spec.replicas` live pods: it creates missing ones (generateName, ownerReference, `pod-template-hash` label) and
deletes surplus ones in upstream's order of preference (unscheduled first, then not running, then not ready, then
newest), at most `BURST_REPLICAS` per pass, creating in slow-start batches (1, 2, 4, ... side by side) as
pkg/controller/replicaset/replica_set.go does. Evicted or deleted pods are replaced on the next pass. ReplicaSets
and pods whose controller is gone are deleted, as the garbage collector does. Status replicas/readyReplicas are
written only when they change. Reads come from informer caches over the shared view of the store (`informers`),
writes go over HTTP.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from karpy import clock as karpy_clock
from karpy.kube import client, resources
from karpy_emulator import informers, loop, reads

log = logging.getLogger(__name__)

DEPLOYMENTS = resources.Resource("apps", "v1", "deployments", "Deployment", True)
REPLICASETS = resources.Resource("apps", "v1", "replicasets", "ReplicaSet", True)
POD_TEMPLATE_HASH = "pod-template-hash"
BURST_REPLICAS = 500
"""Pods one pass of a ReplicaSet creates or deletes at most (kube-controller-manager's BurstReplicas)."""
SLOW_START_INITIAL_BATCH = 1
"""The first batch of a pass's creates (controller.SlowStartInitialBatchSize); each next batch doubles."""
TERMINAL_POD_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(slots=True)
class WorkloadReport:
    created: list[str] = field(default_factory=list)  # pods "ns/name"
    deleted: list[str] = field(default_factory=list)  # pods "ns/name"
    replicasets: list[str] = field(default_factory=list)  # created or scaled "ns/name=replicas"
    collected: list[str] = field(default_factory=list)  # orphans "Kind ns/name"


def controller_uid(obj: Mapping[str, Any], kind: str) -> str | None:
    ref = next((r for r in informers.meta(obj).get("ownerReferences") or () if r.get("controller")), None)
    return str(ref.get("uid")) if ref is not None and ref.get("kind") == kind else None


def owner_reference(owner: Mapping[str, Any], *, api_version: str, kind: str) -> dict[str, Any]:
    meta = informers.meta(owner)
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def template_hash(template: Mapping[str, Any]) -> str:
    """A short stable hash of the pod template (upstream uses FNV of the template plus a collision count)."""
    digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()
    return digest[:10]


def replicaset_for(deployment: Mapping[str, Any]) -> dict[str, Any]:
    """The ReplicaSet of the deployment's current template."""
    meta = informers.meta(deployment)
    spec = deployment.get("spec") or {}
    template = spec.get("template") or {}
    hashed = template_hash(template)
    pod_meta = dict(template.get("metadata") or {})
    pod_meta["labels"] = {**(pod_meta.get("labels") or {}), POD_TEMPLATE_HASH: hashed}
    selector = dict(spec.get("selector") or {})
    selector["matchLabels"] = {**(selector.get("matchLabels") or {}), POD_TEMPLATE_HASH: hashed}
    return {
        "apiVersion": REPLICASETS.api_version,
        "kind": REPLICASETS.kind,
        "metadata": {
            "name": f"{meta.get('name')}-{hashed}",
            "namespace": meta.get("namespace"),
            "labels": dict(pod_meta["labels"]),
            "ownerReferences": [owner_reference(deployment, api_version=DEPLOYMENTS.api_version, kind="Deployment")],
        },
        "spec": {
            "replicas": int(spec.get("replicas", 1)),
            "selector": selector,
            "template": {**template, "metadata": pod_meta},
        },
    }


def pod_for(replicaset: Mapping[str, Any]) -> dict[str, Any]:
    meta = informers.meta(replicaset)
    template = (replicaset.get("spec") or {}).get("template") or {}
    pod_meta = dict(template.get("metadata") or {})
    pod_meta.update(
        generateName=f"{meta.get('name')}-",
        namespace=meta.get("namespace"),
        ownerReferences=[owner_reference(replicaset, api_version=REPLICASETS.api_version, kind="ReplicaSet")],
    )
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": dict(template.get("spec") or {})}


def is_live(pod: Mapping[str, Any]) -> bool:
    return not informers.meta(pod).get("deletionTimestamp") and (pod.get("status") or {}).get("phase") not in (
        TERMINAL_POD_PHASES
    )


def is_ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def deletion_order(pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Which pods a scale-down removes first (upstream ActivePods ranking, simplified): unscheduled, then not
    running, then not ready, then the newest."""

    def rank(pod: Mapping[str, Any]) -> tuple[bool, bool, bool, str, str]:
        scheduled = bool((pod.get("spec") or {}).get("nodeName"))
        running = (pod.get("status") or {}).get("phase") == "Running"
        created = str(informers.meta(pod).get("creationTimestamp") or "")
        return (scheduled, running, is_ready(pod), _invert(created), str(informers.meta(pod).get("name")))

    return sorted(pods, key=rank)


def _invert(stamp: str) -> str:
    """Sorts RFC 3339 timestamps newest first under an ascending sort."""
    return "".join(chr(0x10FFFF - ord(ch)) for ch in stamp)


def _replicaset_of(pod: Mapping[str, Any]) -> list[str]:
    uid = controller_uid(pod, "ReplicaSet")
    return [uid] if uid is not None else []


def _live_of(pod: Mapping[str, Any]) -> list[str]:
    return _replicaset_of(pod) if is_live(pod) else []


def _ready_of(pod: Mapping[str, Any]) -> list[str]:
    return _replicaset_of(pod) if is_live(pod) and is_ready(pod) else []


class WorkloadController:
    """`await controller.run()` reconciles on the ticks (every `interval` seconds) after a write to Deployments,
    ReplicaSets or pods, until cancelled; `sync()` is one pass.

    A pass looks at every Deployment (there are few) but only at the ReplicaSets that changed or whose pods
    changed since they were last looked at, and at the pods whose ReplicaSet may be gone (`informers`): a
    ReplicaSet and pods nothing wrote to since would need no write. What a pass leaves undone (it failed) stays
    queued for the next one."""

    def __init__(
        self,
        kube: client.KubeClient,
        *,
        clock: karpy_clock.Clock,
        interval: float = 1.0,
        reader: reads.Reader | None = None,
        burst_replicas: int = BURST_REPLICAS,
    ) -> None:
        self._kube = kube
        self._reads: reads.Reader = reader or kube
        self._burst = burst_replicas
        self._clock = clock
        self._interval = interval
        self._deployments_seen = informers.Cache(DEPLOYMENTS)
        self._replicasets_seen = informers.Cache(REPLICASETS)
        self._pods_seen = informers.Cache(resources.PODS)
        # The pods of each ReplicaSet uid: all, live, live and ready (the counts its scaling and status need), as
        # kube-controller-manager indexes pods by controller reference (pkg/controller/replicaset/replica_set.go).
        self._owned = informers.Index(_replicaset_of)
        self._live = informers.Index(_live_of)
        self._ready = informers.Index(_ready_of)
        self._rs_keys: dict[str, informers.Key] = {}  # ReplicaSet uid -> key
        self._queued: set[informers.Key] = set()  # ReplicaSets to look at
        self._orphans: set[informers.Key] = set()  # pods whose ReplicaSet may be gone

    async def run(self) -> None:
        watch = loop.watch(self._reads, (DEPLOYMENTS, REPLICASETS, resources.PODS))
        await loop.every(self._interval, self.sync, clock=self._clock, name="workload controller", watch=watch)

    async def sync(self) -> WorkloadReport:
        report = WorkloadReport()
        await self._refresh(self._deployments_seen, self._replicasets_seen)
        await self._deployments(report)
        await self._refresh(self._replicasets_seen, self._pods_seen)
        await self._replicasets(report)
        await self._refresh(self._replicasets_seen)  # with the statuses just written
        replicasets = list(self._replicasets_seen.sorted())
        for deployment in self._deployments_seen.sorted():
            uid = informers.meta(deployment).get("uid")
            if not informers.meta(deployment).get("deletionTimestamp"):
                owned = [rs for rs in replicasets if controller_uid(rs, "Deployment") == uid]
                replicas = sum(int((rs.get("status") or {}).get("replicas") or 0) for rs in owned)
                ready = sum(int((rs.get("status") or {}).get("readyReplicas") or 0) for rs in owned)
                await self._status(DEPLOYMENTS, deployment, replicas, ready)
        return report

    async def _refresh(self, *caches: informers.Cache) -> None:
        """Bring the caches up to date and queue what their changes concern (see the class docstring)."""
        for cache, deltas in zip(caches, await informers.refresh(self._reads, caches), strict=True):
            if cache is self._replicasets_seen:
                for delta in deltas:
                    self._replicaset_changed(delta)
            elif cache is self._pods_seen:
                for delta in deltas:
                    for index in (self._owned, self._live, self._ready):
                        index.update(delta)
                    for obj in (delta.old, delta.new):
                        for uid in _replicaset_of(obj) if obj is not None else ():
                            if uid in self._rs_keys:
                                self._queued.add(self._rs_keys[uid])
                            elif obj is delta.new:
                                self._orphans.add(delta.key)

    def _replicaset_changed(self, delta: informers.Delta) -> None:
        before = str(informers.meta(delta.old).get("uid")) if delta.old is not None else None
        after = str(informers.meta(delta.new).get("uid")) if delta.new is not None else None
        if before is not None and before != after:  # gone (or replaced under the same name): its pods are orphans
            self._rs_keys.pop(before, None)
            self._orphans.update(self._owned.get(before))
        if after is not None:
            self._rs_keys[after] = delta.key
            self._queued.add(delta.key)

    async def _deployments(self, report: WorkloadReport) -> None:
        deployments = list(self._deployments_seen.sorted())
        replicasets = list(self._replicasets_seen.sorted())
        uids = {str(informers.meta(d).get("uid")) for d in deployments}
        for rs in replicasets:
            owner = controller_uid(rs, "Deployment")
            if owner is not None and owner not in uids and not informers.meta(rs).get("deletionTimestamp"):
                await self._delete(REPLICASETS, rs, report.collected, "ReplicaSet")
        for deployment in deployments:
            if informers.meta(deployment).get("deletionTimestamp"):
                continue
            uid = str(informers.meta(deployment).get("uid"))
            wanted = replicaset_for(deployment)
            owned = [rs for rs in replicasets if controller_uid(rs, "Deployment") == uid]
            current = next((rs for rs in owned if informers.meta(rs).get("name") == wanted["metadata"]["name"]), None)
            if current is None:
                try:
                    await self._kube.create(REPLICASETS, wanted)
                except client.AlreadyExists:
                    pass
                else:
                    report.replicasets.append(f"{informers.key_text(wanted)}={wanted['spec']['replicas']}")
            for rs in owned:
                target = wanted["spec"]["replicas"] if rs is current else 0
                if int((rs.get("spec") or {}).get("replicas", 1)) != target:
                    await self._kube.patch(
                        REPLICASETS, str(informers.meta(rs)["name"]), {"spec": {"replicas": target}}, namespace=_ns(rs)
                    )
                    report.replicasets.append(f"{informers.key_text(rs)}={target}")

    async def _replicasets(self, report: WorkloadReport) -> None:
        for key in sorted(self._orphans):
            pod = self._pods_seen.objects.get(key)
            owner = controller_uid(pod, "ReplicaSet") if pod is not None else None
            orphaned = pod is not None and owner is not None and owner not in self._rs_keys
            if orphaned and pod is not None and not informers.meta(pod).get("deletionTimestamp"):
                await self._delete(resources.PODS, pod, report.collected, "Pod")
            self._orphans.discard(key)
        for key in sorted(self._queued):
            rs = self._replicasets_seen.objects.get(key)
            if rs is not None and not informers.meta(rs).get("deletionTimestamp"):
                await self._replicaset(rs, report)
            self._queued.discard(key)

    async def _replicaset(self, rs: Mapping[str, Any], report: WorkloadReport) -> None:
        uid = str(informers.meta(rs).get("uid"))
        live = self._live.get(uid)
        replicas, ready = len(live), len(self._ready.get(uid))
        wanted = int((rs.get("spec") or {}).get("replicas", 1))
        if replicas < wanted:
            created = await self._create_pods(rs, min(wanted - replicas, self._burst), report)
            replicas, ready = replicas + len(created), ready + sum(1 for p in created if is_ready(p))
        elif replicas > wanted:
            pods = [self._pods_seen.objects[key] for key in live]
            surplus = deletion_order(pods)[: min(replicas - wanted, self._burst)]
            deleted = await loop.gather_limited(
                [functools.partial(self._delete, resources.PODS, pod, report.deleted) for pod in surplus],
                limit=self._burst,
            )
            gone = [pod for pod, ok in zip(surplus, deleted, strict=True) if ok]
            replicas, ready = replicas - len(gone), ready - sum(1 for p in gone if is_ready(p))
        await self._status(REPLICASETS, rs, replicas, ready)

    async def _create_pods(self, rs: Mapping[str, Any], count: int, report: WorkloadReport) -> list[dict[str, Any]]:
        """Create `count` pods of `rs` in slow-start batches (1, 2, 4, ... side by side); the first failed batch
        ends the pass after its successes are counted, as upstream's manageReplicas does."""

        async def create() -> dict[str, Any]:
            return await self._kube.create(resources.PODS, pod_for(rs))

        created, error = await loop.slow_start_batch(count, create, initial=SLOW_START_INITIAL_BATCH)
        report.created.extend(informers.key_text(pod) for pod in created)
        if error is not None:
            raise error
        return created

    async def _delete(self, res: resources.Resource, obj: Mapping[str, Any], into: list[str], kind: str = "") -> bool:
        if await self._kube.delete(res, str(informers.meta(obj)["name"]), namespace=_ns(obj)):
            into.append(f"{kind} {informers.key_text(obj)}" if kind else informers.key_text(obj))
            return True
        return False

    async def _status(self, res: resources.Resource, obj: Mapping[str, Any], replicas: int, ready: int) -> None:
        """replicas/readyReplicas: live pods of a ReplicaSet, or summed over a Deployment's ReplicaSets."""
        # observedGeneration and updatedReplicas are what `kubectl rollout status` waits on (polymorphichelpers/
        # rollout_status.go); the stand-in rolls a template change out at once, so every replica is updated.
        wanted = {
            "replicas": replicas,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "updatedReplicas": replicas,
            "observedGeneration": int(informers.meta(obj).get("generation") or 1),
        }
        old = obj.get("status") or {}
        if all(old.get(k, 0) == v for k, v in wanted.items()):
            return
        try:
            await self._kube.patch(
                res, str(informers.meta(obj)["name"]), {"status": wanted}, namespace=_ns(obj), subresource="status"
            )
        except client.NotFound:
            return


def _ns(obj: Mapping[str, Any]) -> str:
    return str(informers.meta(obj).get("namespace") or "default")
