"""Pending pods: what the next provisioning pass would do with each, by the provisioner's own steps.

A CapacityBuffer's virtual pods (`state.virtualpods`) are among them, as the provisioner solves them with the real
ones: each gets the NodeClaim or node its room would be launched on or kept on, or why it has none.

The pods, pools and nodes of the pass (`provisioning.snapshot.provisioning_input`), its solve with the solve's own
diagnosis of every pod it gives up on, then the create-time limit admission (`provisioning.limits.admit`). A pod
that fails gets exactly the reason its FailedScheduling event would carry; one that fits gets the NodeClaim it would
be launched on or the node it would be nominated to.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from karpy import settings as karpy_settings
from karpy.cloudprovider import types
from karpy.provisioning import isolation, limits, snapshot
from karpy.scheduling import pods, results, scheduler
from karpy.state import cluster as state_cluster


@dataclass(frozen=True, slots=True)
class PendingPod:
    pod: pods.Pod
    reason: str = ""
    """Why it cannot be scheduled ("" when it can): the FailedScheduling message after "Failed to schedule pod, "."""
    diagnosis: results.Diagnosis | None = None
    nodeclaim: results.PlannedNodeClaim | None = None
    node: str = ""


@dataclass(frozen=True, slots=True)
class Batch:
    """One provisioning pass's input, read from the cluster (`prepare`), solved later (`explain`)."""

    pending: Sequence[pods.Pod]
    input: scheduler.SchedulingInput
    usage: Mapping[str, Mapping[str, int]]
    """Pool name -> its NodeClaims' capacity now (what limit admission counts)."""


def prepare(
    cluster: state_cluster.Cluster,
    instance_types: Mapping[str, Sequence[types.InstanceType]],
    *,
    options: karpy_settings.SchedulingSettings,
    existing: Sequence[scheduler.ExistingNode] = (),
) -> Batch:
    """`existing`: `snapshot.existing_nodes(cluster.state_nodes())` derived already (`scheduler.derive`), to share
    with other solves over the same nodes; () to leave the solve to it."""
    state_nodes = list(cluster.state_nodes())
    # The CapacityBuffers' virtual pods are scheduled with the pending ones, as the provisioner schedules them.
    pending = [*snapshot.pending_pods(cluster, state_nodes), *cluster.buffer_pods()]
    inp = snapshot.provisioning_input(
        cluster,
        state_nodes,
        pending,
        instance_types=instance_types,
        options=options,
        diagnose=True,
    )
    if existing:
        inp = dataclasses.replace(inp, existing_nodes=existing)
    return Batch(pending, inp, {p.name: cluster.nodepool_usage(p.name) for p in inp.nodepools})


def explain(
    batch: Batch, *, solver: Callable[[scheduler.SchedulingInput], results.Results] = scheduler.solve
) -> list[PendingPod]:
    """Every pending pod of the batch, by key."""
    if not batch.pending:
        return []
    plan = isolation.solve(solver, batch.input).results  # as the provisioner solves: a bad pod is set aside
    pools = {p.name: p for p in batch.input.nodepools}
    allowed, refused = limits.admit(plan.new_nodeclaims, pools, lambda name: batch.usage.get(name, {}))
    failed = dict(plan.unschedulable)
    for no in refused:
        failed.update({p.key: no.reason for p in no.plan.pods})
    claim_of = {p.key: claim for claim, _ in allowed for p in claim.pods}
    node_of = {p.key: name for name, placed in plan.existing_nodes.items() for p in placed}
    out = []
    for pod in sorted(batch.pending, key=lambda p: p.key):
        if pod.key in failed:
            out.append(PendingPod(pod, reason=failed[pod.key], diagnosis=plan.diagnoses.get(pod.key)))
        else:
            out.append(PendingPod(pod, nodeclaim=claim_of.get(pod.key), node=node_of.get(pod.key, "")))
    return out
