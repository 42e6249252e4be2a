"""The controller killed at each step of launch and of termination, then replaced by a fresh instance with fresh
state against the same cluster: no leaked instance, no duplicate NodeClaim, no stuck finalizer.

Each case scales a one-pod Deployment 0 → 1 with a controller that dies at a launch checkpoint, lets a fresh one
finish the launch, then scales 1 → 0 with a controller that dies at a termination checkpoint and lets a fresh one
finish the termination. A kill cancels every task of the controller at the checkpoint (`hooks.KillAt`): the write or
cloud call after "before ..." never happens, the result of the one before "after ..." is never used. One instance is
ever launched: a launch killed after its CreateFleet was sent is given that call's instance when the fresh controller
launches the same NodeClaim again (the ClientToken derived from the NodeClaim's uid).
"""

from __future__ import annotations

import asyncio

import pytest
from tests.e2e import support

from karpy.kube import resources
from karpy_emulator import cluster, controlplane, hooks, workloads

CYCLES = (
    # (launch checkpoint, termination checkpoint)
    ("before create nodeclaims", "before delete nodeclaims"),
    ("after create nodeclaims", "after delete nodeclaims"),
    ("before cloud.create", "before patch nodes"),
    ("after patch nodeclaims/status", "before delete nodes"),
    ("before patch nodes", "before cloud.delete"),
    ("after cloud.create", "after cloud.delete"),  # last: the leaked instance needs the GC's 30 s grace
)


async def _killed_at(emulated: cluster.EmulatedCluster, point: str) -> None:
    """Run a controller until it reaches `point`, kill it there (cancel all its tasks), and return."""
    kill = hooks.KillAt(point)
    plane = controlplane.ControlPlane(emulated, support.FAST, hook=kill)
    kill.target = plane.start()

    async def fired() -> bool:
        return kill.fired.is_set()

    try:
        await support.eventually(fired, clock=emulated.clock, within=90, what=f"the controller to reach {point!r}")
    finally:
        await plane.stop()


async def _one_claim_per_pod(emulated: cluster.EmulatedCluster, seen: support.NamesSeen) -> bool:
    assert len(seen.names) <= 1, f"duplicate NodeClaim: {sorted(seen.names)}"
    bound = await support.all_bound(emulated, "victim", 1)
    claims = await support.claims(emulated)
    instances = await support.running_instances(emulated)
    if not bound or len(claims) != 1 or claims[0]["metadata"].get("deletionTimestamp"):
        return False
    return len(instances) == 1


@pytest.mark.slow
@pytest.mark.parametrize(("launch_point", "termination_point"), CYCLES, ids=[f"{a}|{b}" for a, b in CYCLES])
async def test_killed_during_launch_and_termination_recovers(
    emulated: cluster.EmulatedCluster, launch_point: str, termination_point: str
) -> None:
    await support.apply_defaults(emulated)
    await emulated.client.create(workloads.DEPLOYMENTS, support.deployment("victim", 0))
    async with support.NamesSeen(emulated, resources.NODECLAIMS) as seen:  # every NodeClaim that ever existed
        await support.scale(emulated, "victim", 1)
        await _killed_at(emulated, launch_point)
        async with controlplane.ControlPlane(emulated, support.FAST):
            await support.eventually(
                lambda: _one_claim_per_pod(emulated, seen),
                clock=emulated.clock,
                within=75,
                what=f"one claim per pod after {launch_point!r}",
            )
    assert len(seen.names) == 1, f"one pod, one NodeClaim ever: {sorted(seen.names)}"
    # Killed after CreateFleet was sent, the fresh controller's launch of the same NodeClaim is given the instance
    # the first one started (its ClientToken): none is left for garbage collection.
    launched = [i["InstanceId"] for i in await asyncio.to_thread(support.every_instance, emulated)]
    assert len(launched) == 1, f"one NodeClaim, one instance ever: {launched}"
    await support.scale(emulated, "victim", 0)
    await _killed_at(emulated, termination_point)
    async with controlplane.ControlPlane(emulated, support.FAST):
        await support.eventually(
            lambda: support.nothing_left(emulated),
            clock=emulated.clock,
            within=60,
            what=f"everything gone after {termination_point!r}",
        )
