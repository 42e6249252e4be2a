"""kube-scheduler's scheduling queue, as far as the kube-scheduler stand-in needs it: which waiting pods a pass tries.

kube-scheduler (pkg/scheduler/backend/queue/scheduling_queue.go) tries a new pod at once. A pod that fails goes to
its unschedulable pods and is tried again only when a cluster event may make it schedulable (the queueing hints of
the plugins that rejected it), then after its backoff (1 s, doubled per attempt, at most 10 s:
DefaultPodInitialBackoffDuration / DefaultPodMaxBackoffDuration), or once it has waited
DefaultPodMaxInUnschedulablePodsDuration (5 min, flushUnschedulablePodsLeftover). So an unchanged cluster costs no
attempt and no write, and a growing one costs an attempt per pod per event, at most one per backoff.

The hints are approximated per event, erring towards trying again (an extra attempt writes only a changed message).
kube-scheduler asks only the hints of the filters that rejected the pod (isPodWorthRequeuing reads its
UnschedulablePlugins); here a pod only TaintToleration rejected takes TaintToleration's hint alone
(pkg/scheduler/framework/plugins/tainttoleration: isSchedulableAfterNodeChange), any other the broadest one:
- a Node added, or updated so that it may now take the pod: it must fit the pod's requests (NodeResourcesFit:
  no pod lands where it does not fit), and an update must change its labels (NodeAffinity), grow an allocatable the
  pod requests (NodeResourcesFit) or drop a taint the pod did not tolerate (TaintToleration; a NotReady or cordoned
  node's lifecycle taints included, NodeUnschedulable). A pod only TaintToleration rejected is not moved by a node
  that comes tainted (a launching node: karpenter.sh/unregistered, not-ready) but by the update that clears it;
- a Node deleted or being deleted, or a bound pod leaving its node (deleted, finished): every pod (topology spread
  domains, freed resources, ports, anti-affinity);
- a pod bound to a node: the pods with required pod affinity or topology spread (InterPodAffinity,
  PodTopologySpread);
- a pod's own spec or metadata changing (the queue's Update moves it back): that pod;
- a pod with volume claims: every time its backoff ends (the stand-in does not tell claim and volume events apart).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from karpy.api import meta
from karpy.scheduling import pods as scheduling_pods
from karpy.scheduling import resources as scheduling_resources

Key = tuple[str, str]


class Plugin(enum.StrEnum):
    """A filter that rejected a pod on a node (kube-scheduler's UnschedulablePlugins, as far as the hints tell)."""

    TAINT_TOLERATION = "TaintToleration"
    NODE_AFFINITY = "NodeAffinity"
    NODE_RESOURCES_FIT = "NodeResourcesFit"
    OTHER = "Other"
    """Spread, pod (anti-)affinity, ports, volumes: the broadest hint."""


@dataclass(frozen=True, slots=True)
class QueueSettings:
    initial_backoff: float = 1.0
    """Seconds before a pod's second attempt; doubled per attempt (DefaultPodInitialBackoffDuration)."""
    max_backoff: float = 10.0
    """The longest backoff (DefaultPodMaxBackoffDuration)."""
    max_in_unschedulable: float = 300.0
    """Seconds after which a failed pod is tried again with no event (DefaultPodMaxInUnschedulablePodsDuration)."""


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What the node hints read of a node: its labels, its NoSchedule/NoExecute taints, its allocatable."""

    labels: Mapping[str, str]
    taints: tuple[meta.Taint, ...]
    allocatable: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class NodeChange:
    old: NodeFacts | None
    """None: the node is new."""
    new: NodeFacts | None
    """None: the node went or is being deleted."""


@dataclass(frozen=True, slots=True)
class Events:
    """The cluster events of one pass (see the module docstring)."""

    nodes: tuple[NodeChange, ...] = ()
    freed: bool = False
    """A bound pod left its node."""
    placed: bool = False
    """A pod was bound to a node."""


@dataclass(frozen=True, slots=True)
class _Failed:
    attempts: int
    at: float
    """When the last attempt failed."""
    queued: bool
    """An event moved it back: it is tried once its backoff ends."""
    rejectors: frozenset[Plugin] = frozenset()
    """The filters that rejected it (none: no node was there)."""


class Queue:
    """The failed pods' attempts; a pod it does not hold is tried at once."""

    def __init__(self, settings: QueueSettings | None = None) -> None:
        self._settings = settings or QueueSettings()
        self._failed: dict[Key, _Failed] = {}

    def __len__(self) -> int:
        return len(self._failed)

    def backoff(self, attempts: int) -> float:
        """kube-scheduler's calculateBackoffDuration: the initial backoff doubled per attempt after the first."""
        s = self._settings
        return float(min(s.initial_backoff * 2.0 ** max(0, attempts - 1), s.max_backoff))

    def _due_at(self, failed: _Failed) -> float:
        if failed.queued:
            return failed.at + self.backoff(failed.attempts)
        return failed.at + self._settings.max_in_unschedulable

    def ready(self, key: Key, now: float) -> bool:
        """Whether a pass at `now` tries the waiting pod."""
        failed = self._failed.get(key)
        return failed is None or now >= self._due_at(failed)

    def next_due(self) -> float | None:
        """When the earliest held pod may be tried with no event (None: no pod held)."""
        return min((self._due_at(f) for f in self._failed.values()), default=None)

    def failed(
        self,
        key: Key,
        now: float,
        *,
        pod: scheduling_pods.Pod | None,
        rejectors: frozenset[Plugin] = frozenset({Plugin.OTHER}),
    ) -> None:
        """The pod's attempt at `now` failed, `rejectors` refusing it; a pod with claims is queued again at once (see
        the module docstring)."""
        before = self._failed.get(key)
        attempts = before.attempts + 1 if before is not None else 1
        queued = pod is not None and bool(pod.pvc_names)
        self._failed[key] = _Failed(attempts=attempts, at=now, queued=queued, rejectors=rejectors)

    def forget(self, key: Key) -> None:
        """The pod no longer waits (bound, deleted, finished)."""
        self._failed.pop(key, None)

    def changed(self, key: Key) -> None:
        """The held pod's spec or metadata changed: tried again once its backoff ends."""
        failed = self._failed.get(key)
        if failed is not None:
            self._failed[key] = dataclasses.replace(failed, queued=True)

    def move(self, events: Events, waiting: Mapping[Key, tuple[object, scheduling_pods.Pod | None]]) -> int:
        """Queue the held pods `events` may make schedulable (`waiting`: each waiting pod's manifest and parse);
        how many moved."""
        if not (events.nodes or events.freed or events.placed):
            return 0
        everyone = events.freed or any(change.new is None for change in events.nodes)
        verdicts: dict[tuple[Any, ...], bool] = {}  # interchangeable pods get the same node hints
        moved = 0
        for key, failed in self._failed.items():
            pod = waiting[key][1] if key in waiting else None
            if failed.queued or pod is None:
                continue
            if not everyone and not (events.placed and (pod.affinity or pod.spread)):
                same = (tuple(sorted(pod.requests.items())), pod.tolerations, failed.rejectors)
                if same not in verdicts:
                    verdicts[same] = any(node_hint(pod, change, failed.rejectors) for change in events.nodes)
                if not verdicts[same]:
                    continue
            self._failed[key] = dataclasses.replace(failed, queued=True)
            moved += 1
        return moved


def node_hint(
    pod: scheduling_pods.Pod, change: NodeChange, rejectors: frozenset[Plugin] = frozenset({Plugin.OTHER})
) -> bool:
    """Whether a node's change may make the pod that `rejectors` refused schedulable (see the module docstring)."""
    new, old = change.new, change.old
    if new is None:
        return True
    if not scheduling_resources.fits(pod.requests, new.allocatable):
        return False
    if rejectors == {Plugin.TAINT_TOLERATION}:  # TaintToleration's hint: a taint it did not tolerate went
        return not _untolerated(pod, new.taints) and (old is None or _untolerated(pod, old.taints))
    if old is None or old.labels != new.labels:
        return True
    if any(new.allocatable.get(name, 0) > old.allocatable.get(name, 0) for name in pod.requests):
        return True
    return _untolerated(pod, old.taints) and not _untolerated(pod, new.taints)


def _untolerated(pod: scheduling_pods.Pod, taints: Iterable[meta.Taint]) -> bool:
    return any(not any(tol.tolerates(t) for tol in pod.tolerations) for t in taints)
