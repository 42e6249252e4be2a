"""The NodeClaim disruption-conditions reconciler: table tests of the pure decisions (pod events, instance-type
drift) and scenarios on the real `state.Cluster` fed from the in-memory API (`tests.disruption.world`), with the
fake cloud provider and virtual time."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import functools
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests import builders, hypothesis_profiles, polling, tasks
from tests.disruption import world as disruption_world

from karpy import clock as karpy_clock
from karpy.api import decoding, labels
from karpy.cloudprovider import errors as cloudprovider_errors
from karpy.cloudprovider import types
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.kube import client, credentials, dryrun, resources, rest
from karpy.nodeclaim import conditions_controller, disruption_conditions, roles, written
from karpy.state import cluster as state_cluster
from karpy.state import informer
from karpy_emulator.apiserver import runner, server

T0 = disruption_world.T0
NOW = 1_700_010_000.0
ts = decoding.format_timestamp


# --- pod_event_time ------------------------------------------------------------------------------------------------


on_n0 = functools.partial(builders.pod, node="n0", phase="Running")
PENDING = builders.unschedulable(builders.pod())
DAEMON_OWNER = {"kind": "DaemonSet", "name": "ds", "controller": True}


def scheduled_at(at: float) -> dict[str, Any]:
    """A pod status whose PodScheduled condition turned True at `at`."""
    return {"conditions": [builders.condition("PodScheduled", lastTransitionTime=ts(at))]}


BOUND_AT = NOW - 30


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        pytest.param(
            PENDING, on_n0(status=scheduled_at(BOUND_AT)), BOUND_AT, id="bind: the PodScheduled transition time"
        ),
        pytest.param(None, on_n0(status=scheduled_at(BOUND_AT)), BOUND_AT, id="first sight of a bound pod (list)"),
        pytest.param(
            on_n0(status=scheduled_at(BOUND_AT)),
            on_n0(status=scheduled_at(BOUND_AT)),
            None,
            id="status churn, same binding",
        ),
        pytest.param(
            on_n0(status=scheduled_at(BOUND_AT)),
            on_n0(status=scheduled_at(BOUND_AT + 5)),
            BOUND_AT + 5,
            id="re-scheduled",
        ),
        pytest.param(
            on_n0(status=scheduled_at(BOUND_AT)),
            on_n0(status=scheduled_at(BOUND_AT), phase="Succeeded"),
            NOW,
            id="turns terminal",
        ),
        pytest.param(
            on_n0(status=scheduled_at(BOUND_AT)), on_n0(status=scheduled_at(BOUND_AT), phase="Failed"), NOW, id="fails"
        ),
        pytest.param(
            on_n0(status=scheduled_at(BOUND_AT)),
            builders.deleting(on_n0(status=scheduled_at(BOUND_AT)), at=ts(NOW)),
            NOW,
            id="starts terminating",
        ),
        pytest.param(
            builders.deleting(on_n0(), at=ts(NOW)),
            builders.deleting(on_n0(phase="Succeeded"), at=ts(NOW)),
            None,
            id="already leaving",
        ),
        pytest.param(on_n0(status=scheduled_at(BOUND_AT)), None, NOW, id="vanishes while running: leaves"),
        pytest.param(on_n0(phase="Succeeded"), None, None, id="deleted after terminal (counted then)"),
        pytest.param(builders.deleting(on_n0(), at=ts(NOW)), None, None, id="deleted after terminating (counted then)"),
        pytest.param(PENDING, on_n0(), NOW, id="bound without a PodScheduled time: now"),
        pytest.param(None, on_n0(), None, id="listed bound pod without a time: unknown, not now"),
        pytest.param(PENDING, PENDING, None, id="still pending: no node"),
        pytest.param(
            None, on_n0(status=scheduled_at(BOUND_AT), owners=[DAEMON_OWNER]), None, id="daemonset pods never count"
        ),
        pytest.param(on_n0(owners=[DAEMON_OWNER]), None, None, id="daemonset pod deleted"),
        pytest.param(None, None, None, id="nothing"),
        pytest.param(
            on_n0(), on_n0(phase="Running"), None, id="bound before and after, no PodScheduled time: no event"
        ),
        pytest.param(
            PENDING,
            on_n0(
                status={
                    "phase": "Pending",
                    "conditions": [builders.condition("PodScheduled", "False", lastTransitionTime=ts(BOUND_AT))],
                }
            ),
            NOW,
            id="a False PodScheduled does not date the bind",
        ),
    ],
)
def test_pod_event_time(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None, expected: float | None) -> None:
    event = disruption_conditions.pod_event_time(old, new, now=NOW + 0.7)  # sub-second part dropped: status has seconds
    assert (event.at if event is not None else None) == expected
    if event is not None:
        assert event.node_name == "n0"


# --- instance-type drift -------------------------------------------------------------------------------------------


C4_ON_DEMAND = {
    labels.LABEL_INSTANCE_TYPE: "c4",
    labels.LABEL_ZONE: disruption_world.ZONE,
    labels.LABEL_CAPACITY_TYPE: labels.CAPACITY_TYPE_ON_DEMAND,
}


_C4 = disruption_world.instance_type("c4", 4, 0.2, 0.08)
C4_SPOT_ONLY = types.InstanceType(
    name="c4",
    labels=_C4.labels,
    capacity=_C4.capacity,
    offerings=tuple(o for o in _C4.offerings if o.capacity_type == labels.CAPACITY_TYPE_SPOT),
)
C4_EXHAUSTED = types.InstanceType(
    name="c4",
    labels=_C4.labels,
    capacity=_C4.capacity,
    offerings=tuple(
        types.Offering(zone=disruption_world.ZONE, capacity_type=ct, price=0.2, available=False)
        for ct in (labels.CAPACITY_TYPE_ON_DEMAND, labels.CAPACITY_TYPE_SPOT)
    ),
)


@pytest.mark.parametrize(
    ("claim_labels", "catalog", "missing"),
    [
        pytest.param({}, disruption_world.CATALOG, False, id="type and offering present"),
        pytest.param({}, [t for t in disruption_world.CATALOG if t.name != "c4"], True, id="type gone"),
        pytest.param({}, [], True, id="empty catalogue"),
        pytest.param({labels.LABEL_INSTANCE_TYPE: ""}, disruption_world.CATALOG, True, id="claim has no instance type"),
        pytest.param({}, [C4_SPOT_ONLY], True, id="on-demand offering gone"),
        pytest.param({labels.LABEL_CAPACITY_TYPE: "spot"}, [C4_SPOT_ONLY], False, id="spot claim, spot offering"),
        pytest.param({labels.LABEL_ZONE: "test-zone-9"}, disruption_world.CATALOG, True, id="zone gone"),
        pytest.param({}, [C4_EXHAUSTED], False, id="unavailable (ICE) is not gone"),
        pytest.param({labels.LABEL_ZONE: ""}, disruption_world.CATALOG, False, id="no zone label: any zone"),
    ],
)
def test_instance_type_missing(claim_labels: dict[str, str], catalog: list[types.InstanceType], missing: bool) -> None:
    claim_labels = {k: v for k, v in {**C4_ON_DEMAND, **claim_labels}.items() if v}  # "" leaves the label out
    claim = builders.parsed_nodeclaim("c", labels=claim_labels, created=ts(T0), requirements=[])
    assert disruption_conditions.instance_type_missing(claim, catalog) is missing


@pytest.mark.parametrize(
    ("now", "last_check", "due"),
    [
        (T0 + 60, None, 3540.0),  # young: not before an hour
        (T0 + 3600, None, 0.0),
        (T0 + 7200, T0 + 6000, 600.0),  # checked 20 min ago: 10 more
        (T0 + 7200, T0 + 5400, 0.0),
    ],
)
def test_instance_type_check_due(now: float, last_check: float | None, due: float) -> None:
    claim = builders.parsed_nodeclaim("c", labels=C4_ON_DEMAND, created=ts(T0), requirements=[])
    assert disruption_conditions.instance_type_check_due(claim, now=now, last_check=last_check) == due


# --- scenarios -----------------------------------------------------------------------------------------------------


class _DriftLog(conditions_controller.Metrics):
    """(drift reason, nodepool) of every claim the reconciler found drifted."""

    def __init__(self, into: list[tuple[str, str]]) -> None:
        self._into = into

    def drifted(self, reason: str, nodepool: str) -> None:
        self._into.append((reason, nodepool))


class Env:
    """A World whose Cluster informs the controller of pod changes, as the operator wires it."""

    def __init__(self, *, after: str = "10m") -> None:
        self.w = disruption_world.World()
        self.w.pool(after=after)
        self.drifted: list[tuple[str, str]] = []
        self.ctrl = conditions_controller.NodeClaimConditionsController(
            roles.ClusterRoles(client=self.w.kube, cluster=self.w.cluster, clock=self.w.clock),
            self.w.cloud,
            metrics=_DriftLog(self.drifted),
            own_writes=written.Written(),
        )
        self.w.cluster.add_listener(self.ctrl.observe)

    @property
    def now(self) -> float:
        return self.w.clock.now()

    def node(self, name: str = "n0", *, initialized_at: float | None = None, created: float | None = None) -> None:
        self.w.node(name, conditions=())
        obj = self.claim_obj(name)
        if initialized_at is not None:
            for c in obj["status"]["conditions"]:
                c["lastTransitionTime"] = ts(initialized_at)
        if created is not None:
            obj["metadata"]["creationTimestamp"] = ts(created)
        self.w.sync()

    def claim_obj(self, name: str = "n0") -> dict[str, Any]:
        obj = self.w.kube.obj(resources.NODECLAIMS, name)
        assert obj is not None
        return obj

    def condition(self, type_: str, name: str = "n0") -> dict[str, Any] | None:
        found = [c for c in self.claim_obj(name)["status"].get("conditions", ()) if c["type"] == type_]
        return found[0] if found else None

    def drift_reason(self, name: str = "n0") -> str | None:
        """The reason of a True Drifted condition, None when the claim is not drifted."""
        found = self.condition("Drifted", name)
        return found["reason"] if found is not None and found["status"] == "True" else None

    def update_pod(self, name: str, change: Callable[[dict[str, Any]], None]) -> None:
        """Replace the pod with a changed copy (a watch delivers new objects; the cache keeps the old one)."""
        obj = copy.deepcopy(self.w.kube.objects[("pods", "default", name)])
        change(obj)
        self.w.kube.put(resources.PODS, obj)

    def status_writes(self) -> int:
        return sum(1 for w in self.w.kube.writes if w.subresource == "status")

    async def reconcile(self, name: str = "n0") -> float | None:
        self.w.sync()
        return await self.ctrl.reconcile(name)


async def test_consolidatable_flips_exactly_after_consolidate_after() -> None:
    env = Env(after="2m")  # shorter than the 5 min drift requeue, so the flip time is the requeue
    env.node(initialized_at=env.now)
    assert await env.reconcile() == 120
    assert env.condition("Consolidatable") is None
    env.w.clock.advance(119)
    assert await env.reconcile() == pytest.approx(1)
    assert env.condition("Consolidatable") is None
    assert env.status_writes() == 0  # nothing changed yet: nothing written
    env.w.clock.advance(1)
    await env.reconcile()
    consolidatable = env.condition("Consolidatable")
    assert consolidatable is not None
    assert consolidatable["status"] == "True"


async def test_consolidate_after_never_clears_the_condition() -> None:
    env = Env(after="Never")
    env.w.node("n0")  # built with Consolidatable=True
    env.w.sync()
    assert await env.reconcile() == disruption_conditions.DRIFT_REQUEUE
    assert env.condition("Consolidatable") is None


async def test_a_pod_binding_moves_last_pod_event_time_and_resets_consolidatable() -> None:
    env = Env(after="2m")
    env.node(initialized_at=env.now - 3600)
    await env.reconcile()
    assert env.condition("Consolidatable") is not None
    bound_at = env.now - 5
    env.w.pod("web", "n0")
    env.w.kube.objects[("pods", "default", "web")]["status"]["conditions"].append(
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": ts(bound_at)}
    )
    requeue = await env.reconcile()  # sync() feeds the pod through the Cluster listener
    obj = env.claim_obj()
    assert obj["status"]["lastPodEventTime"] == ts(bound_at)
    assert env.condition("Consolidatable") is None
    assert requeue == pytest.approx(115)  # consolidateAfter (2 min) after the bind


async def test_pod_churn_is_written_at_most_every_spacing_and_never_lost() -> None:
    env = Env(after="1h")
    env.node(initialized_at=env.now - 7200)
    env.w.pod("a", "n0")
    await env.reconcile()  # Consolidatable: True (first write)
    writes = env.status_writes()
    env.update_pod("a", lambda p: p["status"].update(phase="Succeeded"))
    first_leave = env.now
    await env.reconcile()  # Consolidatable goes False: written at once with the pod time
    assert env.status_writes() == writes + 1
    assert env.claim_obj()["status"]["lastPodEventTime"] == ts(first_leave)
    env.w.clock.advance(3)
    env.w.pod("b", "n0")
    env.w.sync()
    env.update_pod("b", lambda p: p["metadata"].update(deletionTimestamp=ts(env.now)))
    requeue = await env.reconcile()  # only the time moved, 3 s after the last write: deferred
    assert env.status_writes() == writes + 1
    assert requeue == pytest.approx(conditions_controller.POD_EVENT_SPACING - 3)
    env.w.clock.advance(requeue or 0)
    await env.reconcile()
    assert env.status_writes() == writes + 2
    assert env.claim_obj()["status"]["lastPodEventTime"] == ts(first_leave + 3)


async def test_nodepool_template_change_drifts_with_nodepool_drifted() -> None:
    env = Env()
    env.node()
    await env.reconcile()
    assert env.condition("Drifted") is None
    pool = env.w.kube.obj(resources.NODEPOOLS, "default")
    assert pool is not None
    pool["spec"]["template"]["metadata"] = {"labels": {"team": "a"}}  # a hashed template field
    await env.reconcile()
    assert env.drift_reason() == "NodePoolDrifted"


@pytest.mark.parametrize(
    "stamp",
    [
        {labels.ANNOTATION_NODEPOOL_HASH_VERSION: "v0-not-current"},  # stamped by another hash version
        {labels.ANNOTATION_NODEPOOL_HASH_VERSION: None},  # no version: nothing to compare with
        {labels.ANNOTATION_NODEPOOL_HASH: None},  # no hash at all
    ],
    ids=["other-version", "no-version", "no-hash"],
)
async def test_a_claim_whose_hash_cannot_be_compared_is_not_nodepool_drifted(stamp: dict[str, str | None]) -> None:
    """A hash version bump must not drift every node (core: nodeclaim/disruption/drift.go compares hashes only
    under the same hash version); after the template change the stale hash differs, yet nothing drifts."""
    env = Env()
    env.node()
    annotations = env.claim_obj()["metadata"]["annotations"]
    for key, value in stamp.items():
        if value is None:
            del annotations[key]
        else:
            annotations[key] = value
    pool = env.w.kube.obj(resources.NODEPOOLS, "default")
    assert pool is not None
    pool["spec"]["template"]["metadata"] = {"labels": {"team": "a"}}  # a hashed template field
    await env.reconcile()
    assert env.drift_reason() is None
    assert env.drifted == []


async def test_requirement_change_drifts_with_requirements_drifted() -> None:
    env = Env()
    env.node()
    env.w.pool(capacity_types=("spot",))
    await env.reconcile()
    assert env.drift_reason() == "RequirementsDrifted"


async def test_provider_drift_is_written_and_cleared() -> None:
    env = Env()
    env.node()
    env.w.cloud.drifted = types.DriftReason.AMI
    assert await env.reconcile() == disruption_conditions.DRIFT_REQUEUE
    assert env.drift_reason() == "AMIDrift"
    await env.reconcile()
    assert env.drifted == [("AMIDrift", "default")]  # counted when it became drifted, not on every pass
    env.w.cloud.drifted = None
    await env.reconcile()
    assert env.condition("Drifted") is None


async def test_provider_errors_keep_the_current_drift_verdict() -> None:
    env = Env()
    env.node()
    env.w.cloud.drifted = types.DriftReason.SUBNET
    await env.reconcile()
    writes = env.status_writes()

    async def failing(claim: object) -> None:
        raise cloudprovider_errors.NodeClaimNotFound("gone for now")

    env.w.cloud.is_drifted = failing  # type: ignore[method-assign]
    await env.reconcile()
    assert env.drift_reason() == "SubnetDrift"
    assert env.status_writes() == writes


async def test_unlaunched_claims_are_never_drifted() -> None:
    env = Env()
    env.node()
    obj = env.claim_obj()
    obj["status"]["conditions"] = [c for c in obj["status"]["conditions"] if c["type"] != "Launched"]
    env.w.cloud.drifted = types.DriftReason.AMI
    await env.reconcile()
    assert env.condition("Drifted") is None


async def test_removed_instance_type_drifts_only_after_an_hour() -> None:
    env = Env()
    env.node(created=env.now)
    env.w.cloud.catalog = [t for t in disruption_world.CATALOG if t.name != "c4"]  # the claim runs on c4
    created = env.now
    assert await env.reconcile() == disruption_conditions.DRIFT_REQUEUE
    env.w.clock.set(created + 59 * 60)
    requeue = await env.reconcile()
    assert env.condition("Drifted") is None
    assert requeue == pytest.approx(60)  # wakes for the first catalogue check at one hour
    env.w.clock.set(created + 3600)
    await env.reconcile()
    assert env.drift_reason() == "InstanceTypeNotFound"


async def test_instance_type_check_runs_every_thirty_minutes() -> None:
    env = Env()
    env.node(created=env.now - 7200)
    calls = 0
    inner = env.w.cloud.instance_types

    async def counting(pool: Any) -> Any:
        nonlocal calls
        calls += 1
        return await inner(pool)

    env.w.cloud.instance_types = counting  # type: ignore[method-assign]
    await env.reconcile()
    assert calls == 1
    env.w.cloud.catalog = []  # gone, but not re-listed before 30 minutes
    for _ in range(5):
        env.w.clock.advance(disruption_conditions.DRIFT_REQUEUE)
        await env.reconcile()
    assert calls == 1
    assert env.drift_reason() is None
    env.w.clock.advance(disruption_conditions.DRIFT_REQUEUE)  # 30 min since the check
    await env.reconcile()
    assert calls == 2
    assert env.drift_reason() == "InstanceTypeNotFound"


async def test_static_drift_wins_over_provider_drift() -> None:
    env = Env()
    env.node()
    env.w.cloud.drifted = types.DriftReason.AMI
    env.w.pool(capacity_types=("spot",))
    await env.reconcile()
    assert env.drift_reason() == "RequirementsDrifted"


async def test_no_write_when_nothing_changed() -> None:
    env = Env()
    env.node()
    env.w.cloud.drifted = types.DriftReason.AMI
    await env.reconcile()
    writes = env.status_writes()
    assert writes == 1  # Consolidatable and Drifted in one write
    for _ in range(3):
        env.w.clock.advance(disruption_conditions.DRIFT_REQUEUE)
        await env.reconcile()
    assert env.status_writes() == writes


async def test_a_stale_read_conflicts_instead_of_clobbering() -> None:
    env = Env()
    env.node()
    reads: list[str] = []
    real_get = env.w.kube.get

    async def counted(res: resources.Resource, name: str, *, namespace: str = "") -> dict[str, Any] | None:
        reads.append(name)
        return await real_get(res, name, namespace=namespace)

    env.w.kube.get = counted  # type: ignore[method-assign]
    env.w.kube.put(resources.NODECLAIMS, env.claim_obj())  # someone else writes; the cache has not seen it: new rv
    assert await env.ctrl.reconcile("n0") == conditions_controller.CONFLICT_RETRY
    assert env.condition("Consolidatable") is None  # nothing was written over the newer object
    assert reads == []  # the claim came from the state cache, as upstream's informer read
    assert await env.reconcile("n0") is not None  # once the watch delivered it, the write lands
    assert env.condition("Consolidatable") is not None


async def test_a_cache_older_than_our_own_write_is_waited_for_not_written_again() -> None:
    env = Env()
    env.node()
    env.w.cloud.drifted = types.DriftReason.AMI
    await env.reconcile()
    assert env.status_writes() == 1
    # The provider no longer reports drift, but the cache still lacks our write (its watch event has not come): a
    # write now would be computed from the claim before it, and be refused (409) for its stale resourceVersion.
    env.w.cloud.drifted = None
    requests = len(env.w.kube.writes)
    assert await env.ctrl.reconcile("n0") is None
    assert len(env.w.kube.writes) == requests
    assert env.drift_reason() == "AMIDrift"
    env.w.sync()  # caught up: the change is written, once
    await env.ctrl.reconcile("n0")
    assert env.status_writes() == 2
    assert env.drift_reason() is None


async def test_a_write_of_the_lifecycle_is_waited_for_through_the_shared_record() -> None:
    env = Env()
    env.node()
    shared = written.Written()
    ctrl = conditions_controller.NodeClaimConditionsController(
        roles.ClusterRoles(client=env.w.kube, cluster=env.w.cluster, clock=env.w.clock),
        env.w.cloud,
        metrics=_DriftLog(env.drifted),
        own_writes=shared,
    )
    # The lifecycle reconciler wrote the claim (it records what that write returned); the cache has not seen it.
    shared.record(await env.w.kube.patch(resources.NODECLAIMS, "n0", {"metadata": {"labels": {"seen": "yes"}}}))
    assert await ctrl.reconcile("n0") is None
    assert env.status_writes() == 0
    env.w.sync()
    await ctrl.reconcile("n0")
    assert env.status_writes() == 1


async def test_deleting_missing_or_poolless_claims_are_left_alone() -> None:
    env = Env()
    env.node("n0")
    env.w.node("orphan")
    env.claim_obj("orphan")["metadata"]["labels"][labels.LABEL_NODEPOOL] = "gone"
    env.w.sync()
    assert await env.ctrl.reconcile("nope") is None
    assert await env.ctrl.reconcile("orphan") is None
    env.claim_obj()["metadata"]["deletionTimestamp"] = ts(env.now)
    env.w.sync()
    assert await env.ctrl.reconcile("n0") is None
    assert env.status_writes() == 0


async def test_run_marks_consolidatable_on_time_and_follows_pool_changes_and_pod_events() -> None:
    env = Env(after="10m")
    env.node(initialized_at=env.now)
    for res in disruption_world.SYNCED:
        env.w.cluster.mark_listed(res)
    async with tasks.running(env.ctrl.run):
        await env.w.clock.run_for(599)
        assert env.condition("Consolidatable") is None
        await env.w.clock.run_for(2)
        assert env.condition("Consolidatable") is not None
        pool = env.w.kube.obj(resources.NODEPOOLS, "default")
        assert pool is not None
        pool["spec"]["template"]["metadata"] = {"labels": {"team": "b"}}
        env.w.kube.put(resources.NODEPOOLS, pool)  # new resourceVersion, as a watch would deliver
        env.w.sync()
        await env.w.clock.run_for(2)  # a pool change is picked up on the next pass, not after 5 min
        assert env.drift_reason() == "NodePoolDrifted"
        bound_at = env.now
        env.w.pod("web", "n0")
        env.update_pod(
            "web",
            lambda p: p["status"]["conditions"].append(
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": ts(bound_at)}
            ),
        )
        env.w.sync()  # the listener hears the bind; the next pass writes it
        await env.w.clock.run_for(2)
        assert env.claim_obj()["status"]["lastPodEventTime"] == ts(bound_at)
        assert env.condition("Consolidatable") is None


async def test_run_rechecks_drift_when_the_node_class_changes_not_only_at_the_requeue() -> None:
    env = Env()
    env.node()
    nodeclass = builders.ec2nodeclass("default")
    nodeclass["metadata"]["resourceVersion"] = "1"
    env.w.cluster.apply(resources.EC2NODECLASSES, client.WatchEvent(client.ADDED, nodeclass))
    for res in disruption_world.SYNCED:
        env.w.cluster.mark_listed(res)
    async with tasks.running(env.ctrl.run):
        await env.w.clock.run_for(2)
        assert env.condition("Drifted") is None
        env.w.cloud.drifted = types.DriftReason.AMI  # e.g. the class's status found a newer image
        await env.w.clock.run_for(2)
        assert env.condition("Drifted") is None  # nothing changed that the loop watches: next look at the requeue
        changed = copy.deepcopy(nodeclass)
        changed["metadata"]["resourceVersion"] = "2"
        changed["status"] = {"amis": [{"id": "ami-newer", "name": "newer", "requirements": []}]}
        env.w.sync()  # the watch has delivered the controller's own writes: the claim it reads is current
        env.w.cluster.apply(resources.EC2NODECLASSES, client.WatchEvent(client.MODIFIED, changed))
        await env.w.clock.run_for(2)
        assert env.drift_reason() == "AMIDrift"  # on the next pass, not 5 min later


async def test_a_transport_failure_costs_the_claim_a_backoff_not_the_loop() -> None:
    env = Env()
    env.node()
    for res in disruption_world.SYNCED:
        env.w.cluster.mark_listed(res)
    real = env.w.cloud.is_drifted
    timeouts: list[object] = []

    async def times_out_once(claim: object) -> types.DriftReason | None:
        if not timeouts:
            timeouts.append(claim)
            raise TimeoutError("the API server did not answer")  # what an overloaded one does
        return await real(claim)  # type: ignore[arg-type]

    env.w.cloud.is_drifted = times_out_once  # type: ignore[method-assign]
    env.w.cloud.drifted = types.DriftReason.AMI
    async with tasks.running(env.ctrl.run) as loop:
        await env.w.clock.run_for(conditions_controller.ERROR_BACKOFF + 2)
        assert not loop.done()
        assert timeouts
        assert env.drift_reason() == "AMIDrift"  # retried after the backoff


def test_observe_ignores_other_resources_and_keeps_the_latest_time() -> None:
    env = Env()
    env.ctrl.observe(resources.NODES, None, on_n0(status=scheduled_at(BOUND_AT)))
    assert env.ctrl.pending_pod_event("n0") is None
    env.ctrl.observe(resources.PODS, None, on_n0(status=scheduled_at(BOUND_AT)))
    env.ctrl.observe(
        resources.PODS, None, on_n0(status=scheduled_at(BOUND_AT - 100))
    )  # an older bind does not move it back
    assert env.ctrl.pending_pod_event("n0") == BOUND_AT


# --- on the emulated API server --------------------------------------------------------------------------------------


async def test_on_the_emulator_pod_bind_consolidation_and_drift_through_informers() -> None:
    """RestClient + informers + the kmock-based API server: guarded status writes are accepted, the bind seen by the
    informer dates lastPodEventTime, a no-op pass writes nothing, and dry-run writes nothing."""
    manual = karpy_clock.ManualClock(NOW)
    async with (
        runner.KubeAPIRunner(server.FakeKubeAPI(seed=5, clock=manual.now)) as served,
        rest.RestClient(credentials.bearer(served.url, "t"), clock=karpy_clock.SystemClock()) as api,
    ):
        pool = builders.nodepool(
            template={
                "spec": {
                    "nodeClassRef": {"group": labels.AWS_GROUP, "kind": "EC2NodeClass", "name": "default"},
                    "requirements": [{"key": labels.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["on-demand"]}],
                }
            },
            disruption={"consolidateAfter": "2m"},
        )
        await api.create(resources.NODEPOOLS, pool)
        claim = builders.nodeclaim("default-x")
        claim["metadata"]["labels"].update(
            {labels.LABEL_CAPACITY_TYPE: "on-demand", labels.LABEL_INSTANCE_TYPE: "c4", labels.LABEL_ZONE: "z"}
        )
        await api.create(resources.NODECLAIMS, claim)
        launched = [disruption_world.cond(t, at=NOW - 3600) for t in ("Launched", "Registered", "Initialized")]
        status = {"status": {"providerID": "fake://z/i-1", "nodeName": "n1", "conditions": launched}}
        await api.patch(resources.NODECLAIMS, "default-x", status, subresource="status")
        await api.create(resources.NODES, builders.node("n1", provider_id="fake://z/i-1"))
        await api.create(resources.PODS, builders.pod("web"))

        state = state_cluster.Cluster(clock=manual)
        cloud = fake_provider.FakeCloudProvider(list(disruption_world.CATALOG))
        ctrl = conditions_controller.NodeClaimConditionsController(
            roles.ClusterRoles(client=api, cluster=state, clock=manual),
            cloud,
            metrics=conditions_controller.Metrics(),
            own_writes=written.Written(),
        )
        state.add_listener(ctrl.observe)
        informed = (resources.NODEPOOLS, resources.NODECLAIMS, resources.NODES, resources.PODS)
        task = asyncio.create_task(informer.run_informers(api, state, informed))
        try:
            await polling.until(state.synced)
            await polling.until(lambda: state.nodeclaim("default-x") is not None)
            await ctrl.reconcile("default-x")
            got = await api.get(resources.NODECLAIMS, "default-x")
            assert got is not None
            assert {c["type"] for c in got["status"]["conditions"]} >= {"Consolidatable"}

            manual.advance(30)
            await api.bind(builders.NS, "web", "n1")  # PodScheduled=True at the emulator's (virtual) now
            await polling.until(lambda: ctrl.pending_pod_event("n1") == NOW + 30)
            assert await ctrl.reconcile("default-x") == pytest.approx(120)
            got = await api.get(resources.NODECLAIMS, "default-x")
            assert got is not None
            assert got["status"]["lastPodEventTime"] == ts(NOW + 30)
            assert "Consolidatable" not in {c["type"] for c in got["status"]["conditions"]}
            assert got["status"]["providerID"] == "fake://z/i-1"  # the rest of status survives the write

            manual.advance(120)
            cloud.drifted = types.DriftReason.AMI
            await ctrl.reconcile("default-x")
            got = await api.get(resources.NODECLAIMS, "default-x")
            assert got is not None
            by_type = {c["type"]: c for c in got["status"]["conditions"]}
            assert by_type["Consolidatable"]["status"] == "True"
            assert by_type["Drifted"]["reason"] == "AMIDrift"

            version = got["metadata"]["resourceVersion"]
            await ctrl.reconcile("default-x")  # nothing changed: no write
            cloud.drifted = None
            dry = conditions_controller.NodeClaimConditionsController(
                roles.ClusterRoles(client=dryrun.DryRunClient(api), cluster=state, clock=manual),
                cloud,
                metrics=conditions_controller.Metrics(),
                own_writes=written.Written(),
            )
            await dry.reconcile("default-x")  # would clear Drifted, but only logs it
            got = await api.get(resources.NODECLAIMS, "default-x")
            assert got is not None
            assert got["metadata"]["resourceVersion"] == version
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


async def test_a_pod_event_seen_during_the_write_stays_pending() -> None:
    env = Env(after="1h")
    env.node(initialized_at=env.now - 7200)
    env.ctrl.observe(resources.PODS, None, on_n0(status=scheduled_at(env.now - 20)))
    real_patch = env.w.kube.patch

    async def patch_while_a_pod_binds(*args: Any, **kwargs: Any) -> dict[str, Any]:
        env.ctrl.observe(resources.PODS, None, on_n0(status=scheduled_at(env.now - 10)))  # arrives while we write
        return await real_patch(*args, **kwargs)

    env.w.kube.patch = patch_while_a_pod_binds  # type: ignore[method-assign]
    await env.ctrl.reconcile("n0")
    assert env.claim_obj()["status"]["lastPodEventTime"] == ts(env.now - 20)
    assert env.ctrl.pending_pod_event("n0") == env.now - 10  # not settled by the older write


def test_pod_events_of_nodes_without_a_claim_are_dropped() -> None:
    env = Env()
    env.node("n0")
    env.ctrl.observe(resources.PODS, None, on_n0(node="n0", status=scheduled_at(BOUND_AT)))
    env.ctrl.observe(resources.PODS, None, on_n0(node="someone-elses", status=scheduled_at(BOUND_AT)))
    assert env.ctrl.route_pod_events(env.w.cluster.nodeclaims()) == {"n0"}
    assert env.ctrl.pending_pod_event("someone-elses") is None
    assert env.ctrl.pending_pod_event("n0") == BOUND_AT


# --- law: the written conditions follow a reference model ---------------------------------------------------------

_AFTER = 120.0
_ops = st.lists(
    st.one_of(
        # steps around the 10 s write spacing and the 120 s consolidateAfter, so runs cross both often
        st.tuples(st.just("advance"), st.sampled_from([1, 9, 60, 130])),
        st.tuples(st.just("bind"), st.integers(min_value=0, max_value=1)),
        st.tuples(st.just("finish"), st.integers(min_value=0, max_value=1)),
        st.tuples(st.just("drift"), st.sampled_from([None, types.DriftReason.AMI, types.DriftReason.SUBNET])),
        st.tuples(st.just("reconcile"), st.just(0)),
    ),
    max_size=25,
)


@settings(max_examples=hypothesis_profiles.examples(60), deadline=None)
@given(ops=_ops)
def test_written_conditions_follow_the_reference_model(ops: list[tuple[str, Any]]) -> None:
    """After every reconcile: Consolidatable iff consolidateAfter passed since the latest pod event (or the
    Initialized transition); Drifted carries the provider's current reason; status.lastPodEventTime never runs ahead
    of the model and lags it only inside the write spacing; an immediate second reconcile writes nothing."""

    async def scenario() -> None:
        env = Env(after="2m")
        env.node(initialized_at=env.now)
        latest = env.now  # what Consolidatable counts from: the Initialized transition, then the latest pod event
        pod_event: float | None = None  # the model's status.lastPodEventTime
        bound: set[int] = set()
        last_write: float | None = None
        for op, arg in ops:
            if op == "advance":
                env.w.clock.advance(arg)
            elif op == "bind" and arg not in bound:
                bound.add(arg)
                env.w.pod(f"p{arg}", "n0")
                env.update_pod(
                    f"p{arg}",
                    lambda p: p["status"]["conditions"].append(
                        {"type": "PodScheduled", "status": "True", "lastTransitionTime": ts(env.now)}
                    ),
                )
                latest = pod_event = env.now
            elif op == "finish" and arg in bound:
                bound.discard(arg)
                env.update_pod(f"p{arg}", lambda p: p["status"].update(phase="Succeeded"))
                latest = pod_event = env.now
            elif op == "drift":
                env.w.cloud.drifted = arg
            env.w.sync()  # a watch delivers each change at once
            if op != "reconcile":
                continue
            writes = env.status_writes()
            await env.ctrl.reconcile("n0")
            if env.status_writes() > writes:
                last_write = env.now
            assert (env.condition("Consolidatable") is not None) == (env.now - latest >= _AFTER)
            assert env.drift_reason() == (str(env.w.cloud.drifted) if env.w.cloud.drifted else None)
            written = env.claim_obj()["status"].get("lastPodEventTime")
            if written != (ts(pod_event) if pod_event is not None else None):  # lagging: only inside the spacing
                assert last_write is not None
                assert env.now - last_write < conditions_controller.POD_EVENT_SPACING
            env.w.sync()
            writes = env.status_writes()
            await env.ctrl.reconcile("n0")
            assert env.status_writes() == writes

    asyncio.run(scenario())


async def test_removing_the_last_condition_is_persisted() -> None:
    env = Env(after="Never")
    env.w.node("n0", conditions=())
    obj = env.claim_obj()
    obj["status"]["conditions"] = [disruption_world.cond("Consolidatable")]  # nothing else: the list must become empty
    env.w.sync()
    await env.reconcile()
    assert env.claim_obj()["status"]["conditions"] == []
    writes = env.status_writes()
    await env.reconcile()
    assert env.status_writes() == writes
