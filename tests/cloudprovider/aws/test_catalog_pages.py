"""The catalog's describe calls are folded page by page into what the provider keeps, and that changes nothing built.

- `clients.fold_pages` hands each page over before the next one is fetched (the raw pages are never all held);
- the provider's catalog for the moto account is the one built from the raw records, as before shapes were compacted;
- a re-describe after the 5-minute TTL does not keep the expired shapes alive while it runs.
"""

from __future__ import annotations

import datetime
from typing import Any

import boto3
import pytest
from botocore import stub
from moto.ec2.models import instance_types as models_instance_types
from tests.cloudprovider.aws import moto_fixtures

from karpy.api import ec2nodeclass
from karpy.cloudprovider import catalog, heap
from karpy.cloudprovider.aws import cache, clients, instancetypes, pricing, provider

Ready = tuple[provider.AWSCloudProvider, ec2nodeclass.EC2NodeClass]


def _stubbed_ec2() -> tuple[Any, stub.Stubber]:
    client = boto3.client(
        "ec2",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",
        aws_access_key_id="x",
        aws_secret_access_key="x",
    )
    return client, stub.Stubber(client)


async def test_each_page_is_handed_over_before_the_next_is_fetched() -> None:
    ec2, stubber = _stubbed_ec2()
    stubber.add_response(
        "describe_instance_types", {"InstanceTypes": [{"InstanceType": "m5.large"}], "NextToken": "2"}, {}
    )
    stubber.add_response(
        "describe_instance_types", {"InstanceTypes": [{"InstanceType": "c5.large"}]}, {"NextToken": "2"}
    )
    seen: list[str] = []
    ec2.meta.events.register("after-call.ec2.DescribeInstanceTypes", lambda **_: seen.append("fetched"))

    def consume(page: Any) -> None:
        seen.extend(f"handed {info['InstanceType']}" for info in page)

    with stubber:
        await clients.fold_pages(ec2, "describe_instance_types", "InstanceTypes", consume=consume)
    assert seen == ["fetched", "handed m5.large", "fetched", "handed c5.large"]


async def test_spot_history_pages_fold_to_the_newest_price_per_type_and_zone() -> None:
    ec2, stubber = _stubbed_ec2()

    def row(zone: str, price: str, day: int) -> dict[str, Any]:
        stamp = datetime.datetime(2026, 1, day, tzinfo=datetime.UTC)
        return {"InstanceType": "m5.large", "AvailabilityZone": zone, "SpotPrice": price, "Timestamp": stamp}

    stubber.add_response(
        "describe_spot_price_history",
        {"SpotPriceHistory": [row("us-east-1a", "0.030", 2), row("us-east-1b", "0.050", 1)], "NextToken": "2"},
        None,
    )
    stubber.add_response("describe_spot_price_history", {"SpotPriceHistory": [row("us-east-1a", "0.040", 1)]}, None)
    aws = clients.Clients(ec2=ec2, ssm=None, iam=None, eks=None, sqs=None, pricing=None)
    prices = pricing.PricingProvider(
        aws=aws, region="us-east-1", clock=moto_fixtures.Clock(), static_price=lambda _: None, isolated_vpc=True
    )
    with stubber:
        await prices.refresh()
    assert prices.spot_price("m5.large", "us-east-1a") == 0.030  # the newer row, though on the earlier page
    assert prices.spot_price("m5.large", "us-east-1b") == 0.050


def _raw_catalog(aws_provider: provider.AWSCloudProvider, nc: ec2nodeclass.EC2NodeClass) -> list[Any]:
    """The catalog as it was built before shapes were compacted: from moto's records as they are, and offered zones
    one frozenset per type."""
    wanted = moto_fixtures.CATALOG_FAMILIES
    shapes = [s for name, s in models_instance_types.INSTANCE_TYPES.items() if name.split(".")[0] in wanted]
    zones: dict[str, set[str]] = {}
    for row in models_instance_types.INSTANCE_TYPE_OFFERINGS["availability-zone"][moto_fixtures.REGION]:
        zones.setdefault(row["InstanceType"], set()).add(row["Location"])
    return instancetypes.build_catalog(
        shapes,
        offered={name: frozenset(found) for name, found in zones.items()},
        nodeclass=nc,
        settings=instancetypes.ShapeSettings(moto_fixtures.REGION),
        prices=aws_provider.pricing,
        unavailable=aws_provider.unavailable,
        eni_limits=catalog.eni_limits,
    )


async def test_the_moto_accounts_catalog_is_the_one_built_from_the_raw_records(ready: Ready) -> None:
    aws_provider, nc = ready
    built = await aws_provider.instance_type_provider.list(nc)
    assert len(built) > 50
    assert list(built) == _raw_catalog(aws_provider, nc)


async def test_a_redescribe_does_not_keep_the_expired_shapes_alive(
    ready: Ready, aws: clients.Clients, clock: moto_fixtures.Clock
) -> None:
    aws_provider, nc = ready
    types_provider = aws_provider.instance_type_provider
    first = await types_provider.list(nc)
    held_during: list[int] = []

    def describing(**_: Any) -> None:
        held_during.append(len(types_provider._shapes._entries) + len(types_provider._built._entries))

    aws.ec2.meta.events.register_first("before-call.ec2.DescribeInstanceTypes", describing)
    clock.step(cache.INSTANCE_TYPES_TTL + 1)
    again = await types_provider.list(nc)
    assert held_during == [0]  # neither the expired shapes nor the expired catalog while describing
    assert again == first
    assert again is not first


async def test_the_heap_is_trimmed_once_after_a_build_that_described(
    ready: Ready, make_provider: Any, clock: moto_fixtures.Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, nc = ready
    aws_provider = make_provider()
    trims: list[int] = []

    def release() -> bool:
        trims.append(1)
        return True

    monkeypatch.setattr(heap, "release", release)  # the provider calls it by its module's name
    await aws_provider.instance_type_provider.list(nc)
    assert trims == [1]
    aws_provider.unavailable.mark("m5.large", nc.status.subnets[0].zone, "spot")
    await aws_provider.instance_type_provider.list(nc)  # rebuilt from the cached shapes: nothing new to give back
    assert trims == [1]
    clock.step(cache.INSTANCE_TYPES_TTL + 1)
    await aws_provider.instance_type_provider.list(nc)
    assert trims == [1, 1]
