"""`karpy teardown`: before karpy is uninstalled, hand every node it manages to the running controller and wait
until each is gone, so no instance outlives the controller, its IAM role and its queue.

Run by the chart's pre-delete hook (charts/karpy/templates/teardown.yaml), i.e. on `helm uninstall` and on the
`pulumi destroy` of a stack holding the release, never on an upgrade. Every NodePool goes first, whoever declared
it (the stack, kubectl, a GitOps tool), so that the pods the drains evict cannot make the controller launch new
nodes; then every NodeClaim. The controller's termination finalizer drains each node, terminates its instance and
only then lets the NodeClaim go, so "no NodeClaim left" means "no instance left". Whatever is still there when the
timeout passes is named in the error, and the uninstall fails instead of orphaning it.
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


class TimedOut(Exception):
    """NodeClaims (and so, perhaps, instances) are still there when the timeout passed; the message names them."""

    def __init__(self, timeout: float, left: Sequence[Leftover]) -> None:
        self.left = tuple(left)
        named = ", ".join(item.describe() for item in self.left)
        super().__init__(
            f"{len(self.left)} NodeClaim(s) still there after {timeout:.0f} s: {named}; is the controller running? "
            "(`kubectl describe nodeclaim` shows what holds each; their instances may still run)"
        )


@dataclass(frozen=True, slots=True)
class Deleted:
    """What one teardown asked to delete."""

    nodepools: tuple[str, ...]
    nodeclaims: tuple[str, ...]


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
    report: Callable[[str], None] = lambda _: None,
) -> Deleted:
    """Delete every NodePool, then every NodeClaim, and wait until no NodeClaim is left (deleting any that still
    appears, e.g. created just before its NodePool went). Raises `TimedOut` naming what is left after `within`
    seconds of `clock`; `report` gets one line per step."""
    deadline = clock.now() + within
    pools = await _delete_all(kube, resources.NODEPOOLS)
    report(f"deleted {len(pools)} NodePool(s): {', '.join(pools) or '-'}")
    claims = await _delete_all(kube, resources.NODECLAIMS)
    report(f"deleted {len(claims)} NodeClaim(s): {', '.join(claims) or '-'}")
    while True:
        items, _ = await kube.list(resources.NODECLAIMS)
        if not items:
            report("no NodeClaim left")
            return Deleted(nodepools=pools, nodeclaims=claims)
        if clock.now() >= deadline:
            raise TimedOut(within, sorted((leftover(item) for item in items), key=lambda item: item.name))
        late = await _delete_all(kube, resources.NODECLAIMS)
        claims += late
        report(f"waiting for {len(items)} NodeClaim(s) to be terminated: {', '.join(leftover(i).name for i in items)}")
        await clock.sleep(min(poll, max(deadline - clock.now(), 0.0)))
