"""Wiring for reconciler scenario tests: FakeKube + FakeCloudProvider + ManualClock + a recording event sink."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Awaitable, Callable

from tests.nodeclaim import builders as nodeclaim_builders

from karpy import clock as karpy_clock
from karpy import events, rejections
from karpy.api import nodeclaim, parse
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.kube import fake, resources
from karpy.nodeclaim import controller, lifecycle_observer, registration, written
from karpy.state import cluster as state_cluster
from karpy.termination import controller as termination_controller
from karpy.termination import drain
from karpy.termination import observer as termination_observer


class DisruptedLog(nodeclaim.Disruptions):
    """(reason, nodepool, capacity type) of every claim counted disrupted, the keywords left out; mixed into a
    reconciler's own metrics class, it records through the same named method the operator binds."""

    def __init__(self, into: list[tuple[str, str, str]] | None = None) -> None:
        self.calls: list[tuple[str, str, str]] = [] if into is None else into

    def disrupted(self, reason: str, nodepool: str, capacity_type: str, /, **_: object) -> None:
        self.calls.append((reason, nodepool, capacity_type))


class _LifecycleLog(DisruptedLog, lifecycle_observer.Metrics):
    pass


class TerminatedLog(termination_observer.Metrics):
    """(nodepool, zone) of every Node whose finalizer the termination controller released."""

    def __init__(self) -> None:
        self.nodes: list[tuple[str, str]] = []

    def node_terminated(self, nodepool: str, zone: str) -> None:
        self.nodes.append((nodepool, zone))


@dataclasses.dataclass
class Env:
    kube: fake.FakeKubeClient
    cloud: fake_provider.FakeCloudProvider
    clock: karpy_clock.ManualClock
    recorder: events.MemoryRecorder
    disrupted: list[tuple[str, str, str]] = dataclasses.field(default_factory=list)
    """(reason, nodepool, capacity type) of every claim the controller deleted as a disruption."""
    terminated: TerminatedLog = dataclasses.field(default_factory=TerminatedLog)
    """What `termination_deps`' finalizer counts: the Nodes it released."""
    nodeclaim_cache: state_cluster.Cluster = dataclasses.field(init=False)
    """The state cache's NodeClaims, in step with every write to `kube` from the start (`FakeKubeClient.follow`):
    where the finalizer finds the claim of a Node that names no owner."""

    def __post_init__(self) -> None:
        self.nodeclaim_cache = state_cluster.Cluster(clock=self.clock)
        self.kube.follow(self.nodeclaim_cache.apply, resources.NODECLAIMS)
        self.nodeclaim_cache.mark_listed(resources.NODECLAIMS)

    @property
    def deps(self) -> controller.Deps:
        return controller.Deps(
            client=self.kube,
            cloud=self.cloud,
            clock=self.clock,
            observer=lifecycle_observer.Observer(self.recorder, _LifecycleLog(self.disrupted)),
            rejections=rejections.Discard(),
            registration=registration.RegistrationHealth(),
            # the fake's store as the (always synced) state cache
            nodes_for_provider_id=lambda pid: [
                n for n in self.kube.all(resources.NODES) if (n.get("spec") or {}).get("providerID") == pid
            ],
            claims=self.cached_claim,
            own_writes=written.Written(),  # a new controller (a restart) starts with none
            leading_since=lambda: math.inf,  # unknown: any claim may have been launched before (`claims` sets it)
        )

    @property
    def termination_deps(self) -> termination_controller.Deps:
        return self.termination_counted(self.terminated)

    def termination_counted(self, metrics: termination_observer.Metrics) -> termination_controller.Deps:
        """The finalizer's collaborators, its Events on `recorder` and its metrics on `metrics`."""
        observer = termination_observer.Observer(self.recorder, metrics)
        return termination_controller.Deps(
            client=self.kube, cloud=self.cloud, clock=self.clock, observer=observer, rejections=rejections.Discard()
        )

    def terminator(
        self, deps: termination_controller.Deps | None = None, *, backoff: drain.Backoff | None = None
    ) -> termination_controller.TerminationController:
        """A fresh finalizer (no eviction backoff carried over, as after a restart) on `deps` (default
        `termination_deps`) and `nodeclaim_cache`."""
        return termination_controller.TerminationController(
            deps or self.termination_deps, backoff=backoff, claims=self.nodeclaim_cache
        )

    def claims(self, *, leading_since: float = math.inf) -> controller.NodeClaimController:
        """A fresh controller: nothing carried over in memory, as after a restart (leading since `leading_since`)."""
        return controller.NodeClaimController(dataclasses.replace(self.deps, leading_since=lambda: leading_since))

    def claim_obj(self, name: str) -> dict[str, object] | None:
        return self.kube.obj(resources.NODECLAIMS, name)

    def cached_claim(self, name: str) -> nodeclaim.NodeClaim | None:
        """The claim as an always-synced state cache holds it: the fake's stored object through the cache's parser
        (None when it is gone or does not parse; the cache, not the reconciler, reports that)."""
        raw = self.kube.obj(resources.NODECLAIMS, name)
        return None if raw is None else rejections.parse_or_report(parse.nodeclaim, resources.NODECLAIMS, raw, None)


def make_env() -> Env:
    clock = karpy_clock.ManualClock(nodeclaim_builders.T0)
    return Env(
        kube=fake.FakeKubeClient(clock),
        cloud=fake_provider.FakeCloudProvider(),
        clock=clock,
        recorder=events.MemoryRecorder(clock),
    )


async def drive(
    step: Callable[[], Awaitable[float | None]],
    env: Env,
    *,
    until: Callable[[], bool],
    limit: float = 3600.0,
) -> float:
    """Reconcile, advance virtual time by the requested requeue, repeat until `until()`; returns virtual seconds.

    A pass that wrote to the API counts as an event (a watch would trigger the next reconcile at once). Raises
    AssertionError when the reconciler goes idle with nothing written (or `limit` passes) first.
    """
    clock = env.clock
    start = clock.now()
    while not until():
        writes = len(env.kube.writes)
        result = await step()
        if until():
            break
        if result is None:
            if len(env.kube.writes) != writes:
                continue
            raise AssertionError("reconciler is idle but the condition does not hold")
        if clock.now() - start > limit:
            raise AssertionError(f"condition still false after {limit} virtual seconds")
        clock.advance(max(result, 0.0))
    return clock.now() - start
