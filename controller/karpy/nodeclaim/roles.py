"""The roles every reconciler of this package that reads the cluster state takes (expiration, consistency, node
repair, the disruption conditions): the API client it writes through, the state cache it reads, and the clock it
waits on. One value, so that a reconciler's constructor names only what is its own (its observer or metrics, the
cloud provider, repair's policies)."""

from __future__ import annotations

import dataclasses

from karpy import clock as karpy_clock
from karpy.kube import client as kube_client
from karpy.state import cluster as state_cluster


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterRoles:
    client: kube_client.KubeClient
    """Where deletes and patches go (a `DryRunClient` under DRY_RUN: logged, not written)."""
    cluster: state_cluster.Cluster
    """The state cache decisions read; a loop acts only once it is `synced()`."""
    clock: karpy_clock.Clock
