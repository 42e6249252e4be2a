"""A base for `CloudProvider` wrappers that change only launches and terminations (dry run, the emulation's kill
checkpoints): every read goes to the wrapped provider untouched, written once here so every wrapper reads exactly as
the real provider does."""

from __future__ import annotations

from collections.abc import Sequence

from karpy.api import nodeclaim, nodepool
from karpy.cloudprovider import types


class ReadThrough:
    def __init__(self, inner: types.CloudProvider) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    async def get(self, provider_id: str) -> nodeclaim.NodeClaim:
        return await self.inner.get(provider_id)

    async def list(self) -> Sequence[nodeclaim.NodeClaim]:
        return await self.inner.list()

    async def instance_types(self, pool: nodepool.NodePool) -> Sequence[types.InstanceType]:
        return await self.inner.instance_types(pool)

    async def is_drifted(self, claim: nodeclaim.NodeClaim) -> types.DriftReason | None:
        return await self.inner.is_drifted(claim)

    def repair_policies(self) -> Sequence[types.RepairPolicy]:
        return self.inner.repair_policies()
