"""The shared cloud-provider contract, run against the fake provider (with its default and a real-AWS catalog)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from tests.cloudprovider import contract

from karpy.api import meta, nodeclaim
from karpy.cloudprovider import catalog
from karpy.cloudprovider.fake import provider


def _harness(fake: provider.FakeCloudProvider) -> contract.Harness:
    pool = contract.make_nodepool("default")
    counter = iter(range(1_000_000))

    def make_claim(reqs: Sequence[meta.NodeSelectorRequirement], resources: Mapping[str, int]) -> nodeclaim.NodeClaim:
        return contract.make_nodeclaim(pool, reqs, resources, name=f"default-{next(counter)}")

    return contract.Harness(
        provider=fake, pool=pool, make_claim=make_claim, unknown_provider_id="fake://test-zone-1/i-99999999"
    )


class TestFakeContract(contract.CloudProviderContract):
    @pytest.fixture
    def harness(self) -> contract.Harness:
        return _harness(provider.FakeCloudProvider())


class TestFakeWithAwsCatalogContract(contract.CloudProviderContract):
    @pytest.fixture
    def harness(self) -> contract.Harness:
        return _harness(provider.FakeCloudProvider(catalog.load("us-east-1", ["us-east-1a", "us-east-1b"])))
