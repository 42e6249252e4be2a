"""Fake-provider behaviour beyond the shared contract: launch choice, knobs, determinism."""

from __future__ import annotations

from typing import Any

import pytest
from tests import builders

from karpy.api import labels, quantity
from karpy.cloudprovider import errors, types
from karpy.cloudprovider.fake import generator, provider

CPU = labels.RESOURCE_CPU
POOL = builders.parsed_nodepool(requirements=[])


def offering(zone: str, price: float, *, capacity_type: str = "on-demand", available: bool = True) -> types.Offering:
    return types.Offering(zone=zone, capacity_type=capacity_type, price=price, available=available)


CHEAP = generator.new_instance_type("cheap", offerings=[offering("z1", 0.5), offering("z2", 0.4, available=False)])
PRICEY = generator.new_instance_type("pricey", {CPU: 8000}, offerings=[offering("z1", 2.0), offering("z2", 1.0)])


async def test_launches_the_cheapest_available_compatible_offering() -> None:
    fake = provider.FakeCloudProvider([PRICEY, CHEAP])
    created = await fake.create(builders.parsed_nodeclaim("c", requirements=[]))
    # z2 at 0.4 is unavailable, so cheap/z1 at 0.5 wins over pricey's 1.0.
    assert created.metadata.labels[labels.LABEL_INSTANCE_TYPE] == "cheap"
    assert created.metadata.labels[labels.LABEL_ZONE] == "z1"
    assert created.status.provider_id == "fake://z1/i-00000001"
    assert created.status.allocatable[CPU] == 4000 - 100  # upstream fake kube-reserves 100m


@pytest.mark.parametrize(
    ("reqs", "cpu", "expected"),  # cpu: what the claim requests, if anything
    [
        ((builders.requirement(labels.LABEL_ZONE, "In", "z2"),), None, ("pricey", "z2")),
        ((), "6", ("pricey", "z2")),  # only pricey's 7.9 allocatable CPUs fit
        ((builders.requirement(labels.LABEL_INSTANCE_TYPE, "NotIn", "cheap"),), None, ("pricey", "z2")),
        ((builders.requirement("team", "In", "a"),), None, ("cheap", "z1")),  # custom labels come from the claim
        ((builders.requirement(labels.LABEL_INSTANCE_GPU_NAME, "NotIn", "a10g"),), None, ("cheap", "z1")),
    ],
)
async def test_choice_respects_requirements_and_resources(
    reqs: tuple[dict[str, Any], ...], cpu: str | None, expected: tuple[str, str]
) -> None:
    claim = builders.parsed_nodeclaim("c", requirements=list(reqs), requests={CPU: cpu} if cpu else None)
    created = await provider.FakeCloudProvider([PRICEY, CHEAP]).create(claim)
    assert (created.metadata.labels[labels.LABEL_INSTANCE_TYPE], created.metadata.labels[labels.LABEL_ZONE]) == expected


async def test_missing_well_known_label_means_does_not_exist() -> None:
    fake = provider.FakeCloudProvider([CHEAP])
    with pytest.raises(errors.InsufficientCapacity):
        await fake.create(
            builders.parsed_nodeclaim(
                "c", requirements=[builders.requirement(labels.LABEL_INSTANCE_GPU_NAME, "In", "a10g")]
            )
        )


async def test_next_error_is_raised_once() -> None:
    fake = provider.FakeCloudProvider([CHEAP])
    fake.next_error = errors.InsufficientCapacity("boom")
    with pytest.raises(errors.InsufficientCapacity, match="boom"):
        await fake.create(builders.parsed_nodeclaim("c", requirements=[]))
    assert (await fake.create(builders.parsed_nodeclaim("c", requirements=[]))).status.provider_id
    assert len(fake.create_calls) == 2


async def test_allowed_creates_caps_launches() -> None:
    fake = provider.FakeCloudProvider([CHEAP])
    fake.allowed_creates = 1
    await fake.create(builders.parsed_nodeclaim("a", requirements=[]))
    with pytest.raises(errors.CreateError) as failure:
        await fake.create(builders.parsed_nodeclaim("b", requirements=[]))
    assert failure.value.reason is errors.CreateErrorReason.INTERNAL
    assert len(await fake.list()) == 1


async def test_instance_types_per_pool_win_over_the_global_catalog() -> None:
    fake = provider.FakeCloudProvider([CHEAP], instance_types_by_pool={"default": [PRICEY]})
    assert [it.name for it in await fake.instance_types(POOL)] == ["pricey"]
    assert [it.name for it in await fake.instance_types(builders.parsed_nodepool("other", requirements=[]))] == [
        "cheap"
    ]
    assert (await fake.create(builders.parsed_nodeclaim("c", requirements=[]))).metadata.labels[
        labels.LABEL_INSTANCE_TYPE
    ] == "pricey"


async def test_drifted_knob_and_reset() -> None:
    fake = provider.FakeCloudProvider([CHEAP])
    created = await fake.create(builders.parsed_nodeclaim("c", requirements=[]))
    fake.drifted = types.DriftReason.AMI
    fake.catalog = []
    assert await fake.is_drifted(created) is types.DriftReason.AMI
    await fake.delete(created)
    fake.reset()
    assert await fake.is_drifted(created) is None
    assert (fake.create_calls, fake.delete_calls, fake.instances) == ([], [], {})
    assert [it.name for it in await fake.instance_types(POOL)] == ["cheap"]
    assert (
        await fake.create(builders.parsed_nodeclaim("c", requirements=[]))
    ).status.provider_id == "fake://z1/i-00000001"  # counter restarts


async def test_ids_are_deterministic_per_instance() -> None:
    a, b = provider.FakeCloudProvider([CHEAP]), provider.FakeCloudProvider([CHEAP])
    ids_a = [(await a.create(builders.parsed_nodeclaim(str(i), requirements=[]))).status.provider_id for i in range(3)]
    ids_b = [(await b.create(builders.parsed_nodeclaim(str(i), requirements=[]))).status.provider_id for i in range(3)]
    assert ids_a == ids_b == ["fake://z1/i-00000001", "fake://z1/i-00000002", "fake://z1/i-00000003"]


def test_fits_ignores_zero_requests() -> None:
    assert provider.fits({CPU: 0, "nvidia.com/gpu": 0}, {CPU: 1})
    assert not provider.fits({"nvidia.com/gpu": 1}, {CPU: quantity.parse("64")})
