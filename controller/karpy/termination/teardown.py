"""`karpy teardown`: before karpy is uninstalled, hand every node it manages to the running controller and wait
until each is gone, so no instance outlives the controller, its IAM role and its queue.

Run by the chart's pre-delete hook (charts/karpy/templates/teardown.yaml), i.e. on `helm uninstall` and on the
`pulumi destroy` of a stack holding the release, never on an upgrade. Every NodePool goes first, whoever declared
it (the stack, kubectl, a GitOps tool), so that the pods the drains evict cannot make the controller launch new
nodes; then every NodeClaim. The controller's termination finalizer drains each node, terminates its instance and
only then lets the NodeClaim go, so "no NodeClaim left" means "no instance left". Then every EC2NodeClass: its
finalizer (aws: pkg/controllers/nodeclass/controller.go `finalize`) deletes the instance profile and launch
templates the controller made for it once no NodeClaim uses it, which only a running controller can do; without
it the class would keep its finalizer after uninstall and hold up the CRDs' removal. NodeOverlays stay: they carry
no finalizer and no cloud resource, so they go with their CRD or stay as the user's configuration. Whatever is
still there when the timeout passes is named in the error, and the uninstall fails instead of orphaning it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from karpy import clock as karpy_clock
from karpy.kube import client, resources

POLL_SECONDS: Final = 5.0
"""Seconds between two looks at what is left."""


@dataclass(frozen=True, slots=True)
class Leftover:
    """A NodeClaim still there, with what identifies its machine."""

    name: str
    node: str
    provider_id: str

    def describe(self) -> str:
        found = [part for part in (self.node and f"node {self.node}", self.provider_id) if part]
        return f"{self.name} ({', '.join(found)})" if found else self.name


HOLDS: Final = {
    resources.NODECLAIMS.kind: "; their instances may still run",
    resources.EC2NODECLASSES.kind: "; their instance profiles and launch templates may remain",
}
"""What a user may have to clean up by hand when objects of a kind are left."""


class TimedOut(Exception):
    """Objects are still there when the timeout passed: NodeClaims (and so, perhaps, instances), else EC2NodeClasses
    (and so, perhaps, their instance profiles and launch templates); the message names them."""

    def __init__(self, timeout: float, left: Sequence[Leftover], *, kind: str = resources.NODECLAIMS.kind) -> None:
        self.left = tuple(left)
        self.kind = kind
        named = ", ".join(item.describe() for item in self.left)
        holds = HOLDS.get(kind, "")
        super().__init__(
            f"{len(self.left)} {kind}(s) still there after {timeout:.0f} s: {named}; is the controller running? "
            f"(`kubectl describe {kind.lower()}` shows what holds each{holds})"
        )


@dataclass(frozen=True, slots=True)
class Deleted:
    """What one teardown asked to delete."""

    nodepools: tuple[str, ...]
    nodeclaims: tuple[str, ...]
    nodeclasses: tuple[str, ...] = ()


def leftover(claim: Mapping[str, Any]) -> Leftover:
    status = claim.get("status") or {}
    return Leftover(
        name=str(claim["metadata"]["name"]),
        node=str(status.get("nodeName") or ""),
        provider_id=str(status.get("providerID") or ""),
    )


async def _delete_all(kube: client.KubeClient, res: resources.Resource) -> tuple[str, ...]:
    """Delete every object of `res` not yet being deleted; the names asked for."""
    items, _ = await kube.list(res)
    asked = []
    for item in items:
        name = str(item["metadata"]["name"])
        if item["metadata"].get("deletionTimestamp"):
            continue  # already going: its finalizer is at work
        if await kube.delete(res, name):
            asked.append(name)
    return tuple(asked)


async def teardown(
    kube: client.KubeClient,
    *,
    clock: karpy_clock.Clock,
    within: float,
    poll: float = POLL_SECONDS,
    report: Callable[[str], None],
) -> Deleted:
    """Delete every NodePool, then every NodeClaim, and wait until no NodeClaim is left (deleting any that still
    appears, e.g. created just before its NodePool went); then every EC2NodeClass, waiting until the controller has
    finalized each. Raises `TimedOut` naming what is left after `within` seconds of `clock`; `report` gets one line
    per step."""
    deadline = clock.now() + within
    pools = await _delete_all(kube, resources.NODEPOOLS)
    report(f"deleted {len(pools)} NodePool(s): {', '.join(pools) or '-'}")
    claims = await _until_none_left(kube, resources.NODECLAIMS, clock=clock, within=within, deadline=deadline,
                                    poll=poll, report=report)  # fmt: skip
    classes = await _until_none_left(kube, resources.EC2NODECLASSES, clock=clock, within=within, deadline=deadline,
                                     poll=poll, report=report)  # fmt: skip
    return Deleted(nodepools=pools, nodeclaims=claims, nodeclasses=classes)


async def _until_none_left(
    kube: client.KubeClient,
    res: resources.Resource,
    *,
    clock: karpy_clock.Clock,
    within: float,
    deadline: float,
    poll: float,
    report: Callable[[str], None],
) -> tuple[str, ...]:
    """Delete every object of `res`, again each poll (one may still appear), until none is left; the names asked
    for. Raises `TimedOut` naming what is left at `deadline` (`within` seconds after the teardown began)."""
    asked = await _delete_all(kube, res)
    report(f"deleted {len(asked)} {res.kind}(s): {', '.join(asked) or '-'}")
    while True:
        items, _ = await kube.list(res)
        if not items:
            report(f"no {res.kind} left")
            return asked
        if clock.now() >= deadline:
            left = sorted((leftover(item) for item in items), key=lambda item: item.name)
            raise TimedOut(within, left, kind=res.kind)
        asked += await _delete_all(kube, res)
        named = ", ".join(leftover(item).name for item in items)
        report(f"waiting for {len(items)} {res.kind}(s) to go: {named}")
        await clock.sleep(min(poll, max(deadline - clock.now(), 0.0)))
