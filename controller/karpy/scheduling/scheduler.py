"""`solve`: place pending pods on existing nodes, in-flight claims and new NodeClaims
(core: pkg/controllers/provisioning/scheduling/scheduler.go).

Queue: pods sorted by (cpu desc, memory desc, signature, creation, uid); pods with equal signatures form a *run*.
Slots are tried in a fixed order — existing nodes (initialized first, then by name), then claims of this solve in
creation order (upstream sorts in-flight claims by pod count; a fixed order is what makes bulk placement exact),
then one new claim per pool in weight order. `pod_by_pod=True` is the reference: runs of one, every slot checked.

The fast path gives the same placements, in the same order:
* a `slots.SlotTable` pre-filter drops slots that certainly refuse (headroom below the request, or pinned to a
  domain a constraint excludes) before any full check;
* *bulk-safe* runs (every constraint keyed on hostname, an anti-affinity, or an affinity already anchored) place
  several pods per slot in one pass, because placing on one slot cannot make an earlier slot acceptable; when the
  run's pods only ever touch hostname domains, the claims it opens are identical but for the hostname and are
  cloned;
* a run whose only constraint is a spread over zone or capacity type goes pod by pod without a full check per
  pod (`spreading.Walk`: a slot pinned to one domain takes the next pod iff its domain is allowed by the counts
  and the pod fits it, which does not depend on the counts);
* other runs (a self-affinity choosing its first domain, mixed constraints) go one pod at a time over a resource
  pre-filter computed once per run, re-applying only the domain filter per pod.
Relaxed placements (a preference dropped) place one pod; the next pod starts strict again, as upstream does.

Layout: this module holds the input types, the queue of runs and the final assembly; `board` the solve's state
and how pods land on a slot; `placement` a run's trip over existing slots; `claiming` the opening of new claims.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from karpy import requirements
from karpy import settings as karpy_settings
from karpy.api import labels, meta, nodepool
from karpy.cloudprovider import types
from karpy.scheduling import (
    board,
    catalog,
    diagnosis,
    effective_zones,
    nodes,
    placement,
    plans,
    pods,
    preferences,
    resources,
    results,
    taints,
    topology,
    volumes,
)
from karpy.scheduling.optimizer import optimize

# Aliases: the public dataclasses below have fields named `pods` and `volumes`, which shadow the modules.
Pod = pods.Pod
VolumeCatalog = volumes.VolumeCatalog


@dataclass(frozen=True, slots=True)
class ExistingNode:
    name: str
    labels: Mapping[str, str]
    taints: tuple[meta.Taint, ...]
    allocatable: Mapping[str, int]
    pods: tuple[Pod, ...] = ()
    nodepool: str | None = None
    initialized: bool = True
    marked_for_deletion: bool = False
    under_consolidate_after: bool = False
    """Inside its NodePool's consolidateAfter window, in a consolidation simulation: pods moved off the candidates
    (`Pod.from_candidate`) are not packed here (upstream v1.14); pending pods may be."""
    volume_limits: Mapping[str, int] = field(default_factory=dict)
    """CSI driver -> how many volumes it may attach here (the node's CSINode `allocatable.count`); a pod is not
    placed where its claims would take a driver past its limit (scheduling/volumeusage.go ExceedsLimits)."""
    derived: NodeDerived | None = None
    """What every solve derives from the node's labels, when the caller derived it once for many solves
    (`derive`); derived per solve otherwise."""


@dataclass(frozen=True, slots=True)
class NodeDerived:
    requirements: requirements.Requirements
    """Its labels, the hostname defaulting to its name (`nodes.slot_labels`), as requirements."""
    source: topology.DomainSource
    """The topology domains it offers."""
    bound: tuple[topology.BoundPod, ...]
    """Its pods, as the topology counts them."""
    keys: frozenset[str]
    """Its pods' keys."""
    requests: Mapping[str, int]
    """What its pods request, summed exactly."""
    host_ports: tuple[pods.HostPort, ...]
    """The host ports its pods take."""
    daemon_requests: Mapping[str, int]
    """What its DaemonSet pods request, summed exactly."""
    vectors: dict[tuple[str, ...], tuple[catalog.IntArray, catalog.IntArray]] = field(
        default_factory=dict, compare=False
    )
    """Resource index names -> (allocatable, requests) as that index's column vectors, made on first use (read-only
    arrays: every solve that uses them replaces, never updates, a slot's vectors)."""

    def columns(self, node: ExistingNode, index: catalog.ResourceIndex) -> tuple[catalog.IntArray, catalog.IntArray]:
        """(allocatable, requests) of `node` (the node this was derived from) as `index`'s column vectors."""
        found = self.vectors.get(index.names)
        if found is None:
            alloc, used = index.capacity_vector(node.allocatable), index.vector(self.requests)
            alloc.flags.writeable = used.flags.writeable = False
            found = self.vectors[index.names] = (alloc, used)
        return found


def derived(node: ExistingNode) -> NodeDerived:
    if node.derived is not None:
        return node.derived
    reqs = requirements.Requirements.from_labels(nodes.slot_labels(node.name, node.labels))
    own = reqs if labels.LABEL_HOSTNAME in node.labels else requirements.Requirements.from_labels(node.labels)
    domains = {k: frozenset({v}) for k, v in {**node.labels, labels.LABEL_HOSTNAME: node.name}.items()}
    return NodeDerived(
        reqs,
        topology.DomainSource(own, node.taints, domains),
        bound=tuple(topology.BoundPod(p, reqs, node.taints) for p in node.pods),
        keys=frozenset(p.key for p in node.pods),
        requests=resources.add(*(p.requests for p in node.pods)),
        host_ports=tuple(port for p in node.pods for port in p.host_ports),
        daemon_requests=resources.add(*(p.requests for p in node.pods if p.is_daemon)),
    )


def derive(node: ExistingNode) -> ExistingNode:
    """The node with what solves derive from its labels, pods and allocatable computed now, for a caller that
    solves many times over the same nodes (disruption's simulations): per node, that is most of a solve's set-up.
    A node changed after (`replace`) must be derived again, but for `under_consolidate_after`."""
    return replace(node, derived=derived(node))


@dataclass(frozen=True, slots=True)
class SchedulingInput:
    pods: Sequence[Pod]
    nodepools: Sequence[nodepool.NodePool]
    instance_types: Mapping[str, Sequence[types.InstanceType]]
    existing_nodes: Sequence[ExistingNode] = ()
    bound_pods: Sequence[Pod] = ()
    daemonsets: Sequence[Pod] = ()
    volumes: VolumeCatalog = field(default_factory=VolumeCatalog)
    namespace_labels: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    options: karpy_settings.SchedulingSettings = field(default_factory=karpy_settings.SchedulingSettings)
    """The controller's PREFERENCE_POLICY, MIN_VALUES_POLICY and IGNORE_DRA_REQUESTS. With DRA requests ignored
    (upstream's default), pods asking for DRA resources are refused (`DRA_REFUSED`) and DaemonSet pods asking for them
    add no overhead; otherwise karpy places them as if they asked for none (it models no DRA allocation)."""
    compute_lower_bound: bool = True
    diagnose: bool = False
    """Say, for every unschedulable pod, why each existing node and each NodePool refuses it
    (`Results.diagnoses`; costs a check per existing node per pod shape that fails)."""
    catalogs: catalog.Catalogs | None = None
    """Pool catalogs to reuse across the caller's solves over the same pools, instance types and DaemonSets (the
    simulations of one disruption pass); None: made for this solve."""
    decisive: frozenset[str] = frozenset()
    """Keys of pods the caller's verdict fails on when one is unschedulable or placed on an existing node not yet
    initialized (a disruption simulation's candidate pods: core disruption/helpers.go `SimulateScheduling`). Once
    first-fit has failed one so, no cost post-pass can change that verdict (it moves pods between new claims only),
    so it is skipped and the new claims are first-fit's."""
    one_claim_at_most: bool = False
    """The caller acts on the plan only when it needs at most one new claim (a consolidation simulation: core
    disruption/consolidation.go `computeConsolidation`). The cost post-pass is skipped, and the claims are
    first-fit's as upstream's are, when first-fit opened at most one (splitting it into cheaper ones would only turn a
    plan the caller acts on into one it does not) or when its claims hold more than any one instance type of the
    input can (every plan needs two or more)."""
    deadline: Callable[[], bool] | None = None
    """True once the caller's time is up (upstream's Solve() context deadline). Checked between runs of pods: the
    solve then stops and returns what it placed so far, the rest unschedulable with `TIMED_OUT`. No I/O here: the
    caller reads its own clock."""


TIMED_OUT = "scheduling simulation timed out"
DRA_REFUSED = "pod has Dynamic Resource Allocation requirements that are not yet supported by Karpenter"
"""Upstream's message for a pod refused while IGNORE_DRA_REQUESTS is on (core: scheduling/scheduler.go `add`)."""


class _Solver(board.Board):
    """The solve's board, built from the input, plus the driver: runs in queue order, relaxing preferences."""

    def __init__(self, inp: SchedulingInput, *, pod_by_pod: bool) -> None:
        self.inp = inp
        node_allocs = [n.allocatable for n in inp.existing_nodes]
        all_types = [t.allocatable for ts in inp.instance_types.values() for t in ts]
        index = catalog.ResourceIndex.build(
            [*(p.requests for p in inp.pods), *(d.requests for d in inp.daemonsets), *node_allocs, *all_types]
        )
        active = [p for p in inp.nodepools if p.metadata.deletion_timestamp is None and p.replicas is None]
        daemons = inp.daemonsets  # the same object when nothing is left out: `catalog.Catalogs` reuses by identity
        if inp.options.ignore_dra_requests and any(d.dra for d in daemons):
            daemons = [d for d in daemons if not d.dra]
        # Heaviest first; equal weights by name, descending (pkg/utils/nodepool OrderByWeight).
        active.sort(key=lambda p: p.name, reverse=True)
        active.sort(key=lambda p: -(p.weight or 0))
        make = inp.catalogs.get if inp.catalogs is not None else catalog.PoolCatalog
        pools = [make(p, inp.instance_types.get(p.name, ()), index=index, daemons=daemons) for p in active]
        self.prefer_taints = any(taints.has_prefer_no_schedule(c.taints) for c in pools)
        # One requirement set per node (its labels and hostname), shared by its slot, its domain source and its
        # bound pods: built per pod instead, it dominated solves over thousands of nodes.
        per_node = {n.name: derived(n) for n in inp.existing_nodes}
        node_reqs = {name: d.requirements for name, d in per_node.items()}
        on_node, bound = _bound(inp, per_node) or _bound_pod_by_pod(inp, node_reqs)
        sources = [topology.DomainSource(c.requirements, c.taints, c.domains()) for c in pools]
        sources += [d.source for d in per_node.values()]
        super().__init__(
            index=index,
            pools=pools,
            topo=topology.Topology(
                sources=sources, bound=bound, namespace_labels=inp.namespace_labels, pending=inp.pods
            ),
            remaining={c.name: dict(c.pool.limits) for c in pools},
            min_values_policy=inp.options.min_values_policy,
            volume_catalog=inp.volumes,
            pod_by_pod=pod_by_pod,
        )
        usable = sorted(
            (n for n in inp.existing_nodes if not n.marked_for_deletion), key=lambda n: (not n.initialized, n.name)
        )
        node_slots = []
        for n in usable:
            d = per_node[n.name]
            on = on_node.get(n.name)
            bound_here = n.pods if on is None else on
            # the requests of the DaemonSet pods still to come count as used
            running = d.daemon_requests if on is None else resources.add(*(p.requests for p in on if p.is_daemon))
            to_come = _daemons_to_come(n, running, inp.daemonsets, node_labels=d.source.requirements)
            if on is None and not to_come:  # exactly the node's own pods: what was derived from them serves
                alloc, used = d.columns(n, self.index)
                ports: Iterable[pods.HostPort] = d.host_ports
            else:
                alloc = self.index.capacity_vector(n.allocatable)
                used = self.index.vector(resources.add(*(p.requests for p in bound_here), to_come))  # summed exactly
                ports = (port for p in bound_here for port in p.host_ports)
            node_slots.append(
                nodes.node_slot(
                    n.name,
                    node_reqs[n.name],
                    n.taints,
                    alloc=alloc,
                    used=used,
                    host_ports=ports,
                    under_consolidate_after=n.under_consolidate_after,
                    volume_limits=n.volume_limits,
                    attached=_attached(bound_here, inp.volumes) if n.volume_limits else None,
                )
            )
        self.add_nodes(node_slots)
        for n in usable:
            owner = n.nodepool or n.labels.get(labels.LABEL_NODEPOOL)  # the label is what upstream reads
            if owner in self.remaining:
                left = self.remaining[owner]
                for k in left:
                    left[k] -= 1000 if k == labels.RESOURCE_NODES else n.allocatable.get(k, 0)
        self.result = results.Results()

    # --- loop -------------------------------------------------------------------------------------------------
    def solve(self) -> results.Results:
        queue = collections.deque(self._runs())
        # DRA pods the runs leave out are still pending pods of this solve (upstream refuses them in Solve)
        refused = [[p] for p in self.inp.pods if p.dra and self.inp.options.ignore_dra_requests]
        self.result.effective_zones = effective_zones.of_runs(
            self.topology,
            itertools.chain((run.pods for run in queue), refused),
            volume_catalog=self.volume_catalog,
            policy=self.inp.options.preference_policy,
            prefer_taints_exist=self.prefer_taints,
        )
        expired = self.inp.deadline or (lambda: False)
        while queue:
            if expired():
                self.result.timed_out = True
                for late in queue:
                    self.result.unschedulable.update((p.key, TIMED_OUT) for p in late.pods)
                break
            run = queue.popleft()
            if run.failed_at == self.placements:
                for p in run.pods:
                    self.result.unschedulable[p.key] = run.reason
                if self.inp.diagnose:
                    found = diagnosis.diagnose(
                        self, run.pods[0], policy=self.inp.options.preference_policy, prefer_taints=self.prefer_taints
                    )
                    self.result.diagnoses.update(dict.fromkeys((p.key for p in run.pods), found))
                continue
            while run.pods:
                view: preferences.View | None = preferences.View.initial(
                    run.pods[0], policy=self.inp.options.preference_policy, prefer_taints_exist=self.prefer_taints
                )
                strict = True
                reason = ""
                while view is not None:
                    limit = len(run.pods) if strict and not self.pod_by_pod else 1
                    got = placement.place(self, run, view=view, limit=limit)
                    if isinstance(got, int):
                        run.pods = run.pods[got:]
                        break
                    reason = got
                    view = view.relax(prefer_taints_exist=self.prefer_taints)
                    strict = False
                if view is None:
                    run.failed_at, run.reason = self.placements, reason
                    queue.append(run)
                    break
        # the cost post-pass is worth its time only when there is time, and when its claims can change the answer
        if not self.result.timed_out and not self._decisive_failed() and not self._claim_count_settles_it():
            names = itertools.count(len(self.claims))  # hostnames of the claims they open (first-fit's come first)
            self.claims = optimize.improve(self.claims, topo=self.topology, names=names, expired=expired)
        return self._results()

    def _decisive_failed(self) -> bool:
        """A `decisive` pod is unschedulable, or placed on an existing node not yet initialized."""
        keys = self.inp.decisive
        if not keys:
            return False
        if not keys.isdisjoint(self.result.unschedulable):
            return True
        waiting = {n.name for n in self.inp.existing_nodes if not n.initialized}
        existing = (slot for slot in self.slots if slot.pool is None and slot.name in waiting)
        return any(p.key in keys for slot in existing for p in slot.placed)

    def _claim_count_settles_it(self) -> bool:
        """`one_claim_at_most`, and the post-pass cannot give the caller a plan it acts on that first-fit did not:
        first-fit opened at most one claim (the post-pass could only split it into more), or no instance type of the
        input holds the requests of every pod on its claims (every plan needs two or more)."""
        if not self.inp.one_claim_at_most:
            return False
        if len(self.claims) < 2:
            return True
        total = resources.add(*(p.requests for c in self.claims for p in c.placed))
        return not any(
            all(amount <= t.allocatable.get(name, 0) for name, amount in total.items())
            for found in self.inp.instance_types.values()
            for t in found
        )

    def _runs(self) -> list[placement.Run]:
        """The pods in runs of interchangeable ones, in upstream's queue order; DRA pods are refused up front while
        IGNORE_DRA_REQUESTS is on (upstream never relaxes them either)."""
        refuse_dra = self.inp.options.ignore_dra_requests
        self.result.unschedulable.update((p.key, DRA_REFUSED) for p in self.inp.pods if p.dra and refuse_dra)
        schedulable = [p for p in self.inp.pods if not (p.dra and refuse_dra)]
        ordered = sorted(schedulable, key=lambda p: (p.creation_timestamp, p.uid, p.key))
        sig_rank: dict[tuple[object, ...], int] = {}
        keyed = []
        for p in ordered:
            sig = p.signature()
            rank = sig_rank.setdefault(sig, len(sig_rank))
            cpu, mem = p.requests.get(labels.RESOURCE_CPU, 0), p.requests.get(labels.RESOURCE_MEMORY, 0)
            keyed.append(((-cpu, -mem, rank), p))
        keyed.sort(key=lambda kp: kp[0])
        runs: list[placement.Run] = []
        last = None
        for k, p in keyed:
            if self.pod_by_pod or k != last:
                runs.append(placement.Run([]))
            runs[-1].pods.append(p)
            last = k
        return runs

    def _results(self) -> results.Results:
        out = self.result
        for slot in self.slots:
            if slot.pool is None and slot.placed:
                out.existing_nodes[slot.name] = list(slot.placed)
        offers: plans.OfferCache = {}
        for slot in self.claims:
            out.new_nodeclaims.append(plans.plan(slot, self.index, offers))
        out.cost_per_hour = sum(c.cheapest.price for c in out.new_nodeclaims if c.cheapest is not None)
        if self.inp.compute_lower_bound and self.claims and not out.timed_out:
            bounds = optimize.lower_bound(self.claims, self.index)
            out.lower_bound_per_hour, out.lp_bound_per_hour = bounds.tightened, bounds.lp
        return out


def _daemons_to_come(
    node: ExistingNode,
    running: Mapping[str, int],
    daemons: Sequence[Pod],
    *,
    node_labels: requirements.Requirements,
) -> dict[str, int]:
    """What the DaemonSets that will run on `node` still need there: the requests of every daemon that tolerates
    its taints and whose nodeSelector and first required term its labels (`node_labels`) satisfy, less what the
    daemon pods already bound to it request (`running`), never below zero (existingnode.go NewExistingNode). An
    in-flight claim has none yet."""
    if not daemons and not running:
        return {}
    wanted = resources.add(
        *(
            d.requests
            for d in daemons
            if taints.untolerated(node.taints, d.tolerations) is None
            and node_labels.compatible(d.node_requirements()) is None
        )
    )
    return {k: v for k, v in resources.subtract(wanted, running).items() if v > 0}


def _attached(bound: Sequence[Pod], catalog: VolumeCatalog) -> dict[str, set[str]]:
    """CSI driver -> the claims the pods bound to a node hold there."""
    out: dict[str, set[str]] = collections.defaultdict(set)
    for p in bound:
        for driver, claims in volumes.attachments(p, catalog).items():
            out[driver] |= claims
    return out


BoundPods = tuple[Mapping[str, Sequence[Pod]], Sequence[topology.BoundPod]]
"""(node name -> its bound pods, for the nodes whose pods are not exactly their own; every bound pod, in order)."""


def _bound(inp: SchedulingInput, per_node: Mapping[str, NodeDerived]) -> BoundPods | None:
    """The bound pods from what was derived per node, when each node's pods are exactly its own: node names and pod
    keys unique, and `inp.bound_pods` adding none. None otherwise (`_bound_pod_by_pod` then says whose they are)."""
    if len(per_node) != len(inp.existing_nodes):
        return None
    keys: set[str] = set()
    count = 0
    for d in per_node.values():
        if len(d.keys) != len(d.bound):
            return None
        keys |= d.keys
        count += len(d.keys)
    if len(keys) != count or any(p.node_name in per_node and p.key not in keys for p in inp.bound_pods):
        return None
    return {}, [b for d in per_node.values() for b in d.bound]


def _bound_pod_by_pod(inp: SchedulingInput, node_reqs: Mapping[str, requirements.Requirements]) -> BoundPods:
    """Each node's bound pods (a pod listed twice is the last node's), then `inp.bound_pods` on nodes that exist."""
    bound_pods: dict[str, tuple[pods.Pod, ExistingNode]] = {}
    by_name = {n.name: n for n in inp.existing_nodes}
    for n in inp.existing_nodes:
        for p in n.pods:
            bound_pods[p.key] = (p, n)
    for p in inp.bound_pods:
        if p.node_name in by_name and p.key not in bound_pods:
            bound_pods[p.key] = (p, by_name[p.node_name])
    on_node: dict[str, list[pods.Pod]] = {n.name: [] for n in inp.existing_nodes}
    for p, n in bound_pods.values():
        on_node[n.name].append(p)
    return on_node, [topology.BoundPod(p, node_reqs[n.name], n.taints) for p, n in bound_pods.values()]


def solve(inp: SchedulingInput, *, pod_by_pod: bool = False) -> results.Results:
    """Plan where every pending pod goes; `pod_by_pod` selects the unbatched reference path.

    A solve allocates hundreds of thousands of short-lived objects: its callers pause the garbage collector at
    their thread's entry point (`karpy.tasks.collector_paused`)."""
    return _Solver(inp, pod_by_pod=pod_by_pod).solve()
