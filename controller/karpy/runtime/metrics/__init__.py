"""Prometheus metrics with upstream Karpenter's names, on a registry of our own (never the process-global one).

`Metrics` owns the registry and hands each reconciler its hooks; the series live in one module per area:
`scheduler` (provisioning), `disruption`, `lifecycle` (NodeClaims and nodes), `interruption`, `cloudprovider`,
`queues` (workqueue and controller-runtime), `operatorpkg` (the `operator_*` condition and termination series,
counted on watch updates), and the scrape-time collectors `cluster`, `nodes`, `scrape` and `operatorpkg`'s, which read
the state cache when Prometheus scrapes, so they can never drift from what the controller decides on. Nothing here
decides anything: the hooks only count what the reconcilers and the watches report. `scrape` serves an HTTP scrape
without holding the event loop for the render (`offloop`).
"""

from __future__ import annotations

import platform
from collections.abc import Callable, Sequence
from typing import Final

import prometheus_client

import karpy
from karpy import clock as karpy_clock
from karpy import rejections
from karpy.cloudprovider import metered, types
from karpy.cloudprovider import parts as cloudprovider_parts
from karpy.disruption import metrics as disruption_metrics
from karpy.interruption import observer as interruption_observer
from karpy.kube import resources
from karpy.nodeclaim import conditions_controller, expiration, lifecycle_observer, repair
from karpy.provisioning import provisioner
from karpy.runtime.metrics import (
    cloudprovider,
    cluster,
    disruption,
    interruption,
    lifecycle,
    naming,
    nodes,
    offloop,
    operatorpkg,
    scheduler,
    scrape,
    textformat,
)
from karpy.state import cluster as state_cluster
from karpy.termination import observer as termination_observer

LEADER_LEASE: Final = "karpy-leader-election"
"""Default `name` label of leader_election_master_status: the Lease karpy elects on (LEADER_ELECTION_NAME)."""


class Metrics:
    """The controller's registry and the hooks that feed it."""

    def __init__(self, *, lease_name: str = LEADER_LEASE) -> None:
        self.lease_name = lease_name
        self.registry = offloop.Registry()
        self._scrapes = offloop.Scrapes(self.registry)
        self.prices = cloudprovider.PriceBook()
        self.catalog = scrape.CatalogBook()
        self.solves = scrape.InFlightSolves()
        r = self.registry
        self.lifecycle = lifecycle.LifecycleSeries(r)
        self.scheduler = scheduler.SchedulerSeries(r)
        self.cloudprovider = cloudprovider.CloudProviderSeries(r)
        self.disruption = disruption.DisruptionSeries(r)
        self.interruption = interruption.InterruptionSeries(r)
        self.objects = operatorpkg.ObjectSeries(r)
        # the hooks callers count with directly (the wiring's observers, tests)
        self.nodeclaim_created = self.lifecycle.nodeclaim_created
        self.nodeclaim_create_failed = self.lifecycle.nodeclaim_create_failed
        self.nodeclaim_disrupted = self.lifecycle.nodeclaim_disrupted
        self.nodeclaim_terminated = self.lifecycle.nodeclaim_terminated
        self.node_created = self.lifecycle.node_created
        self.node_terminated = self.lifecycle.node_terminated
        self.disruption_decision = self.disruption.decision
        self.objects_rejected = prometheus_client.Counter(
            "karpy_objects_rejected",
            "Objects karpy cannot handle and leaves alone, once per object and problem: invalid (does not parse) "
            "or handling_failed (handling it raised)",
            ["kind", "reason"],
            registry=r,
        )
        self.leader = prometheus_client.Gauge("karpy_leader", "1 while this replica holds the leader Lease", registry=r)
        self.leader_election = prometheus_client.Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 master",
            ["name"],
            registry=r,
        )
        build_info = prometheus_client.Gauge(
            f"{naming.NAMESPACE}_build_info",
            "A metric with a constant '1' value labeled by version from which karpy was built",
            ["version", "goversion", "goarch", "commit"],
            registry=r,
        )
        # upstream's labels; goversion carries the Python runtime, the language this build runs on
        build_info.labels(
            version=karpy.__version__, goversion=f"python{platform.python_version()}",
            goarch=platform.machine(), commit="",
        ).set(1)  # fmt: skip

    def watch_state(self, source: state_cluster.Cluster) -> None:
        self.registry.register(cluster.StateCollector(source, price=self.prices.price, listed=self.prices.listed))

    def watch_cluster_series(
        self, state: state_cluster.Cluster, *, now: Callable[[], float], pod_times: nodes.PodTimes | None = None
    ) -> None:
        """Budgets and operatorpkg's condition and deletion gauges from the state cache, the instance-type gauges
        from the last listing; the pod provisioning gauges from `pod_times` (the provisioner's record) when given."""
        self.registry.register(scrape.BudgetCollector(state, now=now))
        self.registry.register(operatorpkg.ObjectCollector(state, kinds=self.objects.kinds, now=now))
        self.registry.register(nodes.NodeSeriesCollector(state, now=now, pod_times=pod_times))
        self.registry.register(self.solves.collector(now=now))
        self.registry.register(self.catalog)

    def watch_objects(self, kind: operatorpkg.Kind) -> None:
        """Run operatorpkg's status controller for a gated `kind` too (its `operator_<kind>_*` series)."""
        self.objects.add(kind)

    def object_listener(
        self, *, now: Callable[[], float], leading: Callable[[], bool]
    ) -> Callable[[resources.Resource, operatorpkg.Obj, operatorpkg.Obj], None]:
        """The `state.Cluster` listener counting operatorpkg's condition transitions and deletion durations."""
        return self.objects.listener(now=now, leading=leading)

    def instance_types_listed(self, instance_types: Sequence[types.InstanceType]) -> None:
        """A NodePool's catalog as the provider listed it: prices for costs, shapes and offerings for gauges."""
        self.prices.update(instance_types)
        self.catalog.update(instance_types)

    def pod_bound(self, seconds: float) -> None:
        self.scheduler.pods_bound_duration.observe(seconds)

    def pod_started(self, seconds: float) -> None:
        self.scheduler.pods_startup_duration.observe(seconds)

    def pod_provisioning_bound(self, seconds: float) -> None:
        self.scheduler.pods_provisioning_bound_duration.observe(seconds)

    def pod_provisioning_started(self, seconds: float) -> None:
        self.scheduler.pods_provisioning_startup_duration.observe(seconds)

    def metered(
        self, provider: types.CloudProvider, controller: str, *, clock: karpy_clock.Clock
    ) -> metered.MeteredProvider:
        """`provider` as `controller` calls it, timed and its errors counted (the cloudprovider series)."""
        return self.cloudprovider.metered(provider, controller, clock=clock)

    def watch_cloud_calls(self, source: cloudprovider_parts.CloudCalls) -> None:
        self.registry.register(cloudprovider.CloudCallCollector(source))

    def exposition(self) -> bytes:
        """The exposition, rendered on the calling thread (tests, tools); the /metrics server awaits `scrape`."""
        return textformat.render(self.registry)

    async def scrape(self) -> bytes:
        """The exposition for one HTTP scrape: snapshot on the loop, render in a worker thread (`offloop.Scrapes`)."""
        return await self._scrapes.scrape()

    # --- hooks --------------------------------------------------------------------------------------------------

    def drift_hooks(self) -> conditions_controller.Metrics:
        return self.lifecycle.drift_hooks()

    def expiry_hooks(self) -> expiration.Metrics:
        return self.lifecycle.expiry_hooks()

    def repair_hooks(self) -> repair.Metrics:
        return self.lifecycle.repair_hooks()

    def nodeclaim_hooks(self) -> lifecycle_observer.Metrics:
        return self.lifecycle.nodeclaim_hooks()

    def termination_hooks(self) -> termination_observer.Metrics:
        return self.lifecycle.termination_hooks()

    def disruption_hooks(self) -> disruption_metrics.Metrics:
        return self.disruption.hooks(self.lifecycle)

    def provisioner_hooks(self) -> provisioner.Metrics:
        return self.scheduler.hooks(self.lifecycle, self.solves)

    def interruption_hooks(self) -> interruption_observer.Metrics:
        return self.interruption.hooks(self.lifecycle)

    def rejection_hooks(self) -> rejections.Metrics:
        return _RejectionHooks(self.objects_rejected)

    def set_leader(self, leading: bool) -> None:
        self.leader.set(1 if leading else 0)
        self.leader_election.labels(name=self.lease_name).set(1 if leading else 0)


class _RejectionHooks(rejections.Metrics):
    def __init__(self, counter: prometheus_client.Counter) -> None:
        self._counter = counter

    def rejected(self, kind: str, reason: str) -> None:
        self._counter.labels(kind=kind, reason=reason).inc()
