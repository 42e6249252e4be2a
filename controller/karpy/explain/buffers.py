"""CapacityBuffers in an explanation: the model's buffers resolved against its PodTemplates and the dump's (or the
API server's) workloads, sized by the code `karpy simulate` sizes them with (`simulate.buffers.rooms`, the buffer
controller's own `capacitybuffer.resolve`), and their virtual pods put into the model's `virtual_pods` as the buffer
controller puts them there (core: pkg/controllers/capacitybuffer/controller.go). From there the pending pods' solve
schedules them as the provisioner does and the disruption pass's simulations keep their room."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from karpy.explain import sources
from karpy.kube import resources
from karpy.simulate import buffers
from karpy.state import cluster as state_cluster
from karpy.state import facts


def rooms(cluster: state_cluster.Cluster, snap: sources.Snapshot) -> list[buffers.Room]:
    """Each valid buffer of `cluster` sized against its PodTemplates and `snap`'s workloads."""
    pod_templates = {_at(obj): obj for obj in cluster.objects(resources.PODTEMPLATES)}
    workloads: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for res in sources.WORKLOADS:
        workloads.update(((res.kind, *_at(obj)), obj) for obj in snap.objects.get(res, ()))
    return buffers.rooms(cluster.capacitybuffers(), pod_templates=pod_templates, workloads=workloads)


def _at(obj: Mapping[str, Any]) -> tuple[str, str]:
    namespace, _, name = facts.key(obj).rpartition("/")
    return namespace, name


def load(cluster: state_cluster.Cluster, found: Sequence[buffers.Room]) -> None:
    """The rooms' virtual pods into the model, as the buffer controller writes them (`Cache.update`)."""
    for room in found:
        cluster.virtual_pods.update(room.buffer, room.placeholders)
