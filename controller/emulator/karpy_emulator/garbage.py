"""A stand-in for kube-controller-manager's garbage collector, for the owner references the emulation relies on:
NodeClaims owned by their NodePool (karpy, like upstream, sets `blockOwnerDeletion` on that reference), and the
workloads' chain, Pods owned by ReplicaSets owned by Deployments (`kubectl delete --cascade=foreground`).

As pkg/controller/garbagecollector does, on the ticks (every `interval` seconds) after a write to those kinds:
* background propagation: a dependent whose owner (matched by uid) is gone is deleted;
* foreground propagation: an owner deleted with `propagationPolicy: Foreground` carries the `foregroundDeletion`
  finalizer (the emulated API server adds it, as the real one does); its dependents are deleted, and once none that
  blocks owner deletion is left, the finalizer is removed and the owner goes. This is what `pulumi destroy` of a
  NodePool declared with `pulumi.com/deletionPropagationPolicy: foreground` waits on.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from karpy import clock as karpy_clock
from karpy.kube import client, resources
from karpy_emulator import informers, loop, reads, workloads

log = logging.getLogger(__name__)

FOREGROUND: Final = "foregroundDeletion"
OWNED: Final[tuple[tuple[resources.Resource, resources.Resource], ...]] = (
    (resources.NODECLAIMS, resources.NODEPOOLS),
    (resources.PODS, workloads.REPLICASETS),
    (workloads.REPLICASETS, workloads.DEPLOYMENTS),
)
"""(dependent, owner) pairs the stand-in collects."""


def _namespace(obj: Mapping[str, Any]) -> str:
    return str(informers.meta(obj).get("namespace") or "")


def _owner_refs(obj: Mapping[str, Any], owner: resources.Resource) -> list[Mapping[str, Any]]:
    return [ref for ref in informers.meta(obj).get("ownerReferences") or () if ref.get("kind") == owner.kind]


def _foreground_deleting(owner: Mapping[str, Any]) -> bool:
    meta = informers.meta(owner)
    return bool(meta.get("deletionTimestamp")) and FOREGROUND in (meta.get("finalizers") or ())


class _Pair:
    """What the collector knows of one (dependent, owner) pair: the dependents of each owner uid (the owner →
    dependents graph of pkg/controller/garbagecollector/graph_builder.go, kept from the deltas), and the dependents
    and owners to look at again."""

    def __init__(self, dependent: resources.Resource, owner: resources.Resource) -> None:
        self.dependent, self.owner = dependent, owner
        self.dependents = informers.Index(self._uids)  # owner uid -> dependents referring to it
        self.owners: dict[str, informers.Key] = {}  # owner uid -> key
        self.dependents_queued: set[informers.Key] = set()
        self.owners_queued: set[informers.Key] = set()

    def dependent_changed(self, delta: informers.Delta) -> None:
        self.dependents.update(delta)
        for obj in (delta.old, delta.new):
            for uid in self._uids(obj) if obj is not None else ():
                key = self.owners.get(uid)
                if key is not None:  # it may be blocked no longer, or be now
                    self.owners_queued.add(key)
        if delta.new is not None:
            self.dependents_queued.add(delta.key)

    def owner_changed(self, delta: informers.Delta) -> None:
        """Queue the owner, and its dependents when what decides their fate changed: the owner went, came, or began
        or stopped a foreground deletion (not on every status write: a ReplicaSet's thousands of pods stay put)."""
        before = str(informers.meta(delta.old).get("uid")) if delta.old is not None else None
        after = str(informers.meta(delta.new).get("uid")) if delta.new is not None else None
        if before is not None and before != after:
            self.owners.pop(before, None)
            self.dependents_queued.update(self.dependents.get(before))
        if after is not None and delta.new is not None:
            self.owners[after] = delta.key
            self.owners_queued.add(delta.key)
            if before != after or _foreground_deleting(delta.old or {}) != _foreground_deleting(delta.new):
                self.dependents_queued.update(self.dependents.get(after))

    def _uids(self, obj: Mapping[str, Any]) -> list[str]:
        return [str(ref.get("uid")) for ref in _owner_refs(obj, self.owner)]


class GarbageCollector:
    """`await collector.run()` collects on the ticks after a write to the kinds of `owned`, until cancelled;
    `sync()` is one pass. A pass looks only at the dependents that changed or whose owners changed, and at the
    owners that changed or whose dependents changed (`informers`); what a failed pass left stays queued."""

    def __init__(
        self,
        kube: client.KubeClient,
        *,
        clock: karpy_clock.Clock,
        interval: float = 1.0,
        owned: Sequence[tuple[resources.Resource, resources.Resource]] = OWNED,
        reader: reads.Reader | None = None,
    ) -> None:
        self._kube = kube
        self._reads: reads.Reader = reader or kube
        self._clock = clock
        self._interval = interval
        self._owned = owned
        self._pairs = [_Pair(dependent, owner) for dependent, owner in owned]
        self._seen = {res.plural: informers.Cache(res) for pair in owned for res in pair}

    async def run(self) -> None:
        watched = {res.plural: res for pair in self._owned for res in pair}.values()
        watch = loop.watch(self._reads, list(watched))
        await loop.every(self._interval, self.sync, clock=self._clock, name="garbage collector", watch=watch)

    async def sync(self) -> list[str]:
        """One pass; returns what it deleted or released (`kind/name`)."""
        done: list[str] = []
        for pair in self._pairs:
            # Owners before dependents, in one cut: a dependent is never seen before its owner.
            await self._refresh(self._seen[pair.owner.plural], self._seen[pair.dependent.plural])
            await self._collect(pair, done)
        return done

    async def _refresh(self, *caches: informers.Cache) -> None:
        for cache, deltas in zip(caches, await informers.refresh(self._reads, caches), strict=True):
            for pair in self._pairs:
                for delta in deltas:
                    if pair.owner.plural == cache.res.plural:
                        pair.owner_changed(delta)
                    if pair.dependent.plural == cache.res.plural:
                        pair.dependent_changed(delta)

    async def _collect(self, pair: _Pair, done: list[str]) -> None:
        owners = self._seen[pair.owner.plural].objects
        dependents = self._seen[pair.dependent.plural].objects
        for key in sorted(pair.dependents_queued):
            dependent = dependents.get(key)
            if dependent is not None and not informers.meta(dependent).get("deletionTimestamp"):
                refs = _owner_refs(dependent, pair.owner)
                owner_states = [self._owner(pair, str(ref.get("uid"))) for ref in refs]
                if refs and all(o is None or _foreground_deleting(o) for o in owner_states):
                    name = str(informers.meta(dependent).get("name"))
                    if await self._kube.delete(pair.dependent, name, namespace=_namespace(dependent)):
                        done.append(f"{pair.dependent.kind}/{name}")
            pair.dependents_queued.discard(key)
        for key in sorted(pair.owners_queued):
            owner = owners.get(key)
            if owner is not None and _foreground_deleting(owner) and not self._blocked(owner, pair, dependents):
                name = str(informers.meta(owner).get("name"))
                kept = [f for f in informers.meta(owner).get("finalizers") or () if f != FOREGROUND]
                await self._kube.patch(
                    pair.owner, name, {"metadata": {"finalizers": kept or None}}, namespace=_namespace(owner)
                )
                done.append(f"{pair.owner.kind}/{name}")
            pair.owners_queued.discard(key)

    def _owner(self, pair: _Pair, uid: str) -> Mapping[str, Any] | None:
        key = pair.owners.get(uid)
        return self._seen[pair.owner.plural].objects.get(key) if key is not None else None

    @staticmethod
    def _blocked(owner: Mapping[str, Any], pair: _Pair, dependents: Mapping[informers.Key, Mapping[str, Any]]) -> bool:
        uid = str(informers.meta(owner).get("uid"))
        return any(
            str(ref.get("uid")) == uid and ref.get("blockOwnerDeletion")
            for key in pair.dependents.get(uid)
            for ref in _owner_refs(dependents[key], pair.owner)
        )
