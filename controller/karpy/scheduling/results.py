"""What a solve produces: planned NodeClaims, nominations onto existing nodes, and reasons for the rest."""

from __future__ import annotations

from dataclasses import dataclass, field

from karpy import requirements
from karpy.api import labels, meta
from karpy.cloudprovider import types
from karpy.scheduling import pods

MAX_INSTANCE_TYPES = 600  # core MaxInstanceTypes (nodeclaimtemplate.go) since PR #2430


@dataclass(frozen=True, slots=True)
class CheapestOffering:
    instance_type: str
    zone: str
    capacity_type: str
    price: float


@dataclass(slots=True)
class PlannedNodeClaim:
    nodepool: str
    requirements: requirements.Requirements
    instance_type_options: tuple[types.InstanceType, ...]  # sorted by cheapest compatible available offering
    pods: tuple[pods.Pod, ...]
    requests: dict[str, int]  # pods + the smallest daemon overhead across the options
    cheapest: CheapestOffering | None
    min_values_relaxed: bool = False
    hostname: str = ""
    static: bool = False
    """A static NodePool's claim (`spec.replicas`): no pods, no instance-type options; the cloud provider picks the
    instance from the pool's own requirements at launch (core: NodeClaimTemplate.ToNodeClaim `IsStaticNodeClaim`)."""

    def to_nodeclaim_requirements(
        self, *, max_instance_types: int = MAX_INSTANCE_TYPES
    ) -> tuple[meta.NodeSelectorRequirement, ...]:
        """spec.requirements like upstream ToNodeClaim: instance-type In [cheapest ≤ max], capacity types of those
        types' compatible offerings; the hostname placeholder is dropped. A static claim keeps its pool's own."""
        if self.static:
            return self.requirements.without(labels.LABEL_HOSTNAME).to_node_selector()
        chosen = self.instance_type_options[:max_instance_types]
        reqs = self.requirements.without(labels.LABEL_HOSTNAME)
        it_req = reqs.get(labels.LABEL_INSTANCE_TYPE)
        min_values = it_req.min_values if it_req is not None else None
        reqs = reqs.without(labels.LABEL_INSTANCE_TYPE).add(
            requirements.Requirement.new(
                labels.LABEL_INSTANCE_TYPE, meta.Operator.IN, values=[t.name for t in chosen], min_values=min_values
            )
        )
        ct_req = reqs.get(labels.LABEL_CAPACITY_TYPE)
        zone_req = reqs.get(labels.LABEL_ZONE)
        capacity_types = {
            o.capacity_type
            for t in chosen
            for o in t.offerings
            if o.available
            and (ct_req is None or ct_req.has(o.capacity_type))
            and (zone_req is None or zone_req.has(o.zone))
        }
        if capacity_types:
            reqs = reqs.add(
                requirements.Requirement.new(labels.LABEL_CAPACITY_TYPE, meta.Operator.IN, values=capacity_types)
            )
        return reqs.to_node_selector()


@dataclass(frozen=True, slots=True)
class NodeRefusals:
    """Existing nodes that refuse a pod for one kind of reason: how many, and one of them with its message."""

    kind: str
    count: int
    example: str
    message: str


@dataclass(frozen=True, slots=True)
class PoolRefusal:
    nodepool: str
    kind: str
    message: str
    decisive: str = ""
    """The constraint that decides it, in a few words, said first (`message` is the event's wording)."""


@dataclass(frozen=True, slots=True)
class Diagnosis:
    """Why an unschedulable pod fits nowhere, place by place (`SchedulingInput.diagnose`), at the moment the solve
    gave up on it and with every preference relaxed: per kind of reason the existing nodes that refuse it, and why
    a new NodeClaim of each NodePool would. `kind` is set when the pod itself cannot be placed (unsupported fields,
    unusable volumes), and then nothing else is."""

    existing_nodes: int
    nodes: tuple[NodeRefusals, ...] = ()
    nodepools: tuple[PoolRefusal, ...] = ()
    kind: str = ""


@dataclass(slots=True)
class Results:
    new_nodeclaims: list[PlannedNodeClaim] = field(default_factory=list)
    existing_nodes: dict[str, list[pods.Pod]] = field(default_factory=dict)  # node name -> pods nominated
    unschedulable: dict[str, str] = field(default_factory=dict)  # "ns/name" -> reason
    cost_per_hour: float = 0.0
    lower_bound_per_hour: float = 0.0
    """A lower bound on `cost_per_hour`: the LP relaxation, tightened by what hostname rules force (`bound`)."""
    lp_bound_per_hour: float = 0.0
    """The LP relaxation alone (pods' requests, no topology)."""
    timed_out: bool = False
    """The input's deadline passed mid-solve: pods not reached are unschedulable with `TIMED_OUT`, no repack ran."""
    diagnoses: dict[str, Diagnosis] = field(default_factory=dict)
    """Unschedulable pod key -> why, place by place (only with `SchedulingInput.diagnose`)."""
    effective_zones: dict[str, list[pods.Pod]] = field(default_factory=dict)
    """Zone -> the pods their zone requirement, volumes and zonal topology groups left there at the start of the
    solve, or under "flexible" (several zones) or "none" (no zone) (`effective_zones`); pods refused outright
    (unsupported fields, unusable volumes) are under no key."""

    def placements(self) -> dict[str, str]:
        """pod key -> where it goes ("node/<name>" or "claim/<index>"), handy for comparisons and tests."""
        out = {p.key: f"node/{name}" for name, ps in self.existing_nodes.items() for p in ps}
        for i, claim in enumerate(self.new_nodeclaims):
            out.update({p.key: f"claim/{i}" for p in claim.pods})
        return out
