"""`pulumi destroy` (and `helm uninstall`) leave no instance behind: the chart's pre-delete hook runs `karpy teardown`
while the controller still runs, which deletes every NodePool, whoever declared it, and every NodeClaim, and waits
until the controller has terminated them all; then every EC2NodeClass, which the controller finalizes (its instance
profile and launch templates go) instead of leaving its finalizer behind (karpy.termination.teardown).

Here a NodePool is applied outside any stack (as kubectl or a GitOps tool would), its nodes are launched on moto,
and the teardown runs as the hook runs it: `karpy teardown`'s own process code (`karpy.operator.teardown.run`)
against the emulated API server, as the hook's ServiceAccount, each of its requests checked against the RBAC the
chart binds to that ServiceAccount. Without a controller to finish the work, it fails naming what is left."""

from __future__ import annotations

import pytest
from tests.charts import rbac
from tests.e2e import support

from karpy.kube import credentials, resources
from karpy.operator import teardown as operator_teardown
from karpy.termination import teardown
from karpy_emulator import cluster, controlplane, workloads

HOOK_SERVICE_ACCOUNT = f"{rbac.RELEASE}-teardown"
HOOK_USER = f"system:serviceaccount:{rbac.NAMESPACE}:{HOOK_SERVICE_ACCOUNT}"


def as_the_hook(emulated: cluster.EmulatedCluster) -> credentials.Credentials:
    return credentials.bearer(emulated.api_url, HOOK_USER)


async def launch_outside_the_stack(emulated: cluster.EmulatedCluster, replicas: int) -> set[str]:
    """A NodePool of nobody's stack, and pods that make the controller launch nodes for it; their NodeClaims."""
    await support.apply_defaults(emulated, support.pool("applied-with-kubectl"))
    await emulated.client.create(workloads.DEPLOYMENTS, support.deployment("inflate", replicas, cpu="1"))
    await support.eventually(
        lambda: support.all_bound(emulated, "inflate", replicas),
        clock=emulated.clock,
        within=90,
        what=f"{replicas} pods bound",
    )
    assert await support.running_instances(emulated)
    return {claim["metadata"]["name"] for claim in await support.claims(emulated)}


async def test_the_teardown_leaves_no_nodepool_nodeclaim_node_or_instance(
    emulated: cluster.EmulatedCluster, controller: controlplane.ControlPlane
) -> None:
    launched = await launch_outside_the_stack(emulated, 6)
    steps: list[str] = []

    deleted = await operator_teardown.run(
        as_the_hook(emulated), clock=emulated.clock, within=240, poll=support.POLL, report=steps.append
    )

    assert deleted.nodepools == ("applied-with-kubectl",)
    assert launched <= set(deleted.nodeclaims)
    assert deleted.nodeclasses == ("default",)
    assert await support.nothing_left(emulated)  # no NodeClaim, no Node, no running instance of the cluster
    for kind in (resources.NODEPOOLS, resources.EC2NODECLASSES):
        items, _ = await emulated.client.list(kind)
        assert items == [], kind.kind  # the EC2NodeClass's finalizer was taken off by the controller
    assert steps[0] == "deleted 1 NodePool(s): applied-with-kubectl"
    assert "no NodeClaim left" in steps
    assert steps.index("no NodeClaim left") < steps.index("deleted 1 EC2NodeClass(s): default")
    assert steps[-1] == "no EC2NodeClass left"
    # every request the teardown sent is one the chart's hook RBAC allows (a 403 in a real cluster otherwise)
    rules = rbac.bound_rules(rbac.render(), service_account=HOOK_SERVICE_ACCOUNT, namespace=rbac.NAMESPACE)
    sent = [access for access in emulated.api.accesses.snapshot() if access.user == HOOK_USER]
    assert {(a.verb, a.resource) for a in sent} >= {
        ("list", "nodepools"), ("delete", "nodeclaims"), ("delete", "ec2nodeclasses")
    }  # fmt: skip
    assert [a for a in sent if not any(rule.allows(a) for rule in rules)] == []


async def test_without_a_controller_the_teardown_times_out_naming_what_is_left(
    emulated: cluster.EmulatedCluster,
) -> None:
    async with controlplane.ControlPlane(emulated, support.FAST):
        launched = await launch_outside_the_stack(emulated, 2)
    # the controller is gone (crashed, or removed first): nothing takes the NodeClaims' finalizers off
    instances = set(await support.running_instances(emulated))

    with pytest.raises(teardown.TimedOut) as caught:
        await operator_teardown.run(as_the_hook(emulated), clock=emulated.clock, within=60, poll=support.POLL)

    left = caught.value.left
    assert {item.name for item in left} == launched
    message = str(caught.value)
    assert message.startswith(f"{len(launched)} NodeClaim(s) still there after 60 s: ")
    for item in left:
        assert item.name in message
        assert item.node
        assert item.node in message
        assert any(item.provider_id.endswith(instance) for instance in instances)
        assert item.provider_id in message
    assert set(await support.running_instances(emulated)) == instances  # still running: what the user must act on


async def test_without_a_controller_an_ec2nodeclass_left_is_named(emulated: cluster.EmulatedCluster) -> None:
    """No NodeClaim to wait for, but the EC2NodeClass carries the controller's finalizer: the teardown names it."""
    async with controlplane.ControlPlane(emulated, support.FAST):
        await support.apply_defaults(emulated)

        async def finalized() -> bool:
            body = await emulated.client.get(resources.EC2NODECLASSES, "default")
            return body is not None and bool(body["metadata"].get("finalizers"))

        await support.eventually(finalized, clock=emulated.clock, within=60, what="the class's finalizer")

    with pytest.raises(teardown.TimedOut) as caught:
        await operator_teardown.run(as_the_hook(emulated), clock=emulated.clock, within=30, poll=support.POLL)

    assert caught.value.kind == "EC2NodeClass"
    assert [item.name for item in caught.value.left] == ["default"]
    assert str(caught.value).startswith("1 EC2NodeClass(s) still there after 30 s: default; ")
    assert "instance profiles and launch templates may remain" in str(caught.value)
