"""ARC zonal shifts of the cluster: which zone ids the cluster is shifted away from now (aws:
pkg/providers/arczonalshift/arczonalshift.go), and the start-up check that the cluster is registered with ARC zonal
shift (aws: pkg/operator/operator.go ValidateZonalShiftEnablement).

`ZonalShifts` keeps, per zone id, the expiry and applied status of the last GetManagedResource answer; a zone is
shifted while its shift is applied and not expired on the injected clock. Without a client (ENABLE_ZONAL_SHIFT off,
upstream's no-op provider) nothing is ever shifted and nothing is called.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from botocore import exceptions as botocore_exceptions

from karpy import clock as karpy_clock
from karpy.cloudprovider import errors
from karpy.cloudprovider.aws import clients

log = logging.getLogger(__name__)

APPLIED = "APPLIED"
"""`appliedStatus` of a shift that is in effect (the other value is NOT_APPLIED)."""


@dataclass(frozen=True, slots=True)
class ShiftStatus:
    expiry: float
    """Epoch seconds the shift ends at."""
    applied: bool


class ZonalShiftNotEnabled(errors.StartupCheckFailed):
    """ENABLE_ZONAL_SHIFT is set and the cluster cannot be read from ARC zonal shift: start-up stops."""


class ZoneShifted(errors.CloudProviderError):
    """An instance in a shifted zone is left alone (no terminate, no tags) until the shift ends; the caller retries."""


def _epoch(value: Any) -> float:
    if isinstance(value, datetime.datetime):
        return value.timestamp()
    return float(value)


def statuses_from(answer: Mapping[str, Any]) -> dict[str, ShiftStatus]:
    """Zone id → status of a GetManagedResource answer's `zonalShifts` (pure)."""
    return {
        str(shift["awayFrom"]): ShiftStatus(
            expiry=_epoch(shift["expiryTime"]), applied=shift.get("appliedStatus") == APPLIED
        )
        for shift in answer.get("zonalShifts") or ()
    }


class ZonalShifts:
    """The cluster's zonal shifts as last read; `client` None is upstream's no-op provider."""

    def __init__(self, *, client: Any | None, clock: karpy_clock.Now, eks: Any = None, cluster_name: str = "") -> None:
        self._client = client
        self._eks = eks
        self._cluster_name = cluster_name
        self._clock = clock
        self._cluster_arn = ""
        self._statuses: dict[str, ShiftStatus] = {}
        self._hydrated = False

    async def start(self) -> None:
        """The start-up check: learn the cluster's ARN and make sure ARC zonal shift answers for it (raises
        ZonalShiftNotEnabled)."""
        if self._client is not None:
            self._cluster_arn = await validate_enablement(
                eks=self._eks, arc_zonal_shift=self._client, cluster_name=self._cluster_name
            )

    @property
    def enabled(self) -> bool:
        return self._client is not None

    async def update(self) -> None:
        """Read the cluster's shifts. An answer with none forgets every zone; otherwise the zones named are
        overwritten and the others kept until they expire, as upstream's UpdateZonalShifts does. AWS errors
        propagate (the caller retries on its next period)."""
        if self._client is None:
            return
        if not self._cluster_arn:
            await self.start()
        answer = await clients.call(self._client, "get_managed_resource", resourceIdentifier=self._cluster_arn)
        found = statuses_from(answer)
        if not found:
            self._statuses = {}
        else:
            self._statuses = {**self._statuses, **found}
        self._hydrated = True
        log.debug("zonal shifts updated", extra={"shifts": {z: s.applied for z, s in found.items()}})

    async def ensure_hydrated(self) -> None:
        """Read the shifts once before the first question (the loop keeps them current after that); a failed read
        is logged and leaves nothing shifted, to be tried again on the next question."""
        if self._hydrated or self._client is None:
            return
        try:
            await self.update()
        except (botocore_exceptions.BotoCoreError, botocore_exceptions.ClientError, ZonalShiftNotEnabled) as exc:
            log.error("reading zonal shifts failed: %s", exc)

    def is_shifted(self, zone_id: str) -> bool:
        status = self._statuses.get(zone_id)
        return status is not None and status.applied and status.expiry > self._clock()

    def shifted_zones(self) -> frozenset[str]:
        """The zone ids the cluster is shifted away from now."""
        return frozenset(zone_id for zone_id in self._statuses if self.is_shifted(zone_id))


async def validate_enablement(*, eks: Any, arc_zonal_shift: Any, cluster_name: str) -> str:
    """The cluster's ARN, once GetManagedResource answers for it; ZonalShiftNotEnabled naming the setting, the
    cluster and AWS's error otherwise."""
    try:
        described = await clients.call(eks, "describe_cluster", name=cluster_name)
        arn = str(described["cluster"]["arn"])
    except (botocore_exceptions.BotoCoreError, botocore_exceptions.ClientError, KeyError) as exc:
        raise ZonalShiftNotEnabled(
            f"ENABLE_ZONAL_SHIFT=true: eks:DescribeCluster for cluster {cluster_name!r} failed: {exc}"
        ) from exc
    try:
        await clients.call(arc_zonal_shift, "get_managed_resource", resourceIdentifier=arn)
    except (botocore_exceptions.BotoCoreError, botocore_exceptions.ClientError) as exc:
        raise ZonalShiftNotEnabled(
            f"ENABLE_ZONAL_SHIFT=true: cluster {arn} is not registered with ARC zonal shift "
            f"(arc-zonal-shift:GetManagedResource failed: {exc})"
        ) from exc
    return arn
