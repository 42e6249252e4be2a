"""The instance-type provider keeps one built catalog per node class: a rebuild forgets the one it supersedes, and
callers arriving during a build wait for it rather than build their own."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from tests import builders
from tests.cloudprovider.aws.moto_fixtures import Clock

from karpy.api import ec2nodeclass
from karpy.cloudprovider.aws import provider

Ready = tuple[provider.AWSCloudProvider, ec2nodeclass.EC2NodeClass]


async def test_an_ice_mark_or_a_price_refresh_replaces_the_built_catalog(ready: Ready, clock: Clock) -> None:
    aws_provider, _ = ready
    pool = builders.parsed_nodepool(requirements=[])
    built = aws_provider.instance_type_provider._built
    before = await aws_provider.instance_types(pool)
    assert len(built.items()) == 1

    zone = next(o.zone for o in before[0].offerings)
    aws_provider.unavailable.mark(before[0].name, zone, "on-demand")
    after_ice = await aws_provider.instance_types(pool)
    refused = next(t for t in after_ice if t.name == before[0].name)
    assert not next(o for o in refused.offerings if o.zone == zone and o.capacity_type == "on-demand").available
    assert len(built.items()) == 1  # the catalog from before the mark is gone, not left until its TTL

    await aws_provider.pricing.refresh()
    await aws_provider.instance_types(pool)
    assert len(built.items()) == 1
    assert next(iter(built.items()))[0][1:3] == (aws_provider.unavailable.seq, aws_provider.pricing.seq)


async def test_callers_at_start_share_one_catalog_built_on_the_refreshed_prices(
    ready: Ready, make_provider: Callable[[], provider.AWSCloudProvider]
) -> None:
    """The provisioner, the node class and the price loops all list at start: one build, one catalog kept."""
    aws_provider = make_provider()  # prices never refreshed, nothing built
    pool = builders.parsed_nodepool(requirements=[])
    first, second = await asyncio.gather(aws_provider.instance_types(pool), aws_provider.instance_types(pool))
    assert first is second
    keys = [key for key, _ in aws_provider.instance_type_provider._built.items()]
    assert [key[2] for key in keys] == [aws_provider.pricing.seq] == [1]
