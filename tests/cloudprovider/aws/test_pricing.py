"""Pricing: GetProducts through botocore's Stubber on a recorded response; static fallback; isolated VPC."""

from __future__ import annotations

import asyncio
import datetime
import json
import pathlib
from typing import Any

import boto3
import pytest
from botocore import stub
from tests.cloudprovider.aws.moto_fixtures import Clock

from karpy.cloudprovider.aws import cache, clients, pricing

RECORDED = json.loads((pathlib.Path(__file__).parent / "pricing_get_products.json").read_text())
STATIC = {"m5.large": 0.5, "t3.micro": 0.0104}


def _clients(*, pricing_client: Any, ec2: Any) -> clients.Clients:
    return clients.Clients(ec2=ec2, ssm=None, iam=None, eks=None, sqs=None, pricing=pricing_client)


def _stubbed(service: str, region: str = "us-east-1") -> tuple[Any, stub.Stubber]:
    client = boto3.client(
        service, region_name=region, endpoint_url="http://127.0.0.1:9", aws_access_key_id="x", aws_secret_access_key="x"
    )
    return client, stub.Stubber(client)


@pytest.mark.parametrize(
    ("region", "endpoint"),
    [
        ("us-west-2", "us-east-1"),
        ("ap-northeast-1", "ap-south-1"),
        ("eu-west-1", "eu-central-1"),
        ("cn-north-1", "cn-northwest-1"),
    ],
)
def test_pricing_endpoint_region(region: str, endpoint: str) -> None:
    assert clients.pricing_region(region) == endpoint


async def test_on_demand_from_get_products_spot_from_history_and_12h_refresh() -> None:
    pricing_client, pstub = _stubbed("pricing")
    ec2, estub = _stubbed("ec2")
    request = pricing.get_products_request("us-east-1")
    pstub.add_response("get_products", RECORDED, {**request})
    spot_rows = [
        {
            "InstanceType": "m5.large",
            "AvailabilityZone": "us-east-1a",
            "SpotPrice": "0.040",
            "Timestamp": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
        },
        {
            "InstanceType": "m5.large",
            "AvailabilityZone": "us-east-1a",
            "SpotPrice": "0.035",
            "Timestamp": datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC),
        },
    ]
    estub.add_response("describe_spot_price_history", {"SpotPriceHistory": spot_rows}, None)
    clock = Clock()
    provider = pricing.PricingProvider(
        aws=_clients(pricing_client=pricing_client, ec2=ec2), region="us-east-1", clock=clock, static_price=STATIC.get
    )
    with pstub, estub:
        await provider.ensure_fresh()
        assert provider.on_demand_price("m5.large") == 0.096  # recorded, not the static 0.5
        assert provider.on_demand_price("c5.xlarge") == 0.17
        assert provider.on_demand_price("t3.micro") == 0.0104  # absent from the recording: static fallback
        assert provider.spot_price("m5.large", "us-east-1a") == 0.035  # the newest row wins
        clock.step(11 * 3600)
        await provider.ensure_fresh()  # not due: no call (the stubber would fail on an unexpected call)
        pstub.assert_no_pending_responses()


async def test_pricing_failure_falls_back_to_static_and_isolated_vpc_never_calls() -> None:
    pricing_client, pstub = _stubbed("pricing")
    ec2, estub = _stubbed("ec2")
    pstub.add_client_error("get_products", service_error_code="AccessDeniedException", http_status_code=400)
    estub.add_response("describe_spot_price_history", {"SpotPriceHistory": []}, None)
    provider = pricing.PricingProvider(
        aws=_clients(pricing_client=pricing_client, ec2=ec2), region="us-east-1", clock=Clock(), static_price=STATIC.get
    )
    with pstub, estub:
        await provider.refresh()
    assert provider.on_demand_price("m5.large") == 0.5
    ec2b, estub2 = _stubbed("ec2")
    estub2.add_response("describe_spot_price_history", {"SpotPriceHistory": []}, None)
    isolated = _isolated(ec2b)
    with estub2:
        await isolated.refresh()  # pricing client is None: any Pricing call would raise
    assert isolated.on_demand_price("m5.large") == 0.5


def _isolated(ec2: Any, clock: Clock | None = None) -> pricing.PricingProvider:
    """A provider in an isolated VPC (no Pricing client: on-demand prices are the static ones)."""
    return pricing.PricingProvider(
        aws=_clients(pricing_client=None, ec2=ec2),
        region="us-east-1",
        clock=clock or Clock(),
        static_price=STATIC.get,
        isolated_vpc=True,
    )


async def test_a_caller_arriving_during_a_refresh_waits_for_its_prices() -> None:
    ec2, estub = _stubbed("ec2")
    row = {"InstanceType": "m5.large", "AvailabilityZone": "us-east-1a", "SpotPrice": "0.030"}
    estub.add_response("describe_spot_price_history", {"SpotPriceHistory": [row]}, None)
    provider = _isolated(ec2)
    seen: list[tuple[int, float | None]] = []

    async def caller() -> None:
        await provider.ensure_fresh()
        seen.append((provider.seq, provider.spot_price("m5.large", "us-east-1a")))

    with estub:  # one response: a second describe would fail the stubber
        await asyncio.gather(caller(), caller())
        estub.assert_no_pending_responses()
    assert seen == [(1, 0.030), (1, 0.030)]


async def test_once_prices_are_in_hand_a_caller_does_not_wait_for_a_refresh() -> None:
    # upstream's instance types read the prices its pricing controller last fetched, and never wait for the next
    ec2, estub = _stubbed("ec2")
    for price in ("0.030", "0.040"):
        row = {"InstanceType": "m5.large", "AvailabilityZone": "us-east-1a", "SpotPrice": price}
        estub.add_response("describe_spot_price_history", {"SpotPriceHistory": [row]}, None)
    clock = Clock()
    provider = _isolated(ec2, clock)
    seen: list[tuple[int, float | None]] = []

    async def caller() -> None:
        await provider.ensure_fresh()
        seen.append((provider.seq, provider.spot_price("m5.large", "us-east-1a")))

    with estub:
        await provider.ensure_fresh()
        clock.step(cache.PRICING_REFRESH)
        await asyncio.gather(caller(), caller())  # the first refreshes; the second arrives during it
        estub.assert_no_pending_responses()
    assert seen == [(1, 0.030), (2, 0.040)]
