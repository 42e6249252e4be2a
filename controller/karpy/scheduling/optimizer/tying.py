"""Which pods the repack may not move off their claim, and the hostname-keyed terms they own (`fixedbins`).

A pod is *tied* to its claim when moving it could break a rule kube-scheduler checks per node: it has host ports,
owns a hostname-keyed term (spread, affinity or anti-affinity, required or preferred), or is selected by a
hostname-keyed pod-affinity group (an owner may rely on it being there). Everything here is decided once per pod
template (pods stamped from one share their parts, `pods.Interner`) and read per pod through the pod's identity.
Pure Python; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from karpy import requirements
from karpy.api import labels
from karpy.scheduling import pods, topology
from karpy.scheduling.optimizer import exclusion

Term = tuple[requirements.Requirements | None, frozenset[str], requirements.Requirements | None]
"""(label selector, namespaces, namespace selector) of a hostname-keyed term a tied pod owns."""


@dataclass(frozen=True, slots=True)
class Traits:
    """What the repack needs to know of one pod template."""

    tied: bool
    """It may not leave its claim (see the module docstring)."""
    relies_on_company: bool
    """It owns, or is selected by, a hostname-keyed pod affinity: it may not leave the pods it shares a node with."""
    pinned_by_domains: bool
    """It owns, or counts in, a rule keyed on something other than hostname: its claim may not narrow."""
    terms: tuple[Term, ...]
    """The hostname-keyed spread and anti-affinity terms it owns (its node may not take pods they select)."""
    capped: tuple[tuple[topology.GroupKey, int], ...] = ()
    """When every term it owns is a per-node cap (`exclusion.groups_of`: a node holds at most `cap` pods the group's
    term selects) and nothing else ties it: those groups; it may then move to any node of its claim's requirements
    that keeps every cap (`capped`). Empty otherwise."""


class Ties:
    """`Traits` per pod, and which pods a tied pod's terms select."""

    def __init__(self, topo: topology.Topology) -> None:
        self.namespace_labels = topo.namespace_labels
        host = labels.LABEL_HOSTNAME
        self._affinity = [
            g
            for g in topo.groups.values()
            if g.key.topology_key == host and g.key.kind is topology.Kind.AFFINITY and not g.key.inverse
        ]
        self._domain_groups = [g for g in topo.groups.values() if g.key.topology_key != host]
        # Keyed by the identities of a pod's parts (and of the pod, asked again for a fixed bin's pods): the pods
        # outlive the repack that holds this object, so no id is reused meanwhile.
        self._by_template: dict[tuple[object, ...], Traits] = {}
        self._by_pod: dict[int, Traits] = {}

    def of(self, pod: pods.Pod) -> Traits:
        found = self._by_pod.get(id(pod))
        if found is None:
            key = (
                id(pod.spread),
                id(pod.affinity),
                id(pod.anti_affinity),
                id(pod.preferred_affinity),
                id(pod.preferred_anti_affinity),
                id(pod.host_ports),
                id(pod.labels),
                pod.namespace,
            )
            found = self._by_template.get(key)
            if found is None:
                found = self._by_template[key] = self._traits(pod)
            self._by_pod[id(pod)] = found
        return found

    def tied(self, pod: pods.Pod) -> bool:
        return self.of(pod).tied

    def _traits(self, pod: pods.Pod) -> Traits:
        host = labels.LABEL_HOSTNAME
        terms = _own_terms(pod)
        company = any(
            t.topology_key == host for t in (*pod.affinity, *(w.term for w in pod.preferred_affinity))
        ) or any(g.selects(pod, self.namespace_labels) for g in self._affinity)
        owned = [
            *(c.topology_key for c in pod.spread),
            *(t.topology_key for t in (*pod.affinity, *pod.anti_affinity)),
            *(w.term.topology_key for w in (*pod.preferred_affinity, *pod.preferred_anti_affinity)),
        ]
        pinned = any(k != host for k in owned) or any(
            g.selects(pod, self.namespace_labels) for g in self._domain_groups
        )
        caps = exclusion.groups_of(pod)
        capped = caps if terms and len(caps) == len(terms) and not (pod.host_ports or company) else ()
        return Traits(bool(pod.host_ports or terms or company), company, pinned, terms, capped)

    def selects(self, term: Term, pod: pods.Pod) -> bool:
        selector, namespaces, namespace_selector = term
        if selector is None:
            return False
        in_namespace = pod.namespace in namespaces
        if not in_namespace and namespace_selector is not None:
            ns_labels = self.namespace_labels.get(pod.namespace, {pods.LABEL_NAMESPACE_NAME: pod.namespace})
            in_namespace = namespace_selector.admits(ns_labels)
        return in_namespace and selector.admits(pod.labels)


def _own_terms(pod: pods.Pod) -> tuple[Term, ...]:
    host = labels.LABEL_HOSTNAME
    out: list[Term] = [(c.selector, frozenset({pod.namespace}), None) for c in pod.spread if c.topology_key == host]
    anti = (*pod.anti_affinity, *(w.term for w in pod.preferred_anti_affinity))
    out += [(t.selector, t.namespaces, t.namespace_selector) for t in anti if t.topology_key == host]
    return tuple(out)
