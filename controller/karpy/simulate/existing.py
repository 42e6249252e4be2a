"""The capacity the manifests say is already there, read the way the controller reads a cluster.

Nodes, NodeClaims (launched, registered or still in flight), CSINodes and the pods bound to nodes are applied to the
controller's own cluster-state model (`karpy.state.cluster`) as its informers would apply them, and the provisioner's
snapshot (`karpy.provisioning.snapshot`) turns its state nodes into the scheduler's existing nodes: a claim is joined
with its Node by providerID or node name, an uninitialized node shows its claim's labels, taints and allocatable, a
node being deleted offers no room and its pods (DaemonSet pods aside) are scheduled again, but for those that cannot
be evicted now (`karpy.state.movable`: do-not-disrupt, or a PodDisruptionBudget that never allows it). The manifests
carry no time, so a do-not-disrupt duration counts as still running. A NodeClaim must carry
`status.allocatable` (what its launch reported); a Node without `status.allocatable` offers its capacity.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from karpy import clock
from karpy.api import quantity
from karpy.kube import client, resources
from karpy.provisioning import snapshot
from karpy.scheduling import pods, scheduler
from karpy.simulate import manifests
from karpy.state import cluster as state_cluster


def _node(body: Mapping[str, Any]) -> Mapping[str, Any]:
    """The Node as the state reads it; capacity stands in for a missing allocatable. Bad quantities are refused."""
    name = str((body.get("metadata") or {}).get("name", ""))
    status = body.get("status") or {}
    for field in ("allocatable", "capacity"):
        for resource, amount in (status.get(field) or {}).items():
            try:
                quantity.parse(amount)
            except (quantity.QuantityError, TypeError) as exc:
                raise manifests.InputError(f"Node {name!r}: status.{field}.{resource}: {exc}") from exc
    if status.get("allocatable") or not status.get("capacity"):
        return body
    filled = copy.deepcopy(dict(body))
    filled["status"]["allocatable"] = filled["status"]["capacity"]
    return filled


def _claim(body: Mapping[str, Any]) -> Mapping[str, Any]:
    name = str((body.get("metadata") or {}).get("name", ""))
    if not (body.get("status") or {}).get("allocatable"):
        raise manifests.InputError(
            f"NodeClaim {name!r}: status.allocatable: required (what the claim's launch reported; a claim not yet "
            "launched holds no capacity)"
        )
    return body


def state(cluster: manifests.Cluster) -> state_cluster.Cluster:
    """The controller's cluster model holding the manifests' nodes, claims, CSINodes, bound pods and PDBs."""
    model = state_cluster.Cluster(clock=clock.ManualClock(0.0))
    feeds = (
        (resources.NODES, [_node(n) for n in cluster.nodes]),
        (resources.NODECLAIMS, [_claim(c) for c in cluster.nodeclaims]),
        (resources.CSINODES, cluster.csinodes),
        (resources.PODS, cluster.bound_manifests),
        (resources.PDBS, cluster.pdbs),
    )
    for res, objs in feeds:
        for obj in objs:
            model.apply(res, client.WatchEvent(client.ADDED, obj))
    return model


def existing(cluster: manifests.Cluster) -> tuple[list[scheduler.ExistingNode], list[pods.Pod]]:
    """(the nodes and in-flight claims pods may go to, the pods of nodes being deleted that need a new home)."""
    nodes = state(cluster).state_nodes()
    return snapshot.existing_nodes(nodes), snapshot.reschedulable_pods(nodes)
