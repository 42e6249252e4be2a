"""The CapacityBuffer controller (feature gate CapacityBuffer; core: pkg/controllers/capacitybuffer/controller.go).

Per buffer: resolve its pod template from `podTemplateRef` (a PodTemplate in the state cache) or `scalableRef` (a
Deployment, ReplicaSet or StatefulSet, read from the API server as upstream's client reads it; utils/apps/resolve.go),
size it (`sizing`), write status when it changed, refresh the buffer's virtual pods in the state cache and trigger the
provisioner, then come back in 30 s as upstream does (a workload's replicas change without an event here). After
each provisioning pass, `observe_plan` writes the buffers' Provisioning condition and where their pods went
(core: provisioning/buffers.go).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any, Final

from karpy import clock as karpy_clock
from karpy.api import capacitybuffer, status
from karpy.capacitybuffer import provisioning, resolve, sizing
from karpy.kube import client, resources
from karpy.scheduling import results
from karpy.state import cluster as state_cluster

log = logging.getLogger(__name__)

RESYNC: Final = 30.0
"""Seconds between reconciles of an unchanged buffer (controller.go: RequeueAfter 30 s)."""
SCALABLE: Final[Mapping[str, resources.Resource]] = {
    "Deployment": resources.DEPLOYMENTS,
    "StatefulSet": resources.STATEFULSETS,
    "ReplicaSet": resources.REPLICASETS,
}


class CapacityBufferController:
    def __init__(
        self,
        kube: client.KubeClient,
        cluster: state_cluster.Cluster,
        *,
        clock: karpy_clock.Clock,
        trigger: Callable[[str], None],
    ) -> None:
        self._kube = kube
        self._cluster = cluster
        self._clock = clock
        self._trigger = trigger

    def listener(self, enqueue: Callable[[str], None]) -> state_cluster.Listener:
        """Queue a buffer when it changes, and the buffers naming a PodTemplate when that changes (upstream watches
        PodTemplates and maps them to the buffers of their namespace that refer to them)."""

        def changed(res: resources.Resource, before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> None:
            obj = after if after is not None else before
            if obj is None:
                return
            md = obj.get("metadata") or {}
            if res == resources.CAPACITYBUFFERS:
                enqueue(f"{md.get('namespace', '')}/{md.get('name', '')}")
            elif res == resources.PODTEMPLATES:
                for b in self._cluster.capacitybuffers():
                    if b.namespace == md.get("namespace") and b.spec.pod_template_ref == md.get("name"):
                        enqueue(f"{b.namespace}/{b.name}")

        return changed

    async def reconcile(self, key: str) -> float | None:
        buffer = self._cluster.capacitybuffer(key)
        if buffer is None:  # deleted (or refused: its rejection is reported by the cache)
            self._cluster.virtual_pods.remove(key)
            return None
        found = await self.resolve(buffer)
        sized = resolve.size(buffer, found, now=self._clock.now())
        if sized.status != buffer.status:
            with contextlib.suppress(client.NotFound):  # deleted since: its event removes its pods
                await self._kube.patch(
                    resources.CAPACITYBUFFERS,
                    buffer.name,
                    {"status": status_body(sized.status)},
                    namespace=buffer.namespace,
                    subresource="status",
                )
        if sized.placeholders:
            self._cluster.virtual_pods.update(key, sized.placeholders)
        else:
            self._cluster.virtual_pods.remove(key)
        if sized.resolved:
            self._trigger(buffer.metadata.uid)
        return RESYNC

    async def resolve(self, buffer: capacitybuffer.CapacityBuffer) -> resolve.Found:
        """The buffer's pod template and what sizing needs of it (utils/apps/resolve.go ResolveCapacityBuffer)."""
        spec = buffer.spec
        if spec.pod_template_ref is not None:
            raw = self._cluster.raw(resources.PODTEMPLATES, f"{buffer.namespace}/{spec.pod_template_ref}")
            return resolve.from_pod_template(spec.pod_template_ref, raw)
        ref = resolve.workload_ref(buffer)
        if isinstance(ref, resolve.Found):
            return ref
        res = SCALABLE[ref.kind]
        obj = await self._kube.get(res, ref.name, namespace=buffer.namespace)
        return resolve.from_workload(ref, obj, plural=res.plural)

    async def observe_plan(self, plan: results.Results) -> None:
        """After a provisioning pass: where the virtual pods went, and each buffer's Provisioning condition."""
        cache = self._cluster.virtual_pods
        self._cluster.place_buffer_pods(provisioning.counts_on_nodes(plan, cache.buffer_of))
        summary = provisioning.classify(plan, cache.buffer_of)
        now = self._clock.now()
        for buffer in self._cluster.capacitybuffers():
            key = f"{buffer.namespace}/{buffer.name}"
            condition = provisioning.condition(buffer, summary.get(key))
            if condition is None:
                continue
            wanted = sizing.with_condition(buffer, capacitybuffer.PROVISIONING, condition, now=now)
            if wanted == buffer.status.conditions:
                continue
            with contextlib.suppress(client.NotFound):
                await self._kube.patch(
                    resources.CAPACITYBUFFERS,
                    buffer.name,
                    {"status": {"conditions": status.conditions(wanted)}},
                    namespace=buffer.namespace,
                    subresource="status",
                )


def status_body(s: capacitybuffer.CapacityBufferStatus) -> dict[str, Any]:
    """The status as a merge patch: null removes the fields a buffer no longer uses (a scalableRef's template)."""
    return {
        "podTemplateRef": {"name": s.pod_template_ref} if s.pod_template_ref is not None else None,
        "podTemplateGeneration": s.pod_template_generation,
        "replicas": s.replicas,
        "provisioningStrategy": s.provisioning_strategy,
        "conditions": status.conditions(s.conditions),
    }
