"""The instants the provisioner first saw, first decided on and first placed each pending pod, for the pod
provisioning series (upstream keeps the same three in cluster state: pkg/controllers/state/cluster.go `AckPods`,
`MarkPodSchedulingDecisions`, `ClearPodSchedulingMappings`).

Times come from the injected clock. A pod is seen when its watch event shows it provisionable (the event that
triggers the provisioner) or, failing that, by the provisioner's rescan of pending pods; it is decided on by the
first solve that either placed it or could not; it is schedulable from the first solve that placed it until a solve
fails to. An entry goes when its pod starts, ends or is deleted, so the map holds pending and starting pods only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Set

from karpy.clock import Clock


@dataclasses.dataclass(slots=True)
class _Instants:
    seen: float | None = None
    decided: float | None = None
    schedulable: float | None = None


class PodTimes:
    """Per pod key (`namespace/name`): when it was first seen, first decided on, and first found schedulable."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._pods: dict[str, _Instants] = {}

    def seen(self, key: str) -> None:
        """The provisioner saw `key` pending; only the first sighting counts."""
        instants = self._pods.setdefault(key, _Instants())
        if instants.seen is None:
            instants.seen = self._clock.now()

    def decided(self, *, failed: Iterable[str], placed: Iterable[str]) -> list[float]:
        """A solve could not place `failed` and placed `placed` (pending pods only, not pods of leaving nodes);
        returns the seconds from first sight to first decision of the pods decided on for the first time."""
        now = self._clock.now()
        waits: list[float] = []
        for key in failed:
            waits.extend(self._decide(key, now, schedulable=False))
        for key in placed:
            waits.extend(self._decide(key, now, schedulable=True))
        return waits

    def _decide(self, key: str, now: float, *, schedulable: bool) -> list[float]:
        instants = self._pods.setdefault(key, _Instants())
        if schedulable:
            if instants.schedulable is None:
                instants.schedulable = now
        else:
            instants.schedulable = None  # upstream forgets it: the next placement starts the clock again
        if instants.decided is not None:
            return []
        instants.decided = now
        return [] if instants.seen is None else [max(0.0, now - instants.seen)]

    def seen_at(self, key: str) -> float | None:
        instants = self._pods.get(key)
        return None if instants is None else instants.seen

    def decided_at(self, key: str) -> float | None:
        instants = self._pods.get(key)
        return None if instants is None else instants.decided

    def schedulable_since(self, key: str) -> float | None:
        instants = self._pods.get(key)
        return None if instants is None else instants.schedulable

    def frozen(self) -> PodTimes:
        """A copy this one's changes do not reach: what a scrape renders from in a worker thread."""
        copy = PodTimes(self._clock)
        copy._pods = {key: dataclasses.replace(instants) for key, instants in self._pods.items()}
        return copy

    def forget(self, key: str) -> None:
        """The pod started, ended or was deleted: nothing is measured from it any more."""
        self._pods.pop(key, None)

    def retain(self, keys: Set[str]) -> None:
        """Forget every pod but `keys` (the pods the cluster still has): one deleted while this replica did not
        lead went unseen by `forget`."""
        for key in [k for k in self._pods if k not in keys]:
            del self._pods[key]

    def __len__(self) -> int:
        return len(self._pods)
