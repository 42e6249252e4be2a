"""Topology spread, pod affinity and anti-affinity as counted groups (core: scheduling/topology*.go).

A `Group` counts, per domain of one topology key, the pods its selector matches (spread, affinity,
anti-affinity), or for an *inverse* group the pods that own a required anti-affinity term (so pods it selects keep
away). Groups are deduplicated by their defining fields; counts start from pods already bound in the cluster and
grow as the solve places pods. `Group.next_domains` returns the domains a pod may use on a node whose own
requirement for the key is `node_domains`, mirroring upstream's nextDomainTopologySpread / Affinity / AntiAffinity
(ties broken by domain name for determinism). Counts only grow during a solve, which is what makes an anti-affinity
refusal permanent and lets the solver skip such nodes for the rest of a run.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from karpy import requirements
from karpy.api import labels, meta
from karpy.scheduling import pods, taints

ALL_NAMESPACES: frozenset[str] = frozenset({"*"})


class Kind(enum.StrEnum):
    SPREAD = "topology spread"
    AFFINITY = "pod affinity"
    ANTI_AFFINITY = "pod anti-affinity"


@dataclass(frozen=True, slots=True)
class GroupKey:
    kind: Kind
    topology_key: str
    selector: requirements.Requirements | None
    namespaces: frozenset[str]
    namespace_selector: requirements.Requirements | None = None
    max_skew: int = 0
    min_domains: int | None = None
    node_filter: requirements.Requirements | None = None  # spread nodeAffinityPolicy=Honor
    taint_filter: tuple[taints.Toleration, ...] | None = None  # spread nodeTaintsPolicy=Honor
    inverse: bool = False


def spread_key(pod: pods.Pod, c: pods.SpreadConstraint, node_reqs: requirements.Requirements) -> GroupKey:
    return GroupKey(
        Kind.SPREAD,
        c.topology_key,
        c.selector,
        frozenset({pod.namespace}),
        max_skew=c.max_skew,
        min_domains=c.min_domains,
        node_filter=node_reqs if c.node_affinity_policy == pods.POLICY_HONOR else None,
        taint_filter=pod.tolerations if c.node_taints_policy == pods.POLICY_HONOR else None,
    )


def affinity_key(term: pods.PodAffinityTerm, kind: Kind, *, inverse: bool = False) -> GroupKey:
    return GroupKey(kind, term.topology_key, term.selector, term.namespaces, term.namespace_selector, inverse=inverse)


@dataclass(slots=True)
class Group:
    key: GroupKey
    universe: frozenset[str]  # domains known up front (pools × offerings, existing nodes)
    counts: dict[str, int] = field(default_factory=dict)
    positive: set[str] = field(default_factory=set)
    history: list[tuple[str, int]] = field(default_factory=list)  # every record, in order (for slot columns)

    def selects(self, pod: pods.Pod, namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
        k = self.key
        if k.selector is None:
            return False
        if k.namespace_selector is not None:
            ns_labels = namespace_labels.get(pod.namespace, {pods.LABEL_NAMESPACE_NAME: pod.namespace})
            in_ns = pod.namespace in k.namespaces or k.namespace_selector.admits(ns_labels)
        else:
            in_ns = pod.namespace in k.namespaces
        return in_ns and k.selector.admits(pod.labels)

    def node_counts(self, node_reqs: requirements.Requirements, node_taints: Iterable[meta.Taint]) -> bool:
        """Does a node with these requirements/taints take part in this (spread) group's counting?"""
        if self.key.node_filter is not None and node_reqs.compatible(
            self.key.node_filter, allow_undefined=requirements.ALLOW_UNDEFINED_WELL_KNOWN
        ):
            return False
        return not (
            self.key.taint_filter is not None and taints.untolerated(node_taints, self.key.taint_filter) is not None
        )

    def record(self, domains: Iterable[str], count: int = 1) -> None:
        for d in domains:
            self.counts[d] = self.counts.get(d, 0) + count
            self.positive.add(d)
            self.history.append((d, count))

    def _candidates(self, node_domains: requirements.Requirement) -> list[str]:
        finite = node_domains.values()
        if finite is not None:
            return sorted(finite)
        return sorted(d for d in self.universe | self.positive if node_domains.has(d))

    def min_count(self, pod_domains: requirements.Requirement) -> int:
        if self.key.topology_key == labels.LABEL_HOSTNAME:
            return 0  # a new node is always an empty hostname domain
        eligible = [self.counts.get(d, 0) for d in self.universe if pod_domains.has(d)]
        if not eligible or (self.key.min_domains is not None and len(eligible) < self.key.min_domains):
            return 0
        return min(eligible)

    def next_domains(
        self,
        pod: pods.Pod,
        *,
        pod_domains: requirements.Requirement,
        node_domains: requirements.Requirement,
        self_selecting: bool,
    ) -> requirements.Requirement:
        """The domains (In, possibly empty) this pod may use on a node constrained to `node_domains`."""
        key = self.key.topology_key
        if self.key.kind is Kind.SPREAD:
            low = self.min_count(pod_domains)
            best, best_count = "", None
            for d in self._candidates(node_domains):
                if not pod_domains.has(d):
                    continue
                c = self.counts.get(d, 0) + (1 if self_selecting else 0)
                if c - low <= self.key.max_skew and (best_count is None or c < best_count):
                    best, best_count = d, c
            return requirements.Requirement.in_(key, (best,) if best_count is not None else ())
        if self.key.kind is Kind.AFFINITY and not self.key.inverse:
            anywhere = any(pod_domains.has(d) for d in self.positive)
            if anywhere:
                allowed = [d for d in self._candidates(node_domains) if d in self.positive and pod_domains.has(d)]
                return requirements.Requirement.in_(key, allowed)
            if not self_selecting:
                return requirements.Requirement.in_(key, ())
            # Bootstrap: the first pod of a self-affine group picks a domain, preferring the node's own.
            both = [d for d in self._candidates(node_domains) if pod_domains.has(d)]
            return requirements.Requirement.in_(key, both[:1])
        allowed = [d for d in self._candidates(node_domains) if self.counts.get(d, 0) == 0 and pod_domains.has(d)]
        return requirements.Requirement.in_(key, allowed)

    def valid_domains(self, pod_domains: requirements.Requirement, *, self_selecting: bool) -> frozenset[str]:
        """Every domain this group lets the pod land in on a node that leaves the key open: upstream's valid domains
        of TopologyGroup.Get with nodeDomains Exists, which GetTopologyZoneConstraints asks for at the start of a
        solve (core: scheduling/topology.go). A spread admits each domain within the skew (the pod's domains only
        set the minimum, as in nextDomainTopologySpread), not just the best one `next_domains` picks; a self-affinity
        with no domain yet may start in any domain the pod may use (upstream picks one or two at random there)."""
        known = self.universe | self.positive
        if self.key.kind is Kind.SPREAD:
            threshold = self.key.max_skew + self.min_count(pod_domains) - (1 if self_selecting else 0)
            return frozenset(d for d in known if self.counts.get(d, 0) <= threshold)
        if self.key.kind is Kind.AFFINITY and not self.key.inverse:
            anchored = frozenset(d for d in self.positive if pod_domains.has(d))
            if anchored or not self_selecting:
                return anchored
            return frozenset(d for d in known if pod_domains.has(d))
        return frozenset(d for d in known if self.counts.get(d, 0) == 0 and pod_domains.has(d))

    def unsatisfiable(self) -> str:
        return f"unsatisfiable {self.describe()}"

    def describe(self) -> str:
        k = self.key
        text = f"{k.kind.value} on {k.topology_key}"
        if k.selector is not None:
            text += f" selecting {{{k.selector}}}"
        if k.kind is Kind.SPREAD:
            text += f" (maxSkew={k.max_skew}"
            text += f", minDomains={k.min_domains})" if k.min_domains is not None else ")"
        shown = sorted(self.counts.items())[:8]
        return text + f", counts={dict(shown)}"


@dataclass(frozen=True, slots=True)
class DomainSource:
    """Somewhere pods could land (a NodePool or an existing node), with the domains it offers per key."""

    requirements: requirements.Requirements
    taints: tuple[meta.Taint, ...]
    domains: Mapping[str, frozenset[str]]


@dataclass(frozen=True, slots=True)
class BoundPod:
    pod: pods.Pod
    node_requirements: requirements.Requirements
    node_taints: tuple[meta.Taint, ...]
    count: int = 1


class Topology:
    """The registry of groups for one solve: creation (counted from bound and placed pods), queries, recording."""

    def __init__(
        self,
        *,
        sources: Iterable[DomainSource],
        bound: Iterable[BoundPod],
        namespace_labels: Mapping[str, Mapping[str, str]],
        pending: Iterable[pods.Pod] = (),
    ) -> None:
        """`pending`: the pods to place. Each required anti-affinity term among them gets its inverse group up front
        (topology.go NewTopology → Update): a pod it selects is then held to the term's known domains even before
        the term's owner lands, so the owner's later record covers every domain that pod could take."""
        self.sources = tuple(sources)
        self.namespace_labels = namespace_labels
        self.groups: dict[GroupKey, Group] = {}
        self.placements: list[BoundPod] = []
        self._selecting: dict[tuple[object, ...], tuple[int, list[Group]]] = {}
        self._exists: dict[str, requirements.Requirement] = {}
        # id(pod) -> (pod, group count, groups): the pod is kept so its id cannot be reused while cached
        self._selecting_pod: dict[int, tuple[pods.Pod, int, list[Group]]] = {}
        self._inverse_pod: dict[int, tuple[pods.Pod, list[Group]]] = {}  # same, for owned inverse groups
        self._unregistered: dict[GroupKey, tuple[Group, int]] = {}  # `counted` groups: (group, placements counted)
        for b in bound:
            if self.groups or b.pod.anti_affinity:
                self.record(b.pod, b.node_requirements, b.node_taints, b.count, counted=not b.pod.terminating)
            elif not b.pod.terminating:  # what `record` does then, without building the same record again
                self.placements.append(b)
        owners = {id(p.anti_affinity): p for p in pending if p.anti_affinity}  # pods of one template share terms
        for p in owners.values():
            self._inverse(p)

    def _universe(self, key: GroupKey) -> frozenset[str]:
        out: set[str] = set()
        for s in self.sources:
            if key.node_filter is not None and s.requirements.compatible(
                key.node_filter, allow_undefined=requirements.ALLOW_UNDEFINED_WELL_KNOWN
            ):
                continue
            if key.taint_filter is not None and taints.untolerated(s.taints, key.taint_filter) is not None:
                continue
            out |= s.domains.get(key.topology_key, frozenset())
        return frozenset(out)

    def exists(self, key: str) -> requirements.Requirement:
        """`key Exists`, built once per key (it is asked for on every check)."""
        found = self._exists.get(key)
        if found is None:
            found = self._exists[key] = requirements.Requirement.exists(key)
        return found

    def group(self, key: GroupKey) -> Group:
        found = self.groups.get(key)
        if found is None:
            found = self.groups[key] = self._count_up(key)
            del self._unregistered[key]
        return found

    def counted(self, key: GroupKey) -> Group:
        """The group for `key` as the counts stand, for a query that must not register it (a new group changes how
        the solve caches contexts and clones claims): the registered one, or else one counted from the placements so
        far, which `group` takes over later instead of counting them again."""
        found = self.groups.get(key)
        return found if found is not None else self._count_up(key)

    def _count_up(self, key: GroupKey) -> Group:
        """The unregistered group for `key`, counted over every placement so far (only those since its last count)."""
        found, counted = self._unregistered.get(key) or (Group(key, self._universe(key)), 0)
        for b in itertools.islice(self.placements, counted, None):
            self._count(found, b)
        self._unregistered[key] = (found, len(self.placements))
        return found

    def owned(
        self,
        pod: pods.Pod,
        *,
        node_reqs: requirements.Requirements,
        spread: Iterable[pods.SpreadConstraint],
        affinity: Iterable[pods.PodAffinityTerm],
        anti: Iterable[pods.PodAffinityTerm],
    ) -> list[Group]:
        out = [self.group(spread_key(pod, c, node_reqs)) for c in spread]
        out += [self.group(affinity_key(t, Kind.AFFINITY)) for t in affinity]
        out += [self.group(affinity_key(t, Kind.ANTI_AFFINITY)) for t in anti]
        return out

    def selecting(self, pod: pods.Pod) -> list[Group]:
        """Groups whose selector matches `pod` (cached per namespace + labels)."""
        by_pod = self._selecting_pod.get(id(pod))
        if by_pod is not None and by_pod[0] is pod and by_pod[1] == len(self.groups):
            return by_pod[2]
        found = self._selecting_labels(pod)
        self._selecting_pod[id(pod)] = (pod, len(self.groups), found)
        return found

    def _selecting_labels(self, pod: pods.Pod) -> list[Group]:
        cache_key = (pod.namespace, tuple(sorted(pod.labels.items())))
        cached = self._selecting.get(cache_key)
        if cached is not None and cached[0] == len(self.groups):
            return cached[1]
        found = [g for g in self.groups.values() if g.selects(pod, self.namespace_labels)]
        self._selecting[cache_key] = (len(self.groups), found)
        return found

    def constraints(self, pod: pods.Pod, owned: list[Group]) -> list[Group]:
        """Groups that constrain where `pod` may go: its own, and inverse anti-affinity groups selecting it."""
        return owned + [g for g in self.selecting(pod) if g.key.inverse]

    def requirements_for(
        self,
        pod: pods.Pod,
        constraints: list[Group],
        *,
        strict: requirements.Requirements,
        node_reqs: requirements.Requirements,
    ) -> requirements.Requirements | Group:
        """The domains each constraint allows on a node with `node_reqs`, or the first group allowing none."""
        out = []
        selecting = self.selecting(pod)
        for g in constraints:
            key = g.key.topology_key
            pod_domains = (strict.get(key) if not g.key.inverse else None) or self.exists(key)
            node_domains = node_reqs.get(key) or self.exists(key)
            domains = g.next_domains(
                pod, pod_domains=pod_domains, node_domains=node_domains, self_selecting=g in selecting
            )
            if not domains.has_values():
                return g
            out.append(domains)
        return requirements.Requirements(out)

    def _count(self, g: Group, b: BoundPod, *, selected: bool = False) -> None:
        """Count `b` in `g` if it belongs there (`selected`: the caller already knows `g` selects the pod)."""
        dom = b.node_requirements.get(g.key.topology_key)
        values = dom.values() if dom is not None else None
        if not values:
            return
        if g.key.inverse:
            if any(affinity_key(t, Kind.ANTI_AFFINITY, inverse=True) == g.key for t in b.pod.anti_affinity):
                g.record(values, b.count)
            return
        if not selected and not g.selects(b.pod, self.namespace_labels):
            return
        if g.key.kind is Kind.SPREAD and not g.node_counts(b.node_requirements, b.node_taints):
            return
        if g.key.kind is Kind.ANTI_AFFINITY or len(values) == 1:
            g.record(values, b.count)

    def record(
        self,
        pod: pods.Pod,
        node_reqs: requirements.Requirements,
        node_taints: tuple[meta.Taint, ...],
        count: int = 1,
        *,
        counted: bool = True,
    ) -> None:
        """`count` pods like `pod` were placed on a node with these requirements: update every group. Not `counted`
        (a terminating pod: topology.go IgnoredForTopology), it counts in no spread or affinity group, but its
        required anti-affinity still keeps pods away while it runs."""
        placed = BoundPod(pod, node_reqs, node_taints, count)
        if not self.groups and not pod.anti_affinity:
            # Nothing to count in (and none of its own to create): most bound pods of a large cluster, at start.
            # Kept for the groups made later unless it is not `counted`.
            if counted:
                self.placements.append(placed)
            return
        owned = self._inverse(pod)  # required anti-affinity keeps later pods away (inverse groups)
        if counted:
            for g in self.selecting(pod):
                if not g.key.inverse:
                    self._count(g, placed, selected=True)
        for g in owned:
            dom = node_reqs.get(g.key.topology_key)
            values = dom.values() if dom is not None else None
            if values:
                g.record(values, count)
        if counted:
            self.placements.append(placed)

    def _inverse(self, pod: pods.Pod) -> list[Group]:
        """The inverse anti-affinity groups `pod` owns (created on first use), cached per pod object."""
        cached = self._inverse_pod.get(id(pod))
        if cached is not None and cached[0] is pod:
            return cached[1]
        found = [self.group(affinity_key(t, Kind.ANTI_AFFINITY, inverse=True)) for t in pod.anti_affinity]
        self._inverse_pod[id(pod)] = (pod, found)
        return found
