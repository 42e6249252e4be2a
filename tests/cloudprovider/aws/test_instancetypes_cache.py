"""The instance-type provider keeps one built catalog per node class: a rebuild forgets the one it supersedes."""

from __future__ import annotations

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
