"""The real cluster-state model for provisioning tests, fed as its informers feed it (import as
tests.provisioning.builders)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tests import builders

from karpy import clock as karpy_clock
from karpy.kube import client, resources
from karpy.state import cluster as state_cluster
from karpy.state import informer

R = resources


def state(
    clock: karpy_clock.Clock,
    *,
    pools: Iterable[Mapping[str, Any]] = (),
    pending: Iterable[dict[str, Any]] = (),
    nodes: Iterable[Mapping[str, Any]] = (),
    claims: Iterable[Mapping[str, Any]] = (),
    pods: Iterable[Mapping[str, Any]] = (),
    synced: bool = True,
) -> state_cluster.Cluster:
    """A `Cluster` holding these NodePools, NodeClaims, Nodes and pods (`pending` ones as kube-scheduler leaves
    them: unschedulable); `synced`: every informer has listed."""
    cluster = state_cluster.Cluster(clock=clock, expected=informer.INFORMED)
    if synced:
        for res in informer.INFORMED:
            cluster.mark_listed(res)
    fed = (
        (R.NODEPOOLS, pools),
        (R.NODECLAIMS, claims),
        (R.NODES, nodes),
        (R.PODS, [*(builders.unschedulable(p) for p in pending), *pods]),
    )
    for res, objs in fed:
        for obj in objs:
            cluster.apply(res, client.WatchEvent(client.ADDED, obj))
    return cluster


def list_all(cluster: state_cluster.Cluster) -> None:
    """Every informer of `cluster` completes its first LIST."""
    for res in informer.INFORMED:
        cluster.mark_listed(res)
