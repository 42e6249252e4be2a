"""Checkpoints around every side effect of a controller: the seam the crash tests kill it through.

`HookedClient` and `HookedCloud` wrap a KubeClient and a CloudProvider and call `await hook(point)` before and
after each write or cloud call, with points such as "before create nodeclaims", "after cloud.create". Reads pass
straight through. The default hook does nothing; `KillAt` cancels the controller at its n-th sighting of a point
and parks the caller so the operation never happens (before) or its result is never used (after).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from karpy.api import nodeclaim
from karpy.cloudprovider import types
from karpy.cloudprovider import wrapping as cloudprovider_wrapping
from karpy.kube import client, resources, wrapping

Hook = Callable[[str], Awaitable[None]]


async def no_hook(point: str) -> None:
    return None


class KillAt:
    """Cancel `target` (the controller's root task, set once it runs) when `point` is reached for the n-th time."""

    def __init__(self, point: str, *, nth: int = 1) -> None:
        self.point = point
        self.nth = nth
        self.seen = 0
        self.fired = asyncio.Event()
        self.target: asyncio.Task[Any] | None = None

    async def __call__(self, point: str) -> None:
        if point != self.point or self.fired.is_set():
            return
        self.seen += 1
        if self.seen < self.nth:
            return
        self.fired.set()
        if self.target is not None:
            self.target.cancel()
        await asyncio.Event().wait()  # never returns: the cancellation reaches us here


class HookedClient(wrapping.ReadThrough):
    """A KubeClient whose writes pass checkpoints "before|after <verb> <plural>[/<subresource>]"."""

    def __init__(self, inner: client.KubeClient, hook: Hook) -> None:
        super().__init__(inner)
        self._hook = hook

    async def _around(self, label: str, call: Callable[[], Awaitable[Any]]) -> Any:
        await self._hook(f"before {label}")
        out = await call()
        await self._hook(f"after {label}")
        return out

    async def create(self, res: resources.Resource, body: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = await self._around(f"create {res.plural}", lambda: self.inner.create(res, body))
        return out

    async def patch(
        self,
        res: resources.Resource,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        namespace: str = "",
        subresource: str = "",
    ) -> dict[str, Any]:
        label = f"patch {res.plural}" + (f"/{subresource}" if subresource else "")
        out: dict[str, Any] = await self._around(
            label, lambda: self.inner.patch(res, name, patch, namespace=namespace, subresource=subresource)
        )
        return out

    async def delete(
        self, res: resources.Resource, name: str, *, namespace: str = "", grace_period_seconds: int | None = None
    ) -> bool:
        out: bool = await self._around(
            f"delete {res.plural}",
            lambda: self.inner.delete(res, name, namespace=namespace, grace_period_seconds=grace_period_seconds),
        )
        return out

    async def evict(self, namespace: str, name: str) -> client.EvictionOutcome:
        out: client.EvictionOutcome = await self._around("evict pods", lambda: self.inner.evict(namespace, name))
        return out

    async def bind(self, namespace: str, name: str, node: str) -> None:
        await self._around("bind pods", lambda: self.inner.bind(namespace, name, node))


class HookedCloud(cloudprovider_wrapping.ReadThrough):
    """A CloudProvider whose create/delete pass checkpoints "before|after cloud.create" and "... cloud.delete"."""

    def __init__(self, inner: types.CloudProvider, hook: Hook) -> None:
        super().__init__(inner)
        self._hook = hook

    async def create(self, claim: nodeclaim.NodeClaim, *, adopt: bool = False) -> nodeclaim.NodeClaim:
        await self._hook("before cloud.create")
        out = await self.inner.create(claim, adopt=adopt)
        await self._hook("after cloud.create")
        return out

    async def delete(self, claim: nodeclaim.NodeClaim) -> None:
        await self._hook("before cloud.delete")
        await self.inner.delete(claim)
        await self._hook("after cloud.delete")
