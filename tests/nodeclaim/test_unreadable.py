"""Never destroy what you cannot read: a NodeClaim karpy's parser refuses (a field an API server with other CRDs
took) keeps its instance through garbage collection, is never deleted as an orphan, and is reported; everything
else is collected in the same pass."""

from __future__ import annotations

import dataclasses
from typing import Any

from tests.nodeclaim import builders as nodeclaim_builders
from tests.nodeclaim import harness

from karpy import rejections
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.kube import client, resources
from karpy.nodeclaim import controller
from karpy.state import cluster as state_cluster

NAME = "default-abc12"
OTHER = "default-def34"


def _controller(env: harness.Env, sink: rejections.MemorySink) -> controller.NodeClaimController:
    return controller.NodeClaimController(dataclasses.replace(env.deps, rejections=sink))


def _spoil(env: harness.Env, name: str, *, keep_provider_id: bool = True) -> None:
    """Make the stored claim one karpy's parser refuses, as an API server with other CRDs could hold it."""
    raw: Any = env.claim_obj(name)
    raw["spec"]["requirements"][0]["operator"] = "Equals"
    if not keep_provider_id:
        raw["status"].pop("providerID", None)


async def _launched(env: harness.Env, *names: str) -> None:
    for name in names:
        env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(name))
        await env.claims().reconcile(name)
    assert len(env.cloud.instances) == len(names)


async def test_gc_keeps_the_instance_of_a_claim_it_cannot_read() -> None:
    env = harness.make_env()
    await _launched(env, NAME)
    _spoil(env, NAME)
    sink = rejections.MemorySink()
    ctl = _controller(env, sink)
    for _ in range(3):  # well past the 30 s grace
        await ctl.collect_garbage()
        env.clock.advance(31)
    assert len(env.cloud.instances) == 1
    assert env.cloud.delete_calls == []
    assert env.claim_obj(NAME) is not None
    (report, *_) = sink.reports
    assert (report.kind, report.key, report.reason) == ("NodeClaim", NAME, rejections.Reason.INVALID)
    assert 'spec.requirements[0].operator: unsupported operator "Equals"' in report.problem


async def test_a_claim_without_a_readable_provider_id_still_holds_its_tagged_instance() -> None:
    env = harness.make_env()
    await _launched(env, NAME)
    _spoil(env, NAME, keep_provider_id=False)
    ctl = _controller(env, rejections.MemorySink())
    await ctl.collect_garbage()
    env.clock.advance(31)
    await ctl.collect_garbage()
    assert len(env.cloud.instances) == 1, "the instance carries the claim's name (karpenter.sh/nodeclaim tag)"


async def test_real_leaks_are_still_collected_beside_an_unreadable_claim() -> None:
    env = harness.make_env()
    await _launched(env, NAME, OTHER)
    _spoil(env, NAME)
    del env.kube.objects[("nodeclaims", "", OTHER)]  # its instance is now a leak
    ctl = _controller(env, rejections.MemorySink())
    await ctl.collect_garbage()
    env.clock.advance(31)
    await ctl.collect_garbage()
    assert [c.name for c in env.cloud.instances.values()] == [NAME]


async def test_an_unreadable_registered_claim_is_never_deleted_as_an_orphan() -> None:
    env = harness.make_env()
    await _launched(env, NAME)
    _spoil(env, NAME)
    env.cloud.instances.clear()  # even with its instance gone, a claim karpy cannot read is left alone
    await _controller(env, rejections.MemorySink()).collect_garbage()
    raw: Any = env.claim_obj(NAME)
    assert not raw["metadata"].get("deletionTimestamp")


class OneBrokenDelete(fake_provider.FakeCloudProvider):
    """Terminating one instance raises something no cloud error class covers (a provider bug)."""

    broken = ""

    async def delete(self, claim: Any) -> None:
        if claim.status.provider_id == self.broken:
            raise KeyError("InstanceId")
        await super().delete(claim)


async def test_one_instance_failing_does_not_stop_the_others() -> None:
    env = harness.make_env()
    env.cloud = OneBrokenDelete()
    await _launched(env, NAME, OTHER)
    OneBrokenDelete.broken = sorted(env.cloud.instances)[0]
    for name in (NAME, OTHER):
        del env.kube.objects[("nodeclaims", "", name)]
    sink = rejections.MemorySink()
    ctl = _controller(env, sink)
    await ctl.collect_garbage()
    env.clock.advance(31)
    await ctl.collect_garbage()
    assert list(env.cloud.instances) == [OneBrokenDelete.broken], "the other leak was collected"
    assert [r.reason for r in sink.reports] == [rejections.Reason.HANDLING_FAILED]


async def test_reconciling_an_unreadable_claim_launches_nothing() -> None:
    """The reconciler reads the state cache, which refuses the claim and reports it: nothing is launched."""
    env = harness.make_env()
    env.kube.put(resources.NODECLAIMS, nodeclaim_builders.claim_dict(NAME))
    _spoil(env, NAME)
    sink = rejections.MemorySink()
    cache = state_cluster.Cluster(clock=env.clock, rejections=sink)
    cache.apply(resources.NODECLAIMS, client.WatchEvent(client.ADDED, env.kube.all(resources.NODECLAIMS)[0]))
    ctl = controller.NodeClaimController(dataclasses.replace(env.deps, claims=cache.nodeclaim))
    result = await ctl.reconcile(NAME)
    assert result is None
    assert env.cloud.create_calls == []
    assert env.kube.writes == []
    assert sink.keys("NodeClaim") == [NAME]
