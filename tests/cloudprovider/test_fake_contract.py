"""The shared cloud-provider contract, run against the fake provider (with its default and a real-AWS catalog)."""

from __future__ import annotations

import pytest
from tests import builders
from tests.cloudprovider import contract

from karpy.cloudprovider import catalog
from karpy.cloudprovider.fake import provider


def _harness(fake: provider.FakeCloudProvider) -> contract.Harness:
    pool = builders.parsed_nodepool(requirements=[])
    return contract.Harness(
        provider=fake,
        pool=pool,
        make_claim=contract.claims_of(pool),
        unknown_provider_id="fake://test-zone-1/i-99999999",
    )


class TestFakeContract(contract.CloudProviderContract):
    @pytest.fixture
    def harness(self) -> contract.Harness:
        return _harness(provider.FakeCloudProvider())


class TestFakeWithAwsCatalogContract(contract.CloudProviderContract):
    @pytest.fixture
    def harness(self) -> contract.Harness:
        return _harness(provider.FakeCloudProvider(catalog.load("us-east-1", ["us-east-1a", "us-east-1b"])))
