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
from karpy_emulator import loop, reads, workloads

log = logging.getLogger(__name__)

FOREGROUND: Final = "foregroundDeletion"
OWNED: Final[tuple[tuple[resources.Resource, resources.Resource], ...]] = (
    (resources.NODECLAIMS, resources.NODEPOOLS),
    (resources.PODS, workloads.REPLICASETS),
    (workloads.REPLICASETS, workloads.DEPLOYMENTS),
)
"""(dependent, owner) pairs the stand-in collects."""


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _namespace(obj: Mapping[str, Any]) -> str:
    return str(_meta(obj).get("namespace") or "")


def _owner_refs(obj: Mapping[str, Any], owner: resources.Resource) -> list[Mapping[str, Any]]:
    return [ref for ref in _meta(obj).get("ownerReferences") or () if ref.get("kind") == owner.kind]


class GarbageCollector:
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

    async def run(self) -> None:
        watched = {res.plural: res for pair in self._owned for res in pair}.values()
        watch = loop.watch(self._reads, list(watched))
        await loop.every(self._interval, self.sync, clock=self._clock, name="garbage collector", watch=watch)

    async def sync(self) -> list[str]:
        """One pass; returns what it deleted or released (`kind/name`)."""
        done: list[str] = []
        for dependent_res, owner_res in self._owned:
            owners, _ = await self._reads.list(owner_res)
            dependents, _ = await self._reads.list(dependent_res)
            by_uid = {str(_meta(o).get("uid")): o for o in owners}
            for dependent in dependents:
                refs = _owner_refs(dependent, owner_res)
                owner_states = [by_uid.get(str(ref.get("uid"))) for ref in refs]
                orphaned = refs and all(o is None or self._foreground_deleting(o) for o in owner_states)
                if orphaned and not _meta(dependent).get("deletionTimestamp"):
                    name = str(_meta(dependent).get("name"))
                    if await self._kube.delete(dependent_res, name, namespace=_namespace(dependent)):
                        done.append(f"{dependent_res.kind}/{name}")
            for owner in owners:
                if self._foreground_deleting(owner) and not self._blocked(owner, dependents, owner_res):
                    name = str(_meta(owner).get("name"))
                    kept = [f for f in _meta(owner).get("finalizers") or () if f != FOREGROUND]
                    await self._kube.patch(
                        owner_res, name, {"metadata": {"finalizers": kept or None}}, namespace=_namespace(owner)
                    )
                    done.append(f"{owner_res.kind}/{name}")
        return done

    @staticmethod
    def _foreground_deleting(owner: Mapping[str, Any]) -> bool:
        meta = _meta(owner)
        return bool(meta.get("deletionTimestamp")) and FOREGROUND in (meta.get("finalizers") or ())

    @staticmethod
    def _blocked(owner: Mapping[str, Any], dependents: Sequence[Mapping[str, Any]], res: resources.Resource) -> bool:
        uid = str(_meta(owner).get("uid"))
        return any(
            str(ref.get("uid")) == uid and ref.get("blockOwnerDeletion")
            for dependent in dependents
            for ref in _owner_refs(dependent, res)
        )
