"""operatorpkg's status-controller series for NodeClaims, NodePools, Nodes, EC2NodeClasses and CapacityBuffers, from
the state cache.

Upstream runs operatorpkg's status controller per kind (core: pkg/controllers/controllers.go, aws:
pkg/controllers/controllers.go; operatorpkg: status/controller.go, status/metrics.go). It remembers what it saw of
each object and, on every reconcile, sets gauges for the object's conditions and deletion, counts the conditions
whose status changed since, and observes how long the previous status held and, once the object is gone, how long
its deletion took. karpy's state cache sees every version of these objects (the one watch of each kind), so the
same comparison runs on each watch update, before and after (`Observer`), and the gauges are read from the cache
when Prometheus scrapes (`ObjectCollector`). Like upstream's, the comparison is lossy (a status that flips and
flips back between two updates is not seen), and it starts afresh with the process: a condition first seen with
status True or False counts as a transition, as upstream's first reconcile after a restart counts it.

- `operator_<kind>_status_condition_count` and `_current_status_seconds{namespace,name,type,status,reason,...}`;
- `operator_<kind>_status_condition_transitions_total{type,status,reason,...}` (the status and reason it turned to);
- `operator_<kind>_status_condition_transition_seconds{type,status,...}` (the status it left, and how long it held);
- `operator_<kind>_termination_current_time_seconds{namespace,name,...}` while the object is being deleted;
- `operator_<kind>_termination_duration_seconds{...}` when it is gone, if it was seen being deleted.

"..." are the object's labels upstream adds per kind (`status.WithLabels`), in Prometheus spelling. Upstream also
feeds the deprecated kind-less families (`operator_status_condition_*`, `operator_termination_*`, labelled with
`group` and `kind` instead) from NodeClaims, NodePools, EC2NodeClasses and CapacityBuffers
(`status.EmitDeprecatedMetrics`), not from Nodes; so does karpy. Nothing here decides anything.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

import prometheus_client
from prometheus_client import core as prometheus_client_core

from karpy.api import decoding, labels, meta
from karpy.kube import resources
from karpy.runtime.metrics import naming, offloop, textformat
from karpy.state import cluster as state_cluster

Obj = Mapping[str, Any] | None
NAMESPACE: Final = "operator"
UNKNOWN: Final = "Unknown"
EXPONENTIAL_BUCKETS: Final = tuple(0.5 * 2**i for i in range(15))
"""0.5 s to 8192 s: core's buckets for the NodeClaim, NodePool and Node families (`prometheus.ExponentialBuckets(0.5,
2, 15)` in pkg/controllers/controllers.go)."""
_UNSUPPORTED_IN_LABELS: Final = str.maketrans({"/": "_", ".": "_", "-": "_"})


def prometheus_label(label_key: str) -> str:
    """`karpenter.sh/nodepool` → `karpenter_sh_nodepool` (operatorpkg: status/controller.go `toPrometheusLabel`)."""
    return label_key.translate(_UNSUPPORTED_IN_LABELS)


@dataclasses.dataclass(frozen=True, slots=True)
class Kind:
    """One kind's status controller as upstream configures it."""

    resource: resources.Resource
    label_keys: tuple[str, ...]
    """Object labels added to every series of the kind (`status.WithLabels`)."""
    buckets: tuple[float, ...]
    deprecated: bool
    """Also feeds the kind-less families (`status.EmitDeprecatedMetrics`)."""

    @property
    def prefix(self) -> str:
        return f"{NAMESPACE}_{self.resource.kind.lower()}"

    @property
    def extra_labels(self) -> list[str]:
        return [prometheus_label(k) for k in self.label_keys]

    def extra_values(self, obj: Mapping[str, Any]) -> list[str]:
        object_labels = _mapping(_mapping(obj.get("metadata")).get("labels"))
        return [str(object_labels.get(k) or "") for k in self.label_keys]

    def group_kind(self) -> list[str]:
        return [self.resource.group, self.resource.kind]


KINDS: Final = (
    Kind(resources.NODECLAIMS, (labels.LABEL_EC2NODECLASS, labels.LABEL_NODEPOOL), EXPONENTIAL_BUCKETS, True),
    Kind(resources.NODEPOOLS, (), EXPONENTIAL_BUCKETS, True),
    Kind(
        resources.NODES,
        (labels.LABEL_EC2NODECLASS, labels.LABEL_NODEPOOL, labels.LABEL_INITIALIZED),
        EXPONENTIAL_BUCKETS,
        False,
    ),
    # aws: pkg/controllers/controllers.go registers it without buckets of its own: the Go client's defaults
    Kind(resources.EC2NODECLASSES, (), naming.GO_DEFAULT_BUCKETS, True),
)
"""The kinds upstream's Karpenter on AWS always runs a status controller for, as it configures each."""
CAPACITYBUFFERS: Final = Kind(resources.CAPACITYBUFFERS, (), EXPONENTIAL_BUCKETS, True)
"""core: pkg/controllers/controllers.go runs a generic object controller for buffers only under the CapacityBuffer
gate: the wiring's buffer builder adds this kind (`ObjectSeries.add`), so without the gate no family of it exists."""
GROUP_KIND: Final = ("group", "kind")
"""The labels the deprecated families carry instead of a kind in their name."""
OBJECT: Final = ("namespace", "name")
CONDITION: Final = ("type", "status")
TRANSITION: Final = (*CONDITION, "reason")
CURRENT: Final = (*OBJECT, *TRANSITION)


# --- reading objects (pure, and never raising: the cache keeps objects whose status no parser accepted) ----------


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _raw_conditions(obj: Obj) -> dict[str, Mapping[str, Any]]:
    """The object's raw status conditions by type (the first of a type wins, as operatorpkg's `ConditionSet.Get`)."""
    found: dict[str, Mapping[str, Any]] = {}
    raw = _mapping(_mapping(obj).get("status")).get("conditions")
    for c in raw if isinstance(raw, list) else ():
        if isinstance(c, Mapping) and c.get("type"):
            found.setdefault(str(c["type"]), c)
    return found


def _condition(raw: Mapping[str, Any]) -> meta.Condition:
    return meta.Condition(
        type=str(raw["type"]), status=str(raw.get("status") or ""), reason=str(raw.get("reason") or ""),
        last_transition_time=decoding.timestamp_or_none(raw.get("lastTransitionTime")),
    )  # fmt: skip


def conditions(obj: Obj) -> dict[str, meta.Condition]:
    """The object's status conditions by type (the first of a type wins, as operatorpkg's `ConditionSet.Get`)."""
    return {type_: _condition(raw) for type_, raw in _raw_conditions(obj).items()}


def deletion_time(obj: Obj) -> float | None:
    return decoding.timestamp_or_none(_mapping(_mapping(obj).get("metadata")).get("deletionTimestamp"))


@dataclasses.dataclass(frozen=True, slots=True)
class Transition:
    condition: meta.Condition
    """The condition as it is now."""
    left: meta.Condition | None
    """The condition as it was, None when the object had none of that type."""

    @property
    def held_seconds(self) -> float | None:
        """How long the status it left held: the difference of the two lastTransitionTimes (operatorpkg does not
        read a clock for it). None when it had no earlier status or a time is missing or unreadable; never negative
        (upstream would observe a negative span were a lastTransitionTime moved back)."""
        if self.left is None or self.left.last_transition_time is None:
            return None
        if self.condition.last_transition_time is None:
            return None
        return max(0.0, self.condition.last_transition_time - self.left.last_transition_time)


def transitions(old: Obj, new: Obj) -> list[Transition]:
    """The conditions of `new` whose status differs from `old`'s, a missing one counting as Unknown (operatorpkg:
    `Condition.GetStatus`): a condition that appears True or False transitions, one that appears Unknown or goes
    away does not (pure)."""
    if new is None:
        return []
    before = _raw_conditions(old)
    out: list[Transition] = []
    # Statuses are compared raw and only a transition's times are read: a Node's conditions change with every
    # heartbeat the kubelet reports, and this runs on each of them.
    for type_, now in _raw_conditions(new).items():
        left = before.get(type_)
        if (UNKNOWN if left is None else str(left.get("status") or "")) != str(now.get("status") or ""):
            out.append(Transition(_condition(now), None if left is None else _condition(left)))
    return out


def termination_seconds(old: Obj, new: Obj, *, now: float) -> float | None:
    """Seconds from the deletion of an object that is gone now, if it was seen being deleted (pure)."""
    if old is None or new is not None:
        return None
    deleted = deletion_time(old)
    return None if deleted is None else max(0.0, now - deleted)


# --- counted on watch updates -----------------------------------------------------------------------------------


def _labelled(metric: Any, values: Sequence[str]) -> Any:
    """The child of `metric` for `values`; the metric itself when it has no labels."""
    return metric.labels(*values) if values else metric


class ObjectSeries:
    """The transition counters and the histograms, per kind and the deprecated ones, with what feeds them."""

    def __init__(self, registry: prometheus_client.CollectorRegistry) -> None:
        self._registry = registry
        self._kinds: dict[resources.Resource, Kind] = {}
        self._transitions: dict[resources.Resource, prometheus_client.Counter] = {}
        self._held: dict[resources.Resource, prometheus_client.Histogram] = {}
        self._terminated: dict[resources.Resource, prometheus_client.Histogram] = {}
        for kind in KINDS:
            self.add(kind)
        # operatorpkg registers the deprecated families with the Go client's default buckets (status/metrics.go)
        self._deprecated = _transition_families(
            NAMESPACE, registry, extra=list(GROUP_KIND), buckets=naming.GO_DEFAULT_BUCKETS
        )

    def add(self, kind: Kind) -> None:
        """Run `kind`'s status controller too: its families are registered, and its objects counted and shown."""
        if kind.resource in self._kinds:
            return  # registered once, as upstream builds each status controller once
        res = kind.resource
        self._kinds[res] = kind
        self._transitions[res], self._held[res], self._terminated[res] = _transition_families(
            kind.prefix, self._registry, extra=kind.extra_labels, buckets=kind.buckets
        )

    def kinds(self) -> tuple[Kind, ...]:
        """The kinds whose status controller runs, in the order they were added."""
        return tuple(self._kinds.values())

    def observe(self, res: resources.Resource, old: Obj, new: Obj, *, now: float) -> None:
        """Count what changed from `old` to `new` (None when absent) of an object of `res`; `now` in epoch s."""
        kind = self._kinds.get(res)
        if kind is None:
            return
        turned = transitions(old, new)
        seconds = termination_seconds(old, new, now=now)
        current = new if new is not None else old
        if current is None or (not turned and seconds is None):
            return  # the common update: nothing to count
        targets = [(self._transitions[res], self._held[res], self._terminated[res], kind.extra_values(current))]
        if kind.deprecated:
            targets.append((*self._deprecated, kind.group_kind()))
        for transition in turned:
            c, held = transition.condition, transition.held_seconds
            for counted, timed, _, values in targets:
                counted.labels(c.type, c.status, c.reason, *values).inc()
                if held is not None and transition.left is not None:
                    timed.labels(transition.left.type, transition.left.status, *values).observe(held)
        if seconds is not None:
            for _, _, terminated, values in targets:
                _labelled(terminated, values).observe(seconds)

    def listener(
        self, *, now: Callable[[], float], leading: Callable[[], bool]
    ) -> Callable[[resources.Resource, Obj, Obj], None]:
        """A `state.Cluster` listener feeding these series while `leading()`: upstream's status controllers run on
        the leader only, and every replica's cache sees every update."""

        def observe(res: resources.Resource, old: Obj, new: Obj) -> None:
            if res in self._kinds and leading():
                self.observe(res, old, new, now=now())

        return observe


def _transition_families(
    prefix: str, registry: prometheus_client.CollectorRegistry, *, extra: list[str], buckets: Sequence[float]
) -> tuple[prometheus_client.Counter, prometheus_client.Histogram, prometheus_client.Histogram]:
    counted = prometheus_client.Counter(
        f"{prefix}_status_condition_transitions",
        "The count of transitions of a given object, type and status.",
        [*TRANSITION, *extra],
        registry=registry,
    )
    held = prometheus_client.Histogram(
        f"{prefix}_status_condition_transition_seconds",
        "The amount of time a condition was in a given state before transitioning. "
        "e.g. Alarm := P99(Updated=False) > 5 minutes",
        [*CONDITION, *extra],
        registry=registry,
        buckets=buckets,
    )
    terminated = prometheus_client.Histogram(
        f"{prefix}_termination_duration_seconds",
        "The amount of time taken by an object to terminate completely.",
        extra,
        registry=registry,
        buckets=buckets,
    )
    return counted, held, terminated


# --- read from the cache at scrape time -------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class _Read:
    """What the gauges show of one object, read once for the per-kind and the deprecated families."""

    where: list[str]
    """namespace, name"""
    conditions: list[tuple[list[str], float | None]]
    """(namespace, name, type, status, reason) of each condition, and its age when its time is known"""
    terminating: float | None
    """seconds since its deletion, None when it is not being deleted"""

    @classmethod
    def of(cls, obj: Mapping[str, Any], *, now: float) -> _Read:
        metadata = _mapping(obj.get("metadata"))
        where = [str(metadata.get("namespace") or ""), str(metadata.get("name") or "")]
        read = []
        for c in conditions(obj).values():
            since = c.last_transition_time
            read.append(([*where, c.type, c.status, c.reason], None if since is None else max(0.0, now - since)))
        deleted = deletion_time(obj)
        return cls(where, read, None if deleted is None else max(0.0, now - deleted))


@dataclasses.dataclass(frozen=True, slots=True)
class _Gauges:
    """The gauges of one prefix, as `textformat.RenderedGauge`s: the render keeps no prometheus_client Sample per
    sample alive (tens of thousands of conditions at 5,000 nodes would bring on a full garbage collection)."""

    count: textformat.RenderedGauge
    current: textformat.RenderedGauge
    terminating: textformat.RenderedGauge
    condition_labels: tuple[str, ...]
    object_labels: tuple[str, ...]

    @classmethod
    def named(cls, prefix: str, extra: Iterable[str]) -> _Gauges:
        extra = tuple(extra)
        return cls(
            textformat.RenderedGauge(
                f"{prefix}_status_condition_count",
                "The number of a condition for a given object, type and status. e.g. Alarm := Available=False > 0",
            ),
            textformat.RenderedGauge(
                f"{prefix}_status_condition_current_status_seconds",
                "The current amount of time in seconds that a status condition has been in a specific state. "
                "Alarm := P99(Updated=Unknown) > 5 minutes",
            ),
            textformat.RenderedGauge(
                f"{prefix}_termination_current_time_seconds",
                "The current amount of time in seconds that an object has been in terminating state.",
            ),
            (*CURRENT, *extra),
            (*OBJECT, *extra),
        )

    def add(self, read: _Read, extra: list[str]) -> None:
        for values, age in read.conditions:
            labels = dict(zip(self.condition_labels, [*values, *extra], strict=True))
            text = textformat.label_text(sorted(labels.items()))
            self.count.add_rendered(labels, text, 1)
            if age is not None:
                self.current.add_rendered(labels, text, age)
        if read.terminating is not None:
            labels = dict(zip(self.object_labels, [*read.where, *extra], strict=True))
            self.terminating.add_rendered(labels, textformat.label_text(sorted(labels.items())), read.terminating)

    def __iter__(self) -> Iterator[prometheus_client_core.Metric]:
        yield from (self.count, self.current, self.terminating)


class ObjectCollector(offloop.DeferringCollector):
    """The condition and deletion gauges of every object of the kinds, parsed or not (upstream's status controller
    reads any object the API server holds), including NodePools being deleted. Its snapshot is the cache's lists of
    the objects; the render reads them (`offloop`)."""

    def __init__(
        self, cluster: state_cluster.Cluster, *, kinds: Callable[[], Iterable[Kind]], now: Callable[[], float]
    ) -> None:
        self._cluster = cluster
        self._kinds = kinds
        self._now = now

    def snapshot(self, reads: offloop.Reads) -> offloop.Render:
        objects = [(kind, self._cluster.objects(kind.resource)) for kind in self._kinds()]
        return functools.partial(_object_gauges, objects, now=self._now())


def _object_gauges(
    objects: Sequence[tuple[Kind, Sequence[Mapping[str, Any]]]], *, now: float
) -> Iterator[prometheus_client_core.Metric]:
    deprecated = _Gauges.named(NAMESPACE, GROUP_KIND)
    for kind, of_kind in objects:
        gauges = _Gauges.named(kind.prefix, kind.extra_labels)
        for obj in of_kind:
            read = _Read.of(obj, now=now)
            gauges.add(read, kind.extra_values(obj))
            if kind.deprecated:
                deprecated.add(read, kind.group_kind())
        yield from gauges
    yield from deprecated
