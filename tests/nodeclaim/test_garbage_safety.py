"""What garbage collection must never destroy, through the reconciler with the fake provider: the instance of a claim
that is still draining, a claim whose instance a lagging list() misses, a claim liveness still owns."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest
from tests.nodeclaim import builders as nodeclaim_builders
from tests.nodeclaim import harness

from karpy.api import nodeclaim, parse
from karpy.cloudprovider import errors as cloudprovider_errors
from karpy.kube import resources

NAME = "default-abc12"


async def _registered(env: harness.Env, name: str = NAME, node: str = "ip-10-0-0-1") -> str:
    """Launch a claim, register its node (Ready), and return the instance's provider id."""
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(name))
    await env.claims().reconcile(name)
    raw = env.claim_obj(name)
    assert raw is not None
    pid = parse.nodeclaim(raw).status.provider_id
    env.kube.put(resources.NODES, nodeclaim_builders.node_dict(node, provider_id=pid, ready=True))
    await env.claims().reconcile(name)
    assert parse.nodeclaim(env.claim_obj(name) or {}).is_true(nodeclaim.REGISTERED)
    return pid


def _deleting(env: harness.Env, name: str = NAME) -> bool:
    raw = env.claim_obj(name)
    return raw is None or bool(raw["metadata"].get("deletionTimestamp"))


async def test_the_instance_of_a_claim_still_draining_is_not_collected() -> None:
    env = harness.make_env()
    pid = await _registered(env)
    await env.kube.delete(resources.NODECLAIMS, NAME)
    await env.claims().reconcile(NAME)  # the finalizer deletes the Node, whose own finalizer now drains it
    node = env.kube.obj(resources.NODES, "ip-10-0-0-1")
    assert node is not None
    assert node["metadata"]["deletionTimestamp"]
    ctl = env.claims()
    for _ in range(10):  # ten minutes of draining, well past the 30 s grace of an unclaimed instance
        env.clock.advance(60)
        await ctl.collect_garbage()
    assert pid in env.cloud.instances
    assert env.cloud.delete_calls == []
    assert env.claim_obj(NAME) is not None  # still held by its finalizer


async def test_a_claim_the_cloud_list_misses_is_kept_while_get_still_finds_its_instance() -> None:
    env = harness.make_env()
    pid = await _registered(env)
    listed = env.cloud.list

    async def lagging() -> Sequence[nodeclaim.NodeClaim]:
        return [i for i in await listed() if i.status.provider_id != pid]

    env.cloud.list = lagging  # type: ignore[method-assign]
    await env.claims().collect_garbage()
    assert pid in env.cloud.get_calls  # confirmed with get() before deciding
    assert not _deleting(env)
    assert "GarbageCollected" not in env.recorder.reasons()
    env.cloud.instances.clear()  # now it is really gone
    await env.claims().collect_garbage()
    assert _deleting(env)
    assert "GarbageCollected" in env.recorder.reasons()


async def test_a_claim_not_yet_registered_is_left_to_liveness() -> None:
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    await env.claims().reconcile(NAME)  # launched, no node yet
    env.cloud.instances.clear()
    env.clock.advance(120)
    await env.claims().collect_garbage()
    assert not _deleting(env)
    assert env.recorder.reasons() == []


async def test_a_claim_still_found_by_get_does_not_end_the_pass() -> None:
    env = harness.make_env()
    lagging = await _registered(env, "a-lagging", "ip-10-0-0-1")
    gone = await _registered(env, "b-gone", "ip-10-0-0-2")
    listed = env.cloud.list

    async def lagging_list() -> Sequence[nodeclaim.NodeClaim]:
        return [i for i in await listed() if i.status.provider_id not in (lagging, gone)]

    env.cloud.list = lagging_list  # type: ignore[method-assign]
    del env.cloud.instances[gone]
    await env.claims().collect_garbage()
    assert not _deleting(env, "a-lagging")
    assert _deleting(env, "b-gone")
    assert [(e.kind, e.name, e.type, e.reason, e.message) for e in env.recorder.events] == [
        ("NodeClaim", "b-gone", "Warning", "GarbageCollected", "Instance was terminated outside of karpy")
    ]
    assert env.recorder.refs[0]["metadata"] == {"name": "b-gone", "uid": "uid-b-gone"}


async def test_an_instance_that_vanished_before_its_termination_does_not_end_the_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = harness.make_env()
    gone = await _registered(env)
    leaked = (await env.cloud.create(nodeclaim_builders.claim("orphan"))).status.provider_id  # launched, never recorded
    ctl = env.claims()
    await ctl.collect_garbage()  # first sighting of the unclaimed instance
    assert not _deleting(env)
    env.clock.advance(60)
    del env.cloud.instances[gone]  # terminated outside karpy: its claim is to be collected in this pass

    async def already_gone(claim: nodeclaim.NodeClaim) -> None:
        env.cloud.instances.pop(claim.status.provider_id, None)
        raise cloudprovider_errors.NodeClaimNotFound("terminated meanwhile")

    monkeypatch.setattr(env.cloud, "delete", already_gone)
    await ctl.collect_garbage()
    assert leaked not in env.cloud.instances
    assert _deleting(env)


async def test_an_instance_without_a_launch_time_is_collected_30_s_after_it_was_first_seen() -> None:
    env = harness.make_env()
    launched = await env.cloud.create(nodeclaim_builders.claim("orphan"))  # launched, never recorded by a claim
    bare = dataclasses.replace(launched, metadata=dataclasses.replace(launched.metadata, creation_timestamp=None))
    env.cloud.instances[launched.status.provider_id] = bare
    ctl = env.claims()
    await ctl.collect_garbage()
    env.clock.advance(30)
    await ctl.collect_garbage()
    assert launched.status.provider_id in env.cloud.instances  # within the grace, counted from the first sighting
    env.clock.advance(1)
    await ctl.collect_garbage()
    assert env.cloud.instances == {}
