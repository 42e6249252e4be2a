"""A pod as the scheduler currently sees it: preferences treated as requirements until relaxed.

Upstream (core: scheduling/preferences.go) starts with the heaviest preferred node-affinity term required and only
the first required node-selector term, then relaxes one step per failed attempt in this order: next required term
(when several are ORed) → drop heaviest preferred pod affinity → drop heaviest preferred pod anti-affinity → drop
heaviest preferred node affinity → drop one ScheduleAnyway spread → tolerate PreferNoSchedule taints (only when some
pool has one). PreferencePolicy=Ignore starts from the fully relaxed view.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from karpy import requirements
from karpy import settings as karpy_settings
from karpy.scheduling import pods, taints


@dataclass(frozen=True, slots=True)
class View:
    pod: pods.Pod
    term: int = 0
    preferred_nodes: tuple[pods.WeightedNodeTerm, ...] = ()
    preferred_affinity: tuple[pods.WeightedAffinityTerm, ...] = ()
    preferred_anti: tuple[pods.WeightedAffinityTerm, ...] = ()
    spread: tuple[pods.SpreadConstraint, ...] = ()
    tolerate_prefer_no_schedule: bool = False

    @staticmethod
    def initial(
        pod: pods.Pod,
        *,
        policy: karpy_settings.PreferencePolicy = karpy_settings.PreferencePolicy.RESPECT,
        prefer_taints_exist: bool = False,
    ) -> View:
        view = View(
            pod,
            preferred_nodes=pod.preferred_node_terms,
            preferred_affinity=pod.preferred_affinity,
            preferred_anti=pod.preferred_anti_affinity,
            spread=pod.spread,
        )
        if policy is karpy_settings.PreferencePolicy.IGNORE:
            return dataclasses.replace(
                view,
                preferred_nodes=(),
                preferred_affinity=(),
                preferred_anti=(),
                spread=tuple(s for s in pod.spread if s.when_unsatisfiable == pods.SPREAD_DO_NOT_SCHEDULE),
                tolerate_prefer_no_schedule=prefer_taints_exist,
            )
        return view

    def state(self) -> tuple[int, int, int, int, int, bool]:
        """Identifies the relaxation step; with the pod signature it keys a run's caches."""
        return (
            self.term,
            len(self.preferred_nodes),
            len(self.preferred_affinity),
            len(self.preferred_anti),
            len(self.spread),
            self.tolerate_prefer_no_schedule,
        )

    def strict_requirements(self) -> requirements.Requirements:
        return self.pod.node_requirements(term=self.term)

    def node_requirements(self) -> requirements.Requirements:
        reqs = self.strict_requirements()
        if self.preferred_nodes:
            reqs = reqs.intersect(self.preferred_nodes[0].requirements)
        return reqs

    def tolerations(self) -> tuple[taints.Toleration, ...]:
        if self.tolerate_prefer_no_schedule:
            return (*self.pod.tolerations, taints.TOLERATE_PREFER_NO_SCHEDULE)
        return self.pod.tolerations

    def affinity_terms(self) -> tuple[pods.PodAffinityTerm, ...]:
        return self.pod.affinity + tuple(w.term for w in self.preferred_affinity)

    def anti_affinity_terms(self) -> tuple[pods.PodAffinityTerm, ...]:
        return self.pod.anti_affinity + tuple(w.term for w in self.preferred_anti)

    def relax(self, *, prefer_taints_exist: bool) -> View | None:
        """The next, looser view; None when nothing is left to relax."""
        if self.term + 1 < len(self.pod.required_node_terms):
            return dataclasses.replace(self, term=self.term + 1)
        if self.preferred_affinity:
            return dataclasses.replace(self, preferred_affinity=self.preferred_affinity[1:])
        if self.preferred_anti:
            return dataclasses.replace(self, preferred_anti=self.preferred_anti[1:])
        if self.preferred_nodes:
            return dataclasses.replace(self, preferred_nodes=self.preferred_nodes[1:])
        anyway = [i for i, s in enumerate(self.spread) if s.when_unsatisfiable == pods.SPREAD_SCHEDULE_ANYWAY]
        if anyway:
            drop = anyway[0]
            return dataclasses.replace(self, spread=self.spread[:drop] + self.spread[drop + 1 :])
        if prefer_taints_exist and not self.tolerate_prefer_no_schedule:
            return dataclasses.replace(self, tolerate_prefer_no_schedule=True)
        return None
