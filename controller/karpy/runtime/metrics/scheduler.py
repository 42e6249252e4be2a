"""Provisioning and scheduler series: solve duration, unschedulable and ignored pods, pending pods by effective
zone (core: pkg/controllers/provisioning/scheduling/metrics.go), pod bound and startup durations from creation and
from the provisioner's first placement (core: pkg/controllers/metrics/pod/controller.go), the time to a pod's first
scheduling decision (core: pkg/controllers/state/metrics.go), and the provisioner's hooks."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import prometheus_client
from prometheus_client import registry as prometheus_client_registry

from karpy.provisioning import provisioner
from karpy.runtime.metrics import lifecycle, naming, scrape

PROVISIONER: Final = "provisioner"
"""The `controller` label of the scheduler series the provisioner feeds (upstream's controller name)."""


class SchedulerSeries:
    """The provisioner's scheduler series and the pod bound/startup durations, and the hooks that feed them."""

    def __init__(self, registry: prometheus_client_registry.CollectorRegistry) -> None:
        r, ns = registry, naming.NAMESPACE
        self.scheduling_duration = prometheus_client.Histogram(
            f"{ns}_scheduler_scheduling_duration_seconds",
            "Duration of scheduling simulations used for deprovisioning and provisioning in seconds",
            ["controller"],
            buckets=naming.DURATION_BUCKETS,
            registry=r,
        )
        self.ignored_pods = prometheus_client.Gauge(
            f"{ns}_scheduler_ignored_pods_count",
            "Pending pods the last provisioning pass refused outright (unsupported constraints, DRA requests)",
            registry=r,
        )
        self.unschedulable_pods = prometheus_client.Gauge(
            f"{ns}_scheduler_unschedulable_pods_count",
            "Pods the last provisioning pass could not place",
            ["controller"],
            registry=r,
        )
        self.pending_by_effective_zone = prometheus_client.Gauge(
            f"{ns}_scheduler_pending_pods_by_effective_zone_count",
            "Pending pods by effective zone: the intersection of their zone requirement, their volumes' zones and "
            "their zonal topology constraints at the start of the last solve; a zone name, 'flexible' (several "
            "zones) or 'none' (no zone)",
            ["controller", "zone"],
            registry=r,
        )
        self._zones_reported: dict[str, set[str]] = {}
        """controller -> the zones it last reported, removed when its next solve has no pod there."""
        self.pods_bound_duration = prometheus_client.Histogram(
            f"{ns}_pods_bound_duration_seconds",
            "The time from pod creation until the pod is bound",
            buckets=naming.DURATION_BUCKETS,
            registry=r,
        )
        self.pods_startup_duration = prometheus_client.Summary(
            f"{ns}_pods_startup_duration_seconds",
            "The time from pod creation until the pod is running",
            registry=r,
        )
        self.pods_provisioning_bound_duration = prometheus_client.Histogram(
            f"{ns}_pods_provisioning_bound_duration_seconds",
            "The time from when the provisioner first found the pod a place until it was bound",
            buckets=naming.DURATION_BUCKETS,
            registry=r,
        )
        self.pods_provisioning_startup_duration = prometheus_client.Histogram(
            f"{ns}_pods_provisioning_startup_duration_seconds",
            "The time from when the provisioner first found the pod a place until the pod was running",
            buckets=naming.DURATION_BUCKETS,
            registry=r,
        )
        self.pods_scheduling_decision_duration = prometheus_client.Histogram(
            f"{ns}_pods_scheduling_decision_duration_seconds",
            "The time from the provisioner first seeing a pending pod until its first scheduling decision",
            buckets=naming.DURATION_BUCKETS,
            registry=r,
        )

    def report_effective_zones(self, controller: str, counts: Mapping[str, int]) -> None:
        """`controller`'s last solve's pending pods per effective zone, in place of its previous counts."""
        for zone in self._zones_reported.get(controller, set()) - counts.keys():
            self.pending_by_effective_zone.remove(controller, zone)
        for zone, count in counts.items():
            self.pending_by_effective_zone.labels(controller=controller, zone=zone).set(count)
        self._zones_reported[controller] = set(counts)

    def hooks(self, claims: lifecycle.LifecycleSeries, solves: scrape.InFlightSolves) -> provisioner.Metrics:
        """The provisioner's metrics; the NodeClaims it creates are counted on `claims`, its solves on `solves`."""
        return _Hooks(self, claims, solves)


class _Hooks(provisioner.Metrics):
    """`provisioner.Metrics` on the series, labelled controller=provisioner."""

    def __init__(
        self, series: SchedulerSeries, claims: lifecycle.LifecycleSeries, solves: scrape.InFlightSolves
    ) -> None:
        self._series = series
        self._claims = claims
        self._solves = solves

    def scheduling_duration(self, seconds: float) -> None:
        self._series.scheduling_duration.labels(controller=PROVISIONER).observe(seconds)

    def nodeclaim_created(self, pool: str, min_values_relaxed: bool) -> None:
        self._claims.nodeclaim_created(pool, min_values_relaxed)

    def nodeclaim_create_failed(self, pool: str, reason: str) -> None:
        self._claims.nodeclaim_create_failed(pool, reason)

    def pods_unschedulable(self, count: int) -> None:
        self._series.unschedulable_pods.labels(controller=PROVISIONER).set(count)

    def pods_ignored(self, count: int) -> None:
        self._series.ignored_pods.set(count)

    def solve_started(self, scheduling_id: str, pods: int, start: float) -> None:
        self._solves.started(PROVISIONER, scheduling_id, pods=pods, start=start)

    def solve_finished(self, scheduling_id: str) -> None:
        self._solves.finished(scheduling_id)

    def pending_by_effective_zone(self, counts: Mapping[str, int]) -> None:
        self._series.report_effective_zones(PROVISIONER, counts)

    def pod_decided(self, seconds: float) -> None:
        self._series.pods_scheduling_decision_duration.observe(seconds)
