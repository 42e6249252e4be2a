"""A `CloudProvider` that times every method and counts its errors, for one calling controller (core:
cloudprovider/metrics/cloudprovider.go, the decorator behind `karpenter_cloudprovider_duration_seconds` and
`karpenter_cloudprovider_errors_total`). Upstream reads the calling controller from the context; karpy gives each
controller its own wrapper instead. Time comes from the injected clock."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from typing import Final

from karpy import clock as karpy_clock
from karpy.api import nodeclaim, nodepool
from karpy.cloudprovider import errors, types

ERROR_LABELS: Final[tuple[tuple[type[errors.CloudProviderError], str], ...]] = (
    (errors.InsufficientCapacity, "InsufficientCapacityError"),
    (errors.NodeClaimNotFound, "NodeClaimNotFoundError"),
    (errors.NodeClassNotReady, "NodeClassNotReadyError"),
)
"""Upstream's error label of the error kinds it names; every other error is labelled ""."""

Observe = Callable[[str, str, float], None]
"""(controller, method, seconds) per call."""
Failed = Callable[[str, str, str], None]
"""(controller, method, error label) per call that raised."""


def error_label(error: Exception) -> str:
    return next((label for kind, label in ERROR_LABELS if isinstance(error, kind)), "")


class MeteredProvider:
    def __init__(
        self,
        inner: types.CloudProvider,
        controller: str,
        *,
        clock: karpy_clock.Clock,
        observe: Observe,
        failed: Failed,
    ) -> None:
        self.inner = inner
        self._controller = controller
        self._clock = clock
        self._observe = observe
        self._failed = failed

    @property
    def name(self) -> str:
        return self.inner.name

    @contextlib.contextmanager
    def _measured(self, method: str) -> Iterator[None]:
        start = self._clock.now()
        try:
            yield
        except Exception as error:
            self._failed(self._controller, method, error_label(error))
            raise
        finally:
            self._observe(self._controller, method, self._clock.now() - start)

    async def create(self, claim: nodeclaim.NodeClaim, *, adopt: bool = False) -> nodeclaim.NodeClaim:
        with self._measured("Create"):
            return await self.inner.create(claim, adopt=adopt)

    async def delete(self, claim: nodeclaim.NodeClaim) -> None:
        with self._measured("Delete"):
            await self.inner.delete(claim)

    async def get(self, provider_id: str) -> nodeclaim.NodeClaim:
        with self._measured("Get"):
            return await self.inner.get(provider_id)

    async def list(self) -> Sequence[nodeclaim.NodeClaim]:
        with self._measured("List"):
            return await self.inner.list()

    async def instance_types(self, pool: nodepool.NodePool) -> Sequence[types.InstanceType]:
        with self._measured("GetInstanceTypes"):
            return await self.inner.instance_types(pool)

    async def is_drifted(self, claim: nodeclaim.NodeClaim) -> types.DriftReason | None:
        with self._measured("IsDrifted"):
            return await self.inner.is_drifted(claim)

    def repair_policies(self) -> Sequence[types.RepairPolicy]:
        return self.inner.repair_policies()
