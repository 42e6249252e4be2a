"""Scenario tests of the NodeClaim lifecycle reconciler, including one test per crash point."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import logging
from typing import Any

import pytest
from tests import logtext
from tests.nodeclaim import builders as nodeclaim_builders
from tests.nodeclaim import harness

from karpy.api import labels, parse
from karpy.cloudprovider import errors as cloudprovider_errors
from karpy.kube import fake, resources
from karpy.nodeclaim import controller, lifecycle_observer

NAME = "default-abc12"


def _claim(env: harness.Env) -> Any:
    raw = env.claim_obj(NAME)
    assert raw is not None
    return parse.nodeclaim(raw)


def _condition(env: harness.Env, type_: str) -> tuple[str, str]:
    found = _claim(env).condition(type_)
    assert found is not None, type_
    return found.status, found.reason


def _add_node(env: harness.Env, *, ready: bool = False, name: str = "ip-10-0-0-1") -> None:
    pid = _claim(env).status.provider_id
    env.kube.put(resources.NODES, nodeclaim_builders.node_dict(name, provider_id=pid, ready=ready))


def _set_ready(env: harness.Env, name: str = "ip-10-0-0-1") -> None:
    node = env.kube.obj(resources.NODES, name)
    assert node is not None
    node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]


def _node_writes(env: harness.Env) -> list[fake.Write]:
    return [w for w in env.kube.writes if w.plural == "nodes" and w.verb == "patch"]


async def test_launch_register_initialize(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="karpy.nodeclaim.controller")
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    ctl = env.claims()

    result = await ctl.reconcile(NAME)
    claim = _claim(env)
    assert labels.FINALIZER_TERMINATION in claim.metadata.finalizers
    assert claim.status.provider_id in env.cloud.instances
    assert claim.metadata.labels[labels.LABEL_INSTANCE_TYPE]  # the instance's labels came back
    assert claim.status.allocatable["cpu"] > 0
    assert _condition(env, "Launched") == ("True", "Launched")
    assert _condition(env, "Registered") == ("Unknown", "NodeNotFound")
    assert result == controller.POLL

    _add_node(env)
    await ctl.reconcile(NAME)
    node = env.kube.obj(resources.NODES, "ip-10-0-0-1")
    assert node is not None
    assert node["metadata"]["labels"][labels.LABEL_REGISTERED] == "true"
    assert node["metadata"]["labels"][labels.LABEL_NODEPOOL] == "default"
    assert node["metadata"]["finalizers"] == [labels.FINALIZER_TERMINATION]
    assert node["metadata"]["ownerReferences"][0]["name"] == NAME
    assert node["spec"]["taints"] == []
    assert _claim(env).status.node_name == "ip-10-0-0-1"
    assert _condition(env, "Registered") == ("True", "Registered")
    assert _condition(env, "Initialized") == ("False", "NodeNotReady")

    _set_ready(env)
    result = await ctl.reconcile(NAME)
    assert _condition(env, "Initialized") == ("True", "Initialized")
    assert env.kube.obj(resources.NODES, "ip-10-0-0-1")["metadata"]["labels"][labels.LABEL_INITIALIZED] == "true"  # type: ignore[index]
    # Initialized: nothing left to wake for (expiry is the expiry controller's).
    assert result is None
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["launched nodeclaim", "registered nodeclaim", "initialized nodeclaim"]

    writes = len(env.kube.writes)
    await env.claims().reconcile(NAME)  # steady state: nothing to write
    assert len(env.kube.writes) == writes
    assert len(env.cloud.create_calls) == 1


async def test_registration_finds_the_node_in_the_state_cache_not_by_a_list() -> None:
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    listed: list[resources.Resource] = []
    list_from_api = env.kube.list

    async def counted_list(res: resources.Resource, **kwargs: Any) -> Any:
        listed.append(res)
        return await list_from_api(res, **kwargs)

    env.kube.list = counted_list  # type: ignore[method-assign]
    cached: list[dict[str, Any]] = []
    ctl = controller.NodeClaimController(
        dataclasses.replace(
            env.deps, nodes_for_provider_id=lambda pid: [n for n in cached if n["spec"].get("providerID") == pid]
        )
    )
    await ctl.reconcile(NAME)
    _add_node(env)  # in the API server, not yet in the cache: the claim waits for its watch event
    await ctl.reconcile(NAME)
    assert _condition(env, "Registered") == ("Unknown", "NodeNotFound")
    cached.extend(env.kube.all(resources.NODES))
    await ctl.reconcile(NAME)
    assert _condition(env, "Registered") == ("True", "Registered")
    assert resources.NODES not in listed  # one LIST of every Node per claim is O(claims x nodes) at scale


@pytest.mark.parametrize(
    ("error", "reason", "label"),
    [
        (
            cloudprovider_errors.InsufficientCapacity("no capacity"),
            "InsufficientCapacityError",
            "insufficient_capacity",
        ),
        (cloudprovider_errors.NodeClassNotReady("no AMI"), "NodeClassNotReady", "nodeclass_not_ready"),
    ],
)
async def test_capacity_and_node_class_errors_delete_the_claim(
    error: Exception, reason: str, label: str, caplog: pytest.LogCaptureFixture
) -> None:
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    env.cloud.next_error = error
    await harness.drive(lambda: env.claims().reconcile(NAME), env, until=lambda: env.claim_obj(NAME) is None)
    e = env.recorder.events[0]
    assert (e.kind, e.name, e.type, e.reason) == ("NodeClaim", NAME, "Warning", reason)
    assert env.cloud.instances == {}
    assert env.disrupted == [(label, "default", "")]  # upstream's reason label; no capacity type before launch
    (failed,) = logtext.starting(caplog, "launching nodeclaim failed")
    assert logtext.plain(failed) == f"launching nodeclaim failed: {type(error).__name__}: {error}"


async def test_other_launch_errors_retry_until_the_launch_timeout(caplog: pytest.LogCaptureFixture) -> None:
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    env.cloud.allowed_creates = 0
    ctl = env.claims()
    attempts: list[float] = []
    create = env.cloud.create

    async def recording_create(claim: Any, *, adopt: bool = False) -> Any:
        attempts.append(env.clock.now())
        return await create(claim, adopt=adopt)

    env.cloud.create = recording_create  # type: ignore[method-assign]
    result = await ctl.reconcile(NAME)
    assert _condition(env, "Launched") == ("False", "InternalError")
    assert result == controller.LAUNCH_RETRY_MIN
    (failed,) = logtext.starting(caplog, "launching nodeclaim failed")
    assert logtext.plain(failed).startswith("launching nodeclaim failed: CreateError: InternalError: ")
    env.clock.advance(result)
    took = await harness.drive(lambda: ctl.reconcile(NAME), env, until=lambda: env.claim_obj(NAME) is None)
    assert took == 299  # deleted once Launched stayed False for 5 min (from the first failure)
    assert env.disrupted == [("launch_timeout", "default", "")]
    # Retries back off: after 0, 1, 2, 4, 8, 16, 32, 64 s, then every minute until the timeout.
    assert [round(t - nodeclaim_builders.T0) for t in attempts] == [
        0,
        1,
        2,
        4,
        8,
        16,
        32,
        64,
        124,
        184,
        244,
    ]  # none at 300


async def test_registration_timeout_deletes_claim_and_terminates_instance() -> None:
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    ctl = env.claims()
    took = await harness.drive(lambda: ctl.reconcile(NAME), env, until=lambda: env.claim_obj(NAME) is None)
    assert 900 <= took <= 900 + controller.POLL
    assert env.cloud.instances == {}  # finalizer terminated the instance before letting go
    assert env.disrupted == [("registration_timeout", "default", "on-demand")]


async def test_termination_timestamp_annotation_on_deletion() -> None:
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME, termination_grace_period="1h"))
    ctl = env.claims()
    await ctl.reconcile(NAME)
    env.clock.advance(10)
    await env.kube.delete(resources.NODECLAIMS, NAME)
    await ctl.reconcile(NAME)
    ann = _claim(env).metadata.annotations[labels.ANNOTATION_NODECLAIM_TERMINATION_TIMESTAMP]
    assert ann == nodeclaim_builders.ts(nodeclaim_builders.T0 + 10 + 3600)


async def test_finalizer_waits_for_the_node_then_terminates() -> None:
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    ctl = env.claims()
    await ctl.reconcile(NAME)
    _add_node(env, ready=True)
    await ctl.reconcile(NAME)
    await env.kube.delete(resources.NODECLAIMS, NAME)
    result = await ctl.reconcile(NAME)
    node = env.kube.obj(resources.NODES, "ip-10-0-0-1")
    assert node is not None
    assert node["metadata"]["deletionTimestamp"]  # deletion requested; its finalizer drains
    assert result == controller.FINALIZE_POLL
    assert env.cloud.delete_calls == []  # never before the Node is gone
    await ctl.reconcile(NAME)
    assert env.cloud.delete_calls == []
    node["metadata"]["finalizers"] = []
    del env.kube.objects[("nodes", "", "ip-10-0-0-1")]  # the termination controller finished
    await harness.drive(lambda: ctl.reconcile(NAME), env, until=lambda: env.claim_obj(NAME) is None)
    assert env.cloud.instances == {}


# --- crash points -----------------------------------------------------------------------------------------------


def _status_write_with_provider_id(w: fake.Write) -> bool:
    return w.subresource == "status" and bool(w.body["status"].get("providerID"))


async def test_crash_between_create_and_status_write_adopts_the_instance_after_a_restart() -> None:
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    env.kube.crash_on = _status_write_with_provider_id
    with pytest.raises(fake.Crash):
        await env.claims(leading_since=nodeclaim_builders.T0 - 60).reconcile(NAME)
    assert len(env.cloud.instances) == 1  # launched, but nobody knows
    env.kube.crash_on = None
    env.clock.advance(15)  # the lease expires; the new leader's term begins after the claim was created
    restarted = env.claims(leading_since=env.clock.now())
    await restarted.reconcile(NAME)
    assert [c.name for c in env.cloud.create_calls] == [NAME, NAME]
    assert list(env.cloud.instances) == [_claim(env).status.provider_id]  # the first launch's instance, taken over
    await restarted.collect_garbage()
    env.clock.advance(31)
    await restarted.collect_garbage()
    assert list(env.cloud.instances) == [_claim(env).status.provider_id]


@pytest.mark.parametrize(
    ("term_began", "age", "adopt"),
    [
        (-60.0, 0.0, False),  # created by this leader, this term, never launched: no lookup
        (-60.0, controller.LAUNCH_MEMORY - 1, False),  # launched by this process it would be remembered still
        (-60.0, controller.LAUNCH_MEMORY, True),  # older than the launch memory: a launch may have been forgotten
        (0.0, 0.0, True),  # created when the term began: perhaps by the previous leader
        (controller.CLOCK_SKEW, 0.0, True),  # within the clocks' skew of the term's start
        (-controller.CLOCK_SKEW - 1, 0.0, False),
    ],
)
async def test_a_launch_looks_for_an_earlier_ones_instance_only_when_one_may_exist(
    term_began: float, age: float, adopt: bool
) -> None:
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    env.clock.advance(age)
    asked: list[bool] = []
    create = env.cloud.create

    async def recording_create(claim: Any, *, adopt: bool = False) -> Any:
        asked.append(adopt)
        return await create(claim, adopt=adopt)

    env.cloud.create = recording_create  # type: ignore[method-assign]
    await env.claims(leading_since=nodeclaim_builders.T0 + term_began).reconcile(NAME)
    assert asked == [adopt]
    assert _claim(env).status.provider_id


async def test_crash_between_status_and_label_write_restores_labels() -> None:
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    env.kube.crash_on = lambda w: (
        w.verb == "patch" and w.plural == "nodeclaims" and "labels" in (w.body.get("metadata") or {})
    )
    with pytest.raises(fake.Crash):
        await env.claims().reconcile(NAME)
    assert labels.LABEL_INSTANCE_TYPE not in _claim(env).metadata.labels
    await env.claims().reconcile(NAME)
    claim = _claim(env)
    assert claim.metadata.labels == {
        **claim.metadata.labels,
        **env.cloud.instances[claim.status.provider_id].metadata.labels,
    }
    assert len(env.cloud.create_calls) == 1  # no second launch


async def test_crash_between_node_sync_and_registered_status() -> None:
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    await env.claims().reconcile(NAME)
    _add_node(env)
    env.kube.crash_on = lambda w: w.subresource == "status" and w.body["status"].get("nodeName") == "ip-10-0-0-1"
    with pytest.raises(fake.Crash):
        await env.claims().reconcile(NAME)
    assert len(_node_writes(env)) == 1  # node synced (label registered, no unregistered taint)
    await env.claims().reconcile(NAME)
    assert _condition(env, "Registered") == ("True", "Registered")  # the invariant check accepts a synced node
    assert len(_node_writes(env)) == 1  # and did not patch it again


async def test_crash_between_initialized_label_and_status() -> None:
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    await env.claims().reconcile(NAME)
    _add_node(env, ready=True)
    env.kube.crash_on = lambda w: (
        w.subresource == "status"
        and any(c["type"] == "Initialized" and c["status"] == "True" for c in w.body["status"].get("conditions", ()))
    )
    with pytest.raises(fake.Crash):
        await env.claims().reconcile(NAME)
    await env.claims().reconcile(NAME)
    assert _condition(env, "Initialized") == ("True", "Initialized")


async def test_crash_before_finalizer_add_launches_nothing() -> None:
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    env.kube.crash_on = lambda w: w.plural == "nodeclaims" and "finalizers" in (w.body.get("metadata") or {})
    with pytest.raises(fake.Crash):
        await env.claims().reconcile(NAME)
    assert env.cloud.create_calls == []
    await env.claims().reconcile(NAME)
    assert len(env.cloud.instances) == 1


async def test_crash_after_instance_delete_before_instance_terminating_condition() -> None:
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    await env.claims().reconcile(NAME)
    await env.kube.delete(resources.NODECLAIMS, NAME)
    env.kube.crash_on = lambda w: w.subresource == "status"
    with pytest.raises(fake.Crash):
        await env.claims().reconcile(NAME)
    assert env.cloud.instances == {}
    await env.claims().reconcile(NAME)  # cloud answers NotFound: the finalizer goes
    assert env.claim_obj(NAME) is None


async def test_crash_before_finalizer_removal() -> None:
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    await env.claims().reconcile(NAME)
    await env.kube.delete(resources.NODECLAIMS, NAME)
    await env.claims().reconcile(NAME)  # instance deleted, InstanceTerminating=True
    assert _condition(env, "InstanceTerminating") == ("True", "InstanceTerminating")
    env.kube.crash_on = lambda w: w.plural == "nodeclaims" and "finalizers" in (w.body.get("metadata") or {})
    with pytest.raises(fake.Crash):
        await env.claims().reconcile(NAME)
    await env.claims().reconcile(NAME)
    assert env.claim_obj(NAME) is None
    assert env.cloud.instances == {}


async def test_claim_removed_without_finalizer_leaves_instance_to_gc() -> None:
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    ctl = env.claims()
    await ctl.reconcile(NAME)
    del env.kube.objects[("nodeclaims", "", NAME)]  # someone stripped the finalizer and deleted it
    await ctl.collect_garbage()
    assert len(env.cloud.instances) == 1  # still inside the 30 s grace
    env.clock.advance(31)
    await ctl.collect_garbage()
    assert env.cloud.instances == {}


async def test_instance_gone_outside_karpy_deletes_registered_claim() -> None:
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    ctl = env.claims()
    await ctl.reconcile(NAME)
    _add_node(env, ready=True)
    await ctl.reconcile(NAME)
    env.cloud.instances.clear()  # terminated in the console
    await ctl.collect_garbage()
    raw = env.claim_obj(NAME)
    assert raw is not None
    assert raw["metadata"]["deletionTimestamp"]  # type: ignore[index]
    assert "GarbageCollected" in env.recorder.reasons()


async def test_gc_loop_runs_fast_then_slow() -> None:
    env = harness.make_env()
    ctl = env.claims()
    calls: list[float] = []

    async def counting() -> None:
        calls.append(env.clock.now())
        if len(calls) == 1:
            raise TimeoutError("the API server did not answer")  # a transport failure does not end the loop

    ctl.collect_garbage = counting  # type: ignore[method-assign]
    task = asyncio.create_task(ctl.run_garbage_collection())
    try:
        await env.clock.run_for(20 * 10 + 2 * 120)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    gaps = [round(b_ - a) for a, b_ in itertools.pairwise(calls)]
    assert gaps == [10] * 19 + [120, 120]


async def test_reserved_capacity_whose_reservation_ended_is_relabelled_on_demand() -> None:
    """aws: capacityreservation/capacitytype: the cloud now reports the instance on-demand, so the claim and its
    Node lose `reserved` and the reservation's labels; nothing else about them changes."""
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    ctl = env.claims()
    await ctl.reconcile(NAME)
    _add_node(env, ready=True)
    await ctl.reconcile(NAME)
    reserved = {
        labels.LABEL_CAPACITY_TYPE: "reserved",
        labels.LABEL_CAPACITY_RESERVATION_ID: "cr-1",
        labels.LABEL_CAPACITY_RESERVATION_TYPE: "default",
        labels.LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE: "false",
    }
    for obj in (env.claim_obj(NAME), env.kube.obj(resources.NODES, "ip-10-0-0-1")):
        assert obj is not None
        obj["metadata"]["labels"].update(reserved)  # type: ignore[index]
    (pid,) = env.cloud.instances
    instance = env.cloud.instances[pid]
    env.cloud.instances[pid] = dataclasses.replace(
        instance,
        metadata=dataclasses.replace(instance.metadata, labels={**instance.metadata.labels, **reserved}),
    )
    before = len(env.kube.writes)
    await ctl.collect_garbage()
    assert len(env.kube.writes) == before  # the cloud still says reserved: nothing to do

    # The reservation ended: EC2 runs the instance on as on-demand.
    on_demand = {**instance.metadata.labels, labels.LABEL_CAPACITY_TYPE: "on-demand"}
    env.cloud.instances[pid] = dataclasses.replace(
        instance, metadata=dataclasses.replace(instance.metadata, labels=on_demand)
    )
    await ctl.collect_garbage()
    for obj in (env.claim_obj(NAME), env.kube.obj(resources.NODES, "ip-10-0-0-1")):
        assert obj is not None
        got = obj["metadata"]["labels"]  # type: ignore[index]
        assert got[labels.LABEL_CAPACITY_TYPE] == "on-demand"
        assert not set(got) & {k for k in reserved if k != labels.LABEL_CAPACITY_TYPE}
    writes = len(env.kube.writes)
    await ctl.collect_garbage()
    assert len(env.kube.writes) == writes  # once


async def test_a_node_without_the_unregistered_taint_warns_on_its_nodeclaim() -> None:
    """Upstream's Warning UnregisteredTaintMissing (core: nodeclaim/lifecycle/registration.go), on the claim."""
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    await env.claims().reconcile(NAME)
    provider_id = _claim(env).status.provider_id
    env.kube.put(resources.NODES, nodeclaim_builders.node_dict("ip-10-0-0-1", provider_id=provider_id, taints=()))
    await env.claims().reconcile(NAME)
    warned = [
        (e.kind, e.name, e.type, e.message) for e in env.recorder.events if e.reason == "UnregisteredTaintMissing"
    ]
    assert warned == [("NodeClaim", NAME, "Warning", lifecycle_observer.UNREGISTERED_TAINT_MISSING_MESSAGE)]


async def test_a_failed_status_write_after_a_launch_writes_that_launch_again() -> None:
    # The API server failed the write of the providerID (5xx, reset): the next reconcile of the same controller
    # writes the instance it already has, instead of launching a second one (core: lifecycle/launch.go's cache).
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    env.kube.crash_on = _status_write_with_provider_id
    claims = env.claims()
    with pytest.raises(fake.Crash):
        await claims.reconcile(NAME)
    (first,) = env.cloud.instances
    await claims.reconcile(NAME)
    assert list(env.cloud.instances) == [first]
    assert _claim(env).status.provider_id == first
    # Remembered for a minute only: a claim whose write never lands is left to garbage collection and liveness.
    env.clock.advance(controller.LAUNCH_MEMORY)
    assert claims._remembered(_claim(env)) is None
