"""A stand-in for kube-controller-manager's taint-eviction controller (pkg/controller/tainteviction/
taint_eviction.go): pods on a node tainted `NoExecute` are deleted unless they tolerate it.

On the ticks (every `interval` seconds) after a write to nodes or pods, or while a pod waits out its toleration,
for each pod bound to a node with NoExecute taints (found from an index of the pods by node, `informers`):
* a taint the pod does not tolerate: the pod is deleted now;
* every taint tolerated, some toleration with `tolerationSeconds`: the pod is deleted once the smallest of those
  has passed since the controller first saw it so (upstream's `getMinTolerationTime`, timed from when the
  controller processed the taint; a negative or zero value means now);
* every taint tolerated forever: the pod stays.
A pod whose node loses the taints (or that goes) is forgotten, as upstream cancels its scheduled eviction. Deleted
pods get a `TaintManagerEviction` event, as upstream records one. Time is the cluster's clock (virtual included).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

from karpy import clock as karpy_clock
from karpy.api import labels, meta
from karpy.kube import client, resources
from karpy.scheduling import taints as scheduling_taints
from karpy_emulator import informers, kubelet, loop, reads

log = logging.getLogger(__name__)

NO_EXECUTE: Final = labels.EFFECT_NO_EXECUTE
REASON: Final = "TaintManagerEviction"


def no_execute_taints(node: Mapping[str, Any]) -> list[meta.Taint]:
    return [
        meta.Taint(key=str(t.get("key", "")), effect=NO_EXECUTE, value=str(t.get("value") or ""))
        for t in (node.get("spec") or {}).get("taints") or ()
        if t.get("effect") == NO_EXECUTE
    ]


def eviction_delay(taints: Sequence[meta.Taint], tolerations: Sequence[Mapping[str, Any]]) -> float | None:
    """Seconds until a pod with `tolerations` goes from a node with the NoExecute `taints`: 0 when one is not
    tolerated, None when all are tolerated forever (upstream's getMatchingTolerations + getMinTolerationTime)."""
    if not taints:
        return None
    delays: list[float] = []
    for taint in taints:
        matching = [
            tol
            for tol in tolerations
            if scheduling_taints.Toleration(
                key=str(tol.get("key") or ""),
                operator=str(tol.get("operator") or scheduling_taints.OP_EQUAL),
                value=str(tol.get("value") or ""),
                effect=str(tol.get("effect") or ""),
            ).tolerates(taint)
        ]
        if not matching:
            return 0.0
        delays += [float(tol["tolerationSeconds"]) for tol in matching if tol.get("tolerationSeconds") is not None]
    if not delays:
        return None
    return max(0.0, min(delays))


class TaintManager:
    def __init__(
        self,
        kube: client.KubeClient,
        *,
        clock: karpy_clock.Clock,
        interval: float = 1.0,
        reader: reads.Reader | None = None,
    ) -> None:
        self._kube = kube
        self._reads: reads.Reader = reader or kube
        self._clock = clock
        self._interval = interval
        self._seen: dict[tuple[str, str, str], float] = {}  # (namespace, pod, node) -> when first seen doomed
        self._nodes_seen = informers.Cache(resources.NODES)
        self._pods_seen = informers.Cache(resources.PODS)
        self._on_node = informers.Index(kubelet.node_of)  # node name -> the pods bound to it

    async def run(self) -> None:
        watch = loop.watch(self._reads, (resources.NODES, resources.PODS), due=self._due)
        await loop.every(self._interval, self.sync, clock=self._clock, name="taint manager", watch=watch)

    async def _due(self, now: float) -> bool:
        """A pod waiting out its tolerationSeconds goes with time alone."""
        return bool(self._seen)

    async def sync(self) -> list[str]:
        """One pass; returns the pods it deleted (`namespace/name`)."""
        now = self._clock.now()
        await informers.refresh(self._reads, (self._nodes_seen,))
        tainted = {
            str(n["metadata"]["name"]): found for n in self._nodes_seen.sorted() if (found := no_execute_taints(n))
        }
        if tainted:  # the pods are read only while some node is tainted
            for delta in (await informers.refresh(self._reads, (self._pods_seen,)))[0]:
                self._on_node.update(delta)
        # Only the pods bound to a tainted node, each pass (tolerationSeconds run out with time alone).
        keys = sorted(key for node in tainted for key in self._on_node.get(node))
        doomed: set[tuple[str, str, str]] = set()
        deleted: list[str] = []
        for pod in (self._pods_seen.objects[key] for key in keys):
            meta_ = pod.get("metadata") or {}
            node = str((pod.get("spec") or {}).get("nodeName") or "")
            if node not in tainted or meta_.get("deletionTimestamp"):
                continue
            delay = eviction_delay(tainted[node], (pod.get("spec") or {}).get("tolerations") or ())
            if delay is None:
                continue
            key = (str(meta_.get("namespace")), str(meta_.get("name")), node)
            doomed.add(key)
            since = self._seen.setdefault(key, now)
            if now >= since + delay:
                await self._evict(pod, node)
                deleted.append(f"{key[0]}/{key[1]}")
        self._seen = {key: at for key, at in self._seen.items() if key in doomed}
        return deleted

    async def _evict(self, pod: Mapping[str, Any], node: str) -> None:
        meta_ = pod["metadata"]
        namespace, name = str(meta_["namespace"]), str(meta_["name"])
        log.info("taint manager: deleting pod %s/%s from NoExecute-tainted node %s", namespace, name, node)
        try:
            await self._kube.delete(resources.PODS, name, namespace=namespace)
        except client.NotFound:
            return
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{name}.", "namespace": namespace},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": name, "namespace": namespace,
                               "uid": meta_.get("uid")},
            "reason": REASON,
            "message": f"Marking for deletion Pod {namespace}/{name}",
            "type": "Normal",
            "source": {"component": "taint-eviction-controller"},
            "firstTimestamp": kubelet.timestamp(self._clock.now()),
            "lastTimestamp": kubelet.timestamp(self._clock.now()),
            "count": 1,
        }  # fmt: skip
        await self._kube.create(resources.EVENTS, event)
