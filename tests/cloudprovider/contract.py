"""The provider-neutral contract every `CloudProvider` must pass (fake and AWS run the same suite).

Use it by subclassing `CloudProviderContract` in a `test_*.py` module and overriding the `harness` fixture (sync or
async) with a `Harness` for your provider:

    class TestFakeContract(contract.CloudProviderContract):
        @pytest.fixture
        def harness(self) -> contract.Harness: ...

The harness says how to build a valid NodeClaim for the provider (node class ref, pool, whatever else it needs);
the tests only add requirements and resource requests to it.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from tests import builders

from karpy.api import labels, nodeclaim, nodepool
from karpy.cloudprovider import errors, types

MakeClaim = Callable[[Sequence[Mapping[str, Any]], Mapping[str, str]], nodeclaim.NodeClaim]


@dataclasses.dataclass(frozen=True)
class Harness:
    provider: types.CloudProvider
    pool: nodepool.NodePool
    make_claim: MakeClaim  # (requirements, resource requests, as manifests spell both) -> a launchable NodeClaim
    unknown_provider_id: str  # well-formed for this provider, but no such instance


def claims_of(pool: nodepool.NodePool) -> MakeClaim:
    """`Harness.make_claim` for `pool` (which has no requirements of its own): claims `<pool>-0`, `<pool>-1`, ... as
    the provisioner makes them, with the pool's label and node class, the requirements and the requests."""
    counter = itertools.count()

    def make_claim(requirements: Sequence[Mapping[str, Any]], requests: Mapping[str, str]) -> nodeclaim.NodeClaim:
        return builders.parsed_nodeclaim(
            f"{pool.name}-{next(counter)}",
            pool=pool.name,
            node_class=pool.template.node_class_ref.name,
            requirements=list(requirements),
            requests=dict(requests),
        )

    return make_claim


class CloudProviderContract:
    """Behaviour the reconcilers rely on. Subclasses provide the `harness` fixture."""

    @pytest.fixture
    def harness(self) -> Harness:
        raise NotImplementedError("override the harness fixture for your provider")

    async def test_instance_types_have_offerings_and_prices(self, harness: Harness) -> None:
        its = await harness.provider.instance_types(harness.pool)
        assert its, "a usable pool must have instance types"
        for it in its:
            assert it.labels[labels.LABEL_INSTANCE_TYPE] == it.name
            assert it.available_offerings(), f"{it.name} has no available offering"
            assert all(o.price > 0 and o.zone and o.capacity_type in labels.CAPACITY_TYPES for o in it.offerings)
            assert it.capacity.get(labels.RESOURCE_CPU, 0) > 0
            assert it.capacity.get(labels.RESOURCE_PODS, 0) > 0
            assert all(0 <= it.allocatable[k] <= v for k, v in it.capacity.items())

    async def test_create_returns_resolved_claim(self, harness: Harness) -> None:
        claim = harness.make_claim((), {labels.RESOURCE_CPU: "100m"})
        created = await harness.provider.create(claim)
        assert created.name == claim.name
        assert created.status.provider_id
        assert created.status.capacity[labels.RESOURCE_CPU] > 0
        assert created.status.allocatable[labels.RESOURCE_CPU] >= 100
        assert all(created.status.allocatable[k] <= v for k, v in created.status.capacity.items())
        got = created.metadata.labels
        for key in (labels.LABEL_INSTANCE_TYPE, labels.LABEL_ZONE, labels.LABEL_CAPACITY_TYPE, labels.LABEL_ARCH):
            assert got.get(key), f"created claim lacks label {key}"
        assert {k: got.get(k) for k in claim.metadata.labels} == dict(claim.metadata.labels)

    async def test_create_honours_requirements(self, harness: Harness) -> None:
        its = await harness.provider.instance_types(harness.pool)
        target = min(its, key=lambda it: (it.cheapest_price() or 0.0, it.name))
        offering = target.available_offerings()[-1]
        claim = harness.make_claim(
            (
                builders.requirement(labels.LABEL_INSTANCE_TYPE, "In", target.name),
                builders.requirement(labels.LABEL_ZONE, "In", offering.zone),
                builders.requirement(labels.LABEL_CAPACITY_TYPE, "In", offering.capacity_type),
            ),
            {},
        )
        created = await harness.provider.create(claim)
        assert created.metadata.labels[labels.LABEL_INSTANCE_TYPE] == target.name
        assert created.metadata.labels[labels.LABEL_ZONE] == offering.zone
        assert created.metadata.labels[labels.LABEL_CAPACITY_TYPE] == offering.capacity_type

    async def test_get_and_list_see_the_instance(self, harness: Harness) -> None:
        created = await harness.provider.create(harness.make_claim((), {}))
        got = await harness.provider.get(created.status.provider_id)
        assert got.status.provider_id == created.status.provider_id
        assert got.metadata.labels[labels.LABEL_INSTANCE_TYPE] == created.metadata.labels[labels.LABEL_INSTANCE_TYPE]
        listed = await harness.provider.list()
        assert created.status.provider_id in {c.status.provider_id for c in listed}

    async def test_delete_then_get_is_not_found(self, harness: Harness) -> None:
        created = await harness.provider.create(harness.make_claim((), {}))
        await harness.provider.delete(created)
        with pytest.raises(errors.NodeClaimNotFound):
            await harness.provider.get(created.status.provider_id)
        with pytest.raises(errors.NodeClaimNotFound):
            await harness.provider.delete(created)
        listed = await harness.provider.list()
        assert created.status.provider_id not in {c.status.provider_id for c in listed}

    async def test_get_unknown_is_not_found(self, harness: Harness) -> None:
        with pytest.raises(errors.NodeClaimNotFound):
            await harness.provider.get(harness.unknown_provider_id)

    async def test_impossible_requirements_are_insufficient_capacity(self, harness: Harness) -> None:
        claim = harness.make_claim((builders.requirement(labels.LABEL_INSTANCE_TYPE, "In", "no-such-type.nano"),), {})
        with pytest.raises(errors.InsufficientCapacity):
            await harness.provider.create(claim)

    async def test_impossible_resources_are_insufficient_capacity(self, harness: Harness) -> None:
        claim = harness.make_claim((), {labels.RESOURCE_CPU: "100000"})  # 100k cores
        with pytest.raises(errors.InsufficientCapacity):
            await harness.provider.create(claim)

    async def test_is_drifted_is_none_by_default(self, harness: Harness) -> None:
        created = await harness.provider.create(harness.make_claim((), {}))
        assert await harness.provider.is_drifted(created) is None
