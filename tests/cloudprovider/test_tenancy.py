"""Instance tenancy on the fake provider and as a pure choice (aws: pkg/providers/instance/instance.go
getTenancyType: default whenever allowed, dedicated only when asked for alone)."""

from __future__ import annotations

import pytest
from tests import builders

from karpy.api import labels, meta
from karpy.cloudprovider import tenancy, types
from karpy.cloudprovider.fake import generator, provider

TENANCY = labels.LABEL_INSTANCE_TENANCY
IN, NOT_IN, EXISTS = meta.Operator.IN, meta.Operator.NOT_IN, meta.Operator.EXISTS


def _req(op: meta.Operator, *values: str) -> meta.NodeSelectorRequirement:
    return meta.NodeSelectorRequirement(key=TENANCY, operator=op, values=values)


@pytest.mark.parametrize(
    ("terms", "expected"),
    [
        ((), "default"),
        ((_req(IN, "default"),), "default"),
        ((_req(IN, "dedicated"),), "dedicated"),
        ((_req(IN, "default", "dedicated"),), "default"),
        ((_req(NOT_IN, "default"),), "dedicated"),
        ((_req(EXISTS),), "default"),
    ],
)
def test_default_unless_only_dedicated_is_allowed(
    terms: tuple[meta.NodeSelectorRequirement, ...], expected: str
) -> None:
    assert tenancy.choose(terms) == expected


TYPES = [
    generator.new_instance_type("m5.large", offerings=[types.Offering(zone="z1", capacity_type="on-demand", price=0.1)])
]


async def test_a_dedicated_only_pool_sees_and_launches_dedicated_types_on_the_fake() -> None:
    fake = provider.FakeCloudProvider(TYPES)
    dedicated_only = [builders.requirement(TENANCY, "In", "dedicated")]
    pool = builders.parsed_nodepool("dedicated", requirements=dedicated_only)
    assert {it.labels.get(TENANCY, "default") for it in await fake.instance_types(pool)} == {"dedicated"}
    assert {
        it.labels.get(TENANCY, "default") for it in await fake.instance_types(builders.parsed_nodepool(requirements=[]))
    } == {"default"}
    # as the provisioner makes it from the pool: the pool's label and requirements
    created = await fake.create(
        builders.parsed_nodeclaim("dedicated-claim", pool="dedicated", requirements=dedicated_only)
    )
    assert created.metadata.labels[TENANCY] == "dedicated"
