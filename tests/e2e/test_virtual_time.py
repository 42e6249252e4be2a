"""Long scenarios on one self-driving virtual clock shared by the controller and the emulation
(`ClusterOptions(autojump=True)`), with upstream's own timings (1 s / 10 s batches, 10 s disruption poll, 15 s
validation): every wait is honoured on the virtual clock and costs no real time, so minutes of timers pass in
seconds (the test's timeout bounds the real time; the asserts bound the virtual time from both sides).

* emptiness: an emptied node goes after consolidateAfter (30 s) and the validation, not before;
* expiration: a NodeClaim older than its pool's expireAfter (10 min) is deleted (forcefully, without a budget),
  its node drained, its instance terminated, and its pods land on a replacement.
"""

from __future__ import annotations

import pytest
from tests.e2e import support

from karpy.api import decoding
from karpy.termination import controller as termination_controller
from karpy_emulator import autojump, cluster, controlplane, workloads

BOOT_DELAY = 5.0
CONSOLIDATE_AFTER = 30.0
EXPIRE_AFTER = 600.0
STAND_IN_SLACK = 10.0
UPSTREAM = controlplane.Options(interruption=False)
"""Upstream's timings (the SQS long poll is off: a blocking wait would hold virtual time still)."""


pytestmark = pytest.mark.cluster(boot_delay=BOOT_DELAY, interval=1.0)


@pytest.mark.slow
async def test_an_empty_node_goes_after_consolidate_after_and_validation_in_virtual_time(
    emulated: cluster.EmulatedCluster,
) -> None:
    clock = emulated.clock
    assert isinstance(clock, autojump.AutojumpClock)
    async with controlplane.ControlPlane(emulated, UPSTREAM):
        await support.apply_defaults(
            emulated, support.pool(consolidate_after=f"{CONSOLIDATE_AFTER:g}s", policy="WhenEmpty")
        )
        start = clock.now()
        await emulated.client.create(workloads.DEPLOYMENTS, support.deployment("inflate", 2))
        await support.eventually(
            lambda: support.all_bound(emulated, "inflate", 2), clock=emulated.clock, within=30, what="pods bound"
        )
        # Bound no sooner than the batch's idle second plus the node's boot delay, both on the virtual clock.
        assert clock.now() - start >= BOOT_DELAY + UPSTREAM.batch_idle

        await support.scale(emulated, "inflate", 0)
        emptied = clock.now()
        # 30 s consolidateAfter, up to 10 s to the next poll, 15 s validation, then termination: at least the 5 s
        # minimum drain and up to one 5 s instance poll: 56–70 virtual s in all.
        await support.eventually(
            lambda: support.nothing_left(emulated), clock=emulated.clock, within=90, what="the empty node removed"
        )
        took = clock.now() - emptied
    assert CONSOLIDATE_AFTER + UPSTREAM.validation_delay + termination_controller.MIN_DRAIN_TIME <= took
    timers = UPSTREAM.disruption_poll + UPSTREAM.validation_delay + termination_controller.MIN_DRAIN_TIME
    # Slack for the stand-ins' 1 s ticks (the pods' deletion, the instance's shutdown) and this wait's own polls.
    assert took <= CONSOLIDATE_AFTER + timers + termination_controller.INSTANCE_TERMINATION_POLL + STAND_IN_SLACK
    assert clock.jumps > 0


@pytest.mark.slow
async def test_a_node_expires_after_ten_virtual_minutes_and_is_replaced(emulated: cluster.EmulatedCluster) -> None:
    clock = emulated.clock
    async with controlplane.ControlPlane(emulated, UPSTREAM):
        await support.apply_defaults(
            emulated, support.pool(expire_after=f"{EXPIRE_AFTER:g}s", consolidate_after="Never")
        )
        await emulated.client.create(workloads.DEPLOYMENTS, support.deployment("aging", 2))
        await support.eventually(
            lambda: support.all_bound(emulated, "aging", 2), clock=emulated.clock, within=30, what="aging bound"
        )
        (first,) = await support.claims(emulated)
        born = first["metadata"]["creationTimestamp"]

        async def replaced() -> bool:
            names = {c["metadata"]["name"] for c in await support.claims(emulated)}
            return (
                bool(names)
                and first["metadata"]["name"] not in names
                and bool(await support.all_bound(emulated, "aging", 2))
            )

        # Ten minutes of virtual time in seconds of real time.
        await support.eventually(
            replaced, clock=emulated.clock, within=EXPIRE_AFTER + 120, what="the expired NodeClaim replaced"
        )
        age = clock.now() - decoding.timestamp(born)
    assert EXPIRE_AFTER <= age <= EXPIRE_AFTER + 60.0
    assert support.instance_id(first) not in await support.running_instances(emulated)
