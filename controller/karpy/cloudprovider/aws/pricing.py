"""Prices: on-demand from the Pricing API (12 h refresh) with the bundled static table as fallback, spot from
DescribeSpotPriceHistory. Isolated VPCs never call the Pricing API (aws: pkg/providers/pricing).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from botocore import exceptions as botocore_exceptions

from karpy import clock as karpy_clock
from karpy.cloudprovider.aws import cache, clients, error_codes

log = logging.getLogger(__name__)

ON_DEMAND_FILTERS = (
    ("serviceCode", "AmazonEC2"),
    ("preInstalledSw", "NA"),
    ("operatingSystem", "Linux"),
    ("capacitystatus", "Used"),
    ("marketoption", "OnDemand"),
    ("tenancy", "Shared"),
)
SPOT_PRODUCT_DESCRIPTIONS = ("Linux/UNIX", "Linux/UNIX (Amazon VPC)")


def get_products_request(region: str) -> dict[str, Any]:
    filters = [{"Field": "regionCode", "Type": "TERM_MATCH", "Value": region}]
    filters += [{"Field": f, "Type": "TERM_MATCH", "Value": v} for f, v in ON_DEMAND_FILTERS]
    return {"ServiceCode": "AmazonEC2", "Filters": filters}


def parse_price_list(price_list: Iterable[str], *, into: dict[str, float] | None = None) -> dict[str, float]:
    """instance type → $/h from GetProducts `PriceList` JSON strings, added to `into` (a new dict when None);
    zero and malformed prices are skipped."""
    out: dict[str, float] = {} if into is None else into
    for raw in price_list:
        try:
            item = json.loads(raw)
            name = sys.intern(item["product"]["attributes"]["instanceType"])
            for term in item["terms"]["OnDemand"].values():
                for dimension in term["priceDimensions"].values():
                    price = float(dimension["pricePerUnit"]["USD"])
                    if price > 0:
                        out[name] = price
        except (KeyError, TypeError, ValueError, AttributeError):
            log.debug("skipping unparseable price list entry")
    return out


SpotRows = dict[tuple[str, str], tuple[Any, float]]
"""(instance type, zone) → (timestamp, price) of the newest DescribeSpotPriceHistory row seen."""


def fold_spot_history(newest: SpotRows, history: Iterable[Mapping[str, Any]]) -> None:
    """Fold (a page of) DescribeSpotPriceHistory rows into `newest`."""
    for row in history:
        key = (sys.intern(str(row["InstanceType"])), sys.intern(str(row["AvailabilityZone"])))
        stamp = row.get("Timestamp")
        price = float(row["SpotPrice"])
        if key not in newest or (stamp is not None and stamp > newest[key][0]):
            newest[key] = (stamp, price)


class PricingProvider:
    def __init__(
        self,
        *,
        aws: clients.Clients,
        region: str,
        clock: karpy_clock.Now,
        static_price: Callable[[str], float | None],
        isolated_vpc: bool = False,
        refresh_interval: float = cache.PRICING_REFRESH,
    ) -> None:
        self._aws = aws
        self._region = region
        self._clock = clock
        self._static = static_price
        self._isolated = isolated_vpc
        self._interval = refresh_interval
        self._on_demand: dict[str, float] = {}
        self._spot: dict[tuple[str, str], float] = {}
        self._refreshed_at: float | None = None
        self._refreshing = asyncio.Lock()
        self.seq = 0

    def on_demand_price(self, instance_type: str) -> float | None:
        found = self._on_demand.get(instance_type)
        return found if found is not None else self._static(instance_type)

    def spot_price(self, instance_type: str, zone: str) -> float | None:
        return self._spot.get((instance_type, zone))

    async def ensure_fresh(self) -> None:
        """Refresh when due. A caller arriving during the first refresh waits for it, so that it never builds on the
        static prices (that catalog would be priced without spot prices, and then built again); once prices are in
        hand, a caller arriving during a refresh goes on with them, as upstream's instance types never wait for its
        pricing controller: a slow or failing Pricing API must not hold up every launch."""
        if self.seq and self._refreshing.locked():
            return
        async with self._refreshing:
            if self._refreshed_at is None or self._clock() - self._refreshed_at >= self._interval:
                await self.refresh()

    async def refresh(self) -> None:
        """Refresh both tables; a failure keeps the previous (or static) prices and is logged, not raised."""
        self._refreshed_at = self._clock()
        if not self._isolated:
            try:
                # Each page's products parsed as it arrives: the JSON strings of the whole price list are never
                # all held at once.
                parsed: dict[str, float] = {}
                await clients.fold_pages(
                    self._aws.pricing,
                    "get_products",
                    "PriceList",
                    consume=lambda page: parse_price_list(page, into=parsed),
                    **get_products_request(self._region),
                )
                if parsed:
                    self._on_demand = parsed
            except (botocore_exceptions.BotoCoreError, botocore_exceptions.ClientError) as exc:
                log.warning("on-demand pricing unavailable (%s), using the static table", error_codes.classify(exc))
        try:
            newest: SpotRows = {}
            await clients.fold_pages(
                self._aws.ec2,
                "describe_spot_price_history",
                "SpotPriceHistory",
                consume=functools.partial(fold_spot_history, newest),
                ProductDescriptions=list(SPOT_PRODUCT_DESCRIPTIONS),
                StartTime=self._clock(),
            )
            self._spot = {k: price for k, (_, price) in newest.items()}
        except (botocore_exceptions.BotoCoreError, botocore_exceptions.ClientError) as exc:
            log.warning("spot pricing unavailable (%s)", error_codes.classify(exc))
        self.seq += 1
