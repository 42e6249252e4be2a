"""The expiration reconciler on the in-memory API + real `state.Cluster`, virtual time: deletes at creation +
expireAfter and not a second earlier, never for Never, once per claim, and only logs through a DryRunClient."""

from __future__ import annotations

import datetime
import logging
from typing import Any

import pytest
from tests import builders, tasks
from tests.nodeclaim import builders as nodeclaim_builders
from tests.nodeclaim import harness

from karpy import clock as karpy_clock
from karpy import events
from karpy.api import labels
from karpy.kube import client, dryrun, fake, resources
from karpy.nodeclaim import expiration, roles
from karpy.state import cluster as state_cluster

DAY = 24 * 3600.0


class _ExpiryLog(harness.DisruptedLog, expiration.Metrics):
    pass


class Env:
    def __init__(self, *, dry_run: bool = False) -> None:
        self.clock = karpy_clock.ManualClock(nodeclaim_builders.T0)
        self.kube = fake.FakeKubeClient(self.clock)
        self.cluster = state_cluster.Cluster(clock=self.clock)
        self.recorder = events.MemoryRecorder()
        self.disrupted: list[tuple[str, str, str]] = []
        writer: client.KubeClient = dryrun.DryRunClient(self.kube) if dry_run else self.kube
        self.ctrl = expiration.ExpirationController(
            roles.ClusterRoles(client=writer, cluster=self.cluster, clock=self.clock),
            expiration.Observer(self.recorder, _ExpiryLog(self.disrupted)),
        )

    def claim(self, name: str, *, expire_after: str = "24h", node: str = "") -> None:
        status: dict[str, Any] = {"nodeName": node} if node else {}
        extra = {labels.LABEL_CAPACITY_TYPE: "spot"}
        self.kube.put(
            resources.NODECLAIMS,
            nodeclaim_builders.claim_dict(
                name,
                created=nodeclaim_builders.ts(self.clock.now()),
                expire_after=expire_after,
                status=status,
                finalizers=[labels.FINALIZER_TERMINATION],
                labels=extra,
            ),
        )
        if node:
            self.kube.put(resources.NODES, nodeclaim_builders.node_dict(node))
        self.sync()

    def sync(self) -> None:
        """Feed the store to the cluster model as the informers would (fresh objects, deletions included)."""
        for res in (resources.NODECLAIMS, resources.NODES):
            present = {o["metadata"]["name"]: o for o in self.kube.all(res)}
            for old in self.cluster.objects(res):
                if old["metadata"]["name"] not in present:
                    self.cluster.apply(res, client.WatchEvent(client.DELETED, old))
            for obj in present.values():
                self.cluster.apply(res, client.WatchEvent(client.MODIFIED, obj))
            self.cluster.mark_listed(res)

    def deleting(self, name: str) -> bool:
        obj = self.kube.obj(resources.NODECLAIMS, name)
        return obj is None or bool(obj["metadata"].get("deletionTimestamp"))

    def deletes(self) -> list[str]:
        return [w.name for w in self.kube.writes if w.verb == "delete"]


async def test_not_expired_requeues_at_the_expiry_time() -> None:
    env = Env()
    env.claim("a")
    env.clock.advance(3600)
    assert await env.ctrl.reconcile("a") == DAY - 3600
    assert not env.deletes()


async def test_deleted_in_the_second_it_expires_and_not_one_before() -> None:
    env = Env()
    env.claim("a", expire_after="1h")
    env.clock.advance(3600 - 1)
    assert await env.ctrl.reconcile("a") == 1
    assert not env.deletes()
    env.clock.advance(1)
    assert await env.ctrl.reconcile("a") is None
    assert env.deletes() == ["a"]


async def test_expired_claim_is_deleted_with_log_event_and_metric(caplog: pytest.LogCaptureFixture) -> None:
    env = Env()
    env.claim("a", node="ip-1")
    env.clock.advance(DAY)
    with caplog.at_level(logging.INFO, logger=expiration.__name__):
        assert await env.ctrl.reconcile("a") is None
    assert env.deleting("a")
    records = [r for r in caplog.records if r.getMessage() == "disrupting nodeclaim(s)"]
    assert len(records) == 1
    assert records[0].__dict__["reason"] == "Expired"
    assert records[0].__dict__["nodeclaims"] == ["a"]
    assert [(e.kind, e.name, e.type, e.reason, e.message) for e in env.recorder.events] == [
        ("NodeClaim", "a", "Normal", "DisruptionTerminating", "Disrupting node via Expired"),
        ("Node", "ip-1", "Normal", "DisruptionTerminating", "Disrupting node via Expired"),
    ]
    assert env.disrupted == [("Expired", "default", "spot")]


async def test_expire_after_never_is_never_deleted() -> None:
    env = Env()
    env.claim("a", expire_after="Never")
    env.clock.advance(10 * 365 * DAY)
    assert await env.ctrl.reconcile("a") is None
    assert not env.deletes()


async def test_a_deleting_or_missing_claim_is_left_alone() -> None:
    env = Env()
    env.claim("a")
    env.clock.advance(DAY)
    assert await env.ctrl.reconcile("a") is None
    assert await env.ctrl.reconcile("a") is None  # already deleting: no second delete, event or metric
    assert await env.ctrl.reconcile("missing") is None
    assert env.deletes() == ["a"]
    assert len(env.recorder.events) == 1
    assert len(env.disrupted) == 1


async def test_run_deletes_each_claim_at_its_expiry_and_not_before() -> None:
    env = Env()
    env.claim("short", expire_after="1h")
    env.claim("long", expire_after="2h")
    env.claim("never", expire_after="Never")
    async with tasks.running(env.ctrl.run):
        await env.clock.run_for(3600 - 1)
        assert not env.deletes()
        await env.clock.run_for(1)
        assert env.deletes() == ["short"]
        assert env.clock.now() == nodeclaim_builders.T0 + 3600
        env.sync()
        await env.clock.run_for(3600 - 2)
        assert env.deletes() == ["short"]
        await env.clock.run_for(2)
        assert env.deletes() == ["short", "long"]
        env.sync()
        await env.clock.run_for(600)  # nothing left to expire: "never" stays
    assert env.deletes() == ["short", "long"]


async def test_run_picks_up_claims_created_later() -> None:
    env = Env()
    env.claim("first", expire_after="24h")
    async with tasks.running(env.ctrl.run):
        await env.clock.run_for(60)
        env.claim("late", expire_after="5m")  # created at T0+60, expires at T0+360
        await env.clock.run_for(300 - 1)
        assert not env.deletes()
        await env.clock.run_for(expiration.POLL + 1)  # a new claim is noticed within one poll
    assert env.deletes() == ["late"]


async def test_dry_run_deletes_nothing_and_logs_once(caplog: pytest.LogCaptureFixture) -> None:
    env = Env(dry_run=True)
    env.claim("a", expire_after="1h")
    with caplog.at_level(logging.INFO):
        async with tasks.running(env.ctrl.run):
            await env.clock.run_for(3600 + 10 * expiration.POLL)
    assert not env.deleting("a")
    assert not [w for w in env.kube.writes if w.verb == "delete"]
    decisions = [r for r in caplog.records if r.getMessage() == "disrupting nodeclaim(s)"]
    assert len(decisions) == 1  # not repeated every pass while the claim stays unchanged
    assert any("would delete" in r.getMessage() for r in caplog.records)


# --- capacity blocks ----------------------------------------------------------------------------------------------

BLOCK_END = nodeclaim_builders.T0 + 3 * 3600.0


def _rfc3339(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _with_block(env: Env, *, reservation_type: str = "capacity-block") -> None:
    nodeclass = builders.ec2nodeclass()
    nodeclass["status"] = {
        "capacityReservations": [
            {
                "id": "cr-block",
                "availabilityZone": "us-east-1a",
                "instanceType": "p5.48xlarge",
                "ownerID": "123456789012",
                "instanceMatchCriteria": "targeted",
                "reservationType": reservation_type,
                "state": "active",
                "endTime": _rfc3339(BLOCK_END),
            }
        ]
    }
    env.cluster.apply(resources.EC2NODECLASSES, client.WatchEvent(client.ADDED, nodeclass))
    env.cluster.mark_listed(resources.EC2NODECLASSES)


def _reserved_claim(env: Env, name: str) -> None:
    env.kube.put(
        resources.NODECLAIMS,
        nodeclaim_builders.claim_dict(
            name,
            created=nodeclaim_builders.ts(env.clock.now()),
            expire_after="720h",
            finalizers=[labels.FINALIZER_TERMINATION],
            labels={
                labels.LABEL_CAPACITY_TYPE: "reserved",
                labels.LABEL_CAPACITY_RESERVATION_ID: "cr-block",
                labels.LABEL_CAPACITY_RESERVATION_TYPE: "capacity-block",
            },
        ),
    )
    env.sync()


async def test_a_claim_in_a_capacity_block_is_deleted_40_minutes_before_the_block_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    env = Env()
    _with_block(env)
    _reserved_claim(env, "gpu")
    env.claim("other")  # not in the block: untouched
    async with tasks.running(env.ctrl.run):
        await env.clock.run_for(BLOCK_END - 40 * 60 - nodeclaim_builders.T0 - 1)
        assert env.deletes() == []
        with caplog.at_level(logging.INFO):
            await env.clock.run_for(1)
        assert env.deletes() == ["gpu"]
    assert "initiating delete for capacity block expiration" in caplog.messages
    assert env.disrupted == []  # upstream counts no disruption for it
    assert env.recorder.events == []


async def test_an_ordinary_reservation_has_no_pre_drain() -> None:
    env = Env()
    _with_block(env, reservation_type="default")
    _reserved_claim(env, "odcr")
    async with tasks.running(env.ctrl.run):
        await env.clock.run_for(BLOCK_END - nodeclaim_builders.T0 + 3600)
        assert env.deletes() == []
