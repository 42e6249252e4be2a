"""AWS throttling, server errors, slow and lost answers, per family of the operations the controller uses, injected
into the controller's own calls to the moto server (`faults`), end to end on virtual time.

Each scenario: deployment `a` gets its nodes; then, with the family failing, `a` is scaled to zero and its
NodeClaims deleted (termination: describe, terminate) and deployment `b` arrives on a pool of its own (new nodes:
launch template, CreateFleet, tags). While the family
fails, the side it does not touch is still served; once it recovers everything converges: every pod bound, no
NodeClaim left launching or deleting, no instance without a NodeClaim (none leaked), no NodeClaim with two
(none launched twice), and the faulted calls stayed within what the retry backoffs allow.

The SDK makes no retries here (`sdk_max_attempts=0`): every fault reaches the controller, whose own backoffs run
on the virtual clock, and no botocore backoff sleeps on the wall clock."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable
from typing import Any

import pytest
from tests.e2e import support

from karpy.api import labels, quantity
from karpy.cloudprovider.aws import cache, faults
from karpy.interruption import handler
from karpy.kube import resources
from karpy_emulator import autojump, cluster, controlplane, workloads
from karpy_emulator.aws import seeding

LAUNCH = frozenset({"ec2:CreateFleet", "ec2:CreateLaunchTemplate", "ec2:DescribeLaunchTemplates"})
INSTANCES = frozenset({"ec2:DescribeInstances"})
TERMINATION = frozenset({"ec2:TerminateInstances"})
TAGGING = frozenset({"ec2:CreateTags"})
NODE_CLASS = frozenset(
    {
        "ec2:DescribeSubnets",
        "ec2:DescribeSecurityGroups",
        "ec2:DescribeImages",
        "ec2:DescribeCapacityReservations",
        "ec2:DescribePlacementGroups",
        "ec2:DescribeAvailabilityZones",
        "ssm:*",
        "iam:*",
        "eks:*",
    }
)
CATALOG = frozenset({*seeding.FAST_CATALOG_OPERATIONS, "pricing:*"})
EVERY_EC2 = frozenset({"ec2:*"})


@dataclasses.dataclass(frozen=True, slots=True)
class Case:
    family: frozenset[str]
    kind: faults.Kind
    blocks: str = ""
    """"launch": new nodes wait for the family; "termination": removing nodes does; "": neither for long."""
    delay: float = 0.0
    times: int | None = None
    """Attempts the fault answers (None: until the scenario clears it)."""


CASES = {
    "launch-throttled": Case(LAUNCH, faults.Kind.THROTTLED, blocks="launch"),
    "launch-lost": Case(LAUNCH, faults.Kind.LOST, times=2),
    "instances-unavailable": Case(INSTANCES, faults.Kind.UNAVAILABLE, blocks="termination"),
    "termination-server-error": Case(TERMINATION, faults.Kind.SERVER_ERROR, blocks="termination"),
    "tagging-throttled": Case(TAGGING, faults.Kind.THROTTLED),
    "node-class-throttled": Case(NODE_CLASS, faults.Kind.THROTTLED),
    "catalog-throttled": Case(CATALOG, faults.Kind.THROTTLED),
    "every-ec2-call-slow": Case(EVERY_EC2, faults.Kind.SLOW, delay=20.0),
}
FAULTED_CALLS_BOUND = 40
"""Attempts of the faulted operations while they fail (some 90 virtual s): each NodeClaim's launch backs off from
1 s doubling to 1 min, each node's termination polls every 5 s, garbage collection lists every 10 s."""
TOTAL_CALLS_BOUND = 400
"""Every AWS call of the scenario (some 4 virtual minutes, four nodes launched and two removed)."""


TEAM = "example.com/team"


def team_b_pool() -> dict[str, Any]:
    """Nodes only `b` runs on: its pods never land on `a`'s emptied nodes, so they need new ones."""
    body = support.pool("team-b", consolidate_after="30s", policy="WhenEmpty")
    body["spec"]["template"].setdefault("metadata", {})["labels"] = {TEAM: "b"}
    return body


async def settled(emulated: cluster.EmulatedCluster) -> bool:
    claims = await support.claims(emulated)
    return bool(await support.all_bound(emulated, "b", 2)) and all(
        support.is_true(c, "Initialized") and not c["metadata"].get("deletionTimestamp") for c in claims
    )


@pytest.mark.slow
@pytest.mark.cluster(boot_delay=2.0, interval=1.0)
@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
async def test_a_failing_family_of_aws_calls_stops_only_what_needs_it(
    case: Case, emulated: cluster.EmulatedCluster
) -> None:
    clock = emulated.clock
    assert isinstance(clock, autojump.AutojumpClock)
    injected = faults.Faults(sleep=clock.sleep, activity=clock.activity)
    options = controlplane.Options(interruption=False, sdk_max_attempts=0, faults=injected)
    async with (
        support.NamesSeen(emulated, resources.NODECLAIMS) as ever,
        controlplane.ControlPlane(emulated, options) as plane,
    ):
        await support.apply_defaults(emulated, support.pool(consolidate_after="30s", policy="WhenEmpty"), team_b_pool())
        await emulated.client.create(workloads.DEPLOYMENTS, support.deployment("a", 2))
        await support.eventually(
            lambda: support.all_bound(emulated, "a", 2), clock=emulated.clock, within=60, what="a bound"
        )
        a_claims = {c["metadata"]["name"] for c in await support.claims(emulated)}

        injected.inject(case.family, case.kind, times=case.times, delay=case.delay)
        await support.scale(emulated, "a", 0)
        for name in a_claims:  # removed by hand: disruption waits while a launch is unresolved (upstream's Synced)
            await emulated.client.delete(resources.NODECLAIMS, name)
        await emulated.client.create(
            workloads.DEPLOYMENTS, support.deployment("b", 2, spec_extra={"nodeSelector": {TEAM: "b"}})
        )

        async def a_gone() -> bool:
            return not a_claims & {c["metadata"]["name"] for c in await support.claims(emulated)}

        async def in_use() -> bool:
            return injected.hit() > 0

        # Virtual time moves on until the controller calls the family (the catalog's cache has to expire first).
        await support.eventually(
            in_use,
            clock=emulated.clock,
            within=cache.INSTANCE_TYPES_TTL + 60.0,
            what="a call of the failing family",
        )
        # The side the family does not touch is served while it fails.
        if case.blocks == "launch":
            await support.eventually(
                a_gone, clock=emulated.clock, within=90, what="a's nodes removed while launches fail"
            )
            assert not await support.all_bound(emulated, "b", 2)
        elif case.blocks == "termination":
            await support.eventually(
                lambda: support.all_bound(emulated, "b", 2), clock=emulated.clock, within=90, what="b bound"
            )
            assert not await a_gone()
        else:
            await support.eventually(
                a_gone, clock=emulated.clock, within=90, what="a's nodes removed while the family fails"
            )
            await support.eventually(
                lambda: settled(emulated), clock=emulated.clock, within=90, what="b served while the family fails"
            )
        if case.kind is not faults.Kind.SLOW:  # slow calls are every call: the total bound below holds them
            assert injected.hit() <= FAULTED_CALLS_BOUND, injected.hits

        injected.clear()
        await support.eventually(a_gone, clock=emulated.clock, within=90, what="a's nodes removed")
        await support.eventually(
            lambda: settled(emulated), clock=emulated.clock, within=90, what="b bound, every NodeClaim Initialized"
        )

        async def nothing_leaked() -> bool:
            running = set(await support.running_instances(emulated))
            return running == {support.instance_id(c) for c in await support.claims(emulated)}

        # Garbage collection reaps any instance nobody knows of (a lost launch left none: its retry was given it).
        await support.eventually(
            nothing_leaked, clock=emulated.clock, within=90, what="no instance without a NodeClaim"
        )
        launched = await asyncio.to_thread(support.every_instance, emulated)
        # One instance per NodeClaim ever made, a lost launch included: its retry, under the same ClientToken, was
        # given the instance the lost call started.
        assert len(launched) <= len(ever.names)
        if case.family is TAGGING:

            async def tagged() -> bool:
                """the instances refused their tags got them on a later pass"""
                running = set(await support.running_instances(emulated))
                found = await asyncio.to_thread(support.every_instance, emulated)
                return all(
                    labels.TAG_NODECLAIM in {t["Key"] for t in i.get("Tags", [])}
                    for i in found
                    if i["InstanceId"] in running
                )

            await support.eventually(tagged, clock=emulated.clock, within=60, what="every instance tagged")
        total = plane.aws_calls.total()
    assert total <= TOTAL_CALLS_BOUND, plane.aws_calls.calls()


INTERRUPTION = frozenset({"sqs:ReceiveMessage", "ec2:DescribeInstanceStatus"})


async def _terminated_on_interruption(emulated: cluster.EmulatedCluster) -> dict[tuple[str, str], int] | None:
    """(kind, name) -> how many times the interruption handler deleted it (its TerminatingOnInterruption events,
    each counted with its `count` so a repeat folded into one Event still shows)."""
    found, _ = await emulated.client.list(resources.EVENTS)
    out: dict[tuple[str, str], int] = {}
    for event in found:
        if event.get("reason") == handler.Reason.TERMINATING_ON_INTERRUPTION:
            about = event["involvedObject"]
            key = (str(about["kind"]), str(about["name"]))
            out[key] = out.get(key, 0) + int(event.get("count") or 1)
    return out or None


async def _requests_on(emulated: cluster.EmulatedCluster, claim_names: Iterable[str]) -> tuple[int, int] | None:
    """(pods of "batch" on the claims' nodes, their CPU requests in millicores); None while a claim has no node or
    holds none of them (an empty replacement)."""
    by_name = {c["metadata"]["name"]: c for c in await support.claims(emulated)}
    nodes = {by_name[n]["status"].get("nodeName") for n in claim_names if n in by_name}
    if len(nodes) != len(set(claim_names)) or None in nodes:
        return None
    pods = [p for p in await support.pods_of(emulated, "batch") if p["spec"].get("nodeName") in nodes]
    if {p["spec"]["nodeName"] for p in pods} != nodes:
        return None
    milli_cpu = sum(quantity.parse(c["resources"]["requests"]["cpu"]) for p in pods for c in p["spec"]["containers"])
    return len(pods), milli_cpu


@pytest.mark.slow
async def test_a_failing_interruption_queue_delays_only_interruptions_and_a_message_is_acted_on_once(
    emulated: cluster.EmulatedCluster,
) -> None:
    """Virtual time (the queue's poll and moto's visibility timeouts run on the cluster's clock): while the queue
    and the instance-status checks are throttled, pods still get nodes; the warning sent meanwhile is handled once
    they recover, and a message whose deletion failed comes back after its visibility timeout without the node
    being replaced twice: the replacements hold exactly the evicted pods' requests, and none stands empty."""
    injected = faults.Faults()
    options = dataclasses.replace(support.FAST, sdk_max_attempts=0, faults=injected)
    async with (
        support.NamesSeen(emulated, resources.NODECLAIMS) as ever,
        controlplane.ControlPlane(emulated, options) as plane,
    ):
        injected.inject(INTERRUPTION, faults.Kind.THROTTLED)
        await support.apply_defaults(emulated)
        await emulated.client.create(workloads.DEPLOYMENTS, support.deployment("batch", 2))
        await support.eventually(
            lambda: support.all_bound(emulated, "batch", 2), clock=emulated.clock, within=60, what="batch bound"
        )
        (claim,) = await support.claims(emulated)
        instance_id = support.instance_id(claim)
        evicted = await _requests_on(emulated, [claim["metadata"]["name"]])
        assert evicted == (2, 2000)
        await support.spot_interruption_warning(emulated, instance_id)
        await emulated.clock.sleep(30)  # polls that fail meanwhile
        throttled = injected.hit(faults.Kind.THROTTLED)
        assert throttled > 0
        assert len(await support.claims(emulated)) == 1  # nothing acted on it yet

        injected.clear()
        injected.inject({"sqs:DeleteMessage"}, faults.Kind.SERVER_ERROR, times=1)

        async def replaced() -> bool:
            names = {c["metadata"]["name"] for c in await support.claims(emulated)}
            running = await support.running_instances(emulated)
            return (
                claim["metadata"]["name"] not in names
                and bool(await support.all_bound(emulated, "batch", 2))
                and (instance_id not in running)
            )

        await support.eventually(replaced, clock=emulated.clock, within=90, what="the interrupted node replaced")

        async def redelivered_and_deleted() -> bool:
            return plane.aws_calls.calls().get(("sqs", "DeleteMessage"), 0) >= 2

        await support.eventually(
            redelivered_and_deleted, clock=emulated.clock, within=60, what="the message deleted on its second delivery"
        )
        assert injected.hit(faults.Kind.SERVER_ERROR) == 1
        # Acted on once: only the interrupted NodeClaim (and its Node) was deleted for it, and its replacements hold
        # the evicted pods' requests and nothing more. With the evicted pods' replacements created a batch window
        # apart they may take two NodeClaims (the first pass sees one pod; the other is terminating, so not
        # rescheduled: core pkg/utils/pod/scheduling.go IsReschedulable), but each holds a pod: a second action on
        # the message would have launched capacity no pod needs.
        acted = await support.eventually(
            lambda: _terminated_on_interruption(emulated), clock=emulated.clock, within=30, what="the handler's events"
        )
        assert acted == {("NodeClaim", claim["metadata"]["name"]): 1, ("Node", claim["status"]["nodeName"]): 1}
        assert claim["metadata"]["name"] in ever.names
        replacements = ever.names - {claim["metadata"]["name"]}
        assert await _requests_on(emulated, replacements) == evicted, sorted(replacements)
        running = set(await support.running_instances(emulated))
        assert running == {support.instance_id(c) for c in await support.claims(emulated)}
    assert throttled <= FAULTED_CALLS_BOUND
