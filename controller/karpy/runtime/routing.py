"""How watch events become work (upstream: each controller's watches and their mappings): the state cache's
listener (`listener`, added by `karpy.wiring.graph.build`) calls `route` for every change of a NodeClaim, Node,
NodePool or EC2NodeClass, in `karpy run` and in the emulation alike. So the informer's watch is the only one of each
resource: the reconcilers' work and the cache come from the same stream (docs/ARCHITECTURE.md, "Why the informer and
work queue, not Kopf handlers").

* a NodeClaim's change reconciles it and its NodePool's status;
* a Node's change reconciles the NodeClaims it belongs to (registration, Ready and startup taints move their
  lifecycle now, not at their poll), and a Node being deleted under our finalizer goes to termination;
* a NodePool's change reconciles its status, and (StaticCapacity) its replica count, as does any change of one of
  its NodeClaims (a deleted one must be replaced, an extra one removed);
* an EC2NodeClass's change reconciles its status and the status (NodeClassReady) of the NodePools using it.

Routing only queues (O(1) per event); it never awaits.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from karpy.api import labels
from karpy.kube import client, resources
from karpy.runtime import parts
from karpy.state import cluster as state_cluster


def deleting_with_finalizer(body: Mapping[str, Any], finalizer: str) -> bool:
    meta = body.get("metadata") or {}
    return bool(meta.get("deletionTimestamp")) and finalizer in (meta.get("finalizers") or ())


def claims_for_node(ctrl: parts.Controller, node: Mapping[str, Any]) -> list[str]:
    """The NodeClaims a Node belongs to (by providerID, else by status.nodeName) from the state cache's index."""
    return [claim.name for claim in ctrl.cluster.nodeclaims_for_node(node)]


def route(ctrl: parts.Controller, res: resources.Resource, event_type: str, body: Mapping[str, Any]) -> None:
    """Queue the work one watch event of `res` calls for (see the module docstring)."""
    meta = body.get("metadata") or {}
    name = str(meta.get("name") or "")
    alive = event_type != client.DELETED
    if res == resources.NODECLAIMS:
        if alive:
            ctrl.queue(parts.NODECLAIMS).add(name)
        pool = (meta.get("labels") or {}).get(labels.LABEL_NODEPOOL)
        if pool:
            ctrl.queue(parts.NODEPOOLS).add(str(pool))
            if parts.STATIC_NODEPOOLS in ctrl.queues:
                ctrl.queue(parts.STATIC_NODEPOOLS).add(str(pool))
    elif res == resources.NODES:
        if alive and deleting_with_finalizer(body, labels.FINALIZER_TERMINATION):
            ctrl.queue(parts.NODES).add(name)
        for claim in claims_for_node(ctrl, body):
            ctrl.queue(parts.NODECLAIMS).add(claim)
    elif res == resources.NODEPOOLS:
        if alive:
            ctrl.queue(parts.NODEPOOLS).add(name)
            if parts.STATIC_NODEPOOLS in ctrl.queues:
                ctrl.queue(parts.STATIC_NODEPOOLS).add(name)
    elif res == resources.EC2NODECLASSES and parts.NODECLASSES in ctrl.queues:
        if alive:
            ctrl.queue(parts.NODECLASSES).add(name)
        for pool in ctrl.cluster.nodepools():
            if pool.template.node_class_ref.name == name:
                ctrl.queue(parts.NODEPOOLS).add(pool.name)


ROUTED: Final = (resources.NODECLAIMS, resources.NODES, resources.NODEPOOLS, resources.EC2NODECLASSES)
"""The resources `route` acts on (pods reach the provisioner through `observers`, not through a queue)."""


def listener(ctrl: parts.Controller) -> state_cluster.Listener:
    """A `state.Cluster` listener that routes each change of a ROUTED resource as its watch event: the object as
    it is now (MODIFIED), or as it was last seen when it is gone (DELETED)."""

    def on_change(res: resources.Resource, before: Mapping[str, Any] | None, current: Mapping[str, Any] | None) -> None:
        if res not in ROUTED:
            return
        if current is not None:
            route(ctrl, res, client.MODIFIED, current)
        elif before is not None:
            route(ctrl, res, client.DELETED, before)

    return on_change
