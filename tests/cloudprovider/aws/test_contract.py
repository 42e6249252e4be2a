"""The shared cloud-provider contract, run against AWSCloudProvider on the moto server (fixtures from moto_fixtures)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
from tests import builders
from tests.cloudprovider import contract
from tests.cloudprovider.aws.builders import make_nodeclass
from tests.cloudprovider.aws.moto_fixtures import NodeClasses

from karpy.cloudprovider.aws import provider
from karpy_emulator.aws import seeding


class TestAWSContract(contract.CloudProviderContract):
    @pytest.fixture
    async def harness(
        self,
        seeded: seeding.Seeded,
        make_provider: Callable[..., provider.AWSCloudProvider],
        nodeclasses: NodeClasses,
    ) -> contract.Harness:
        aws_provider = make_provider()
        nc = make_nodeclass(role=seeded.node_role, discovery=seeded.cluster_name)
        nc = dataclasses.replace(nc, status=await aws_provider.reconcile_nodeclass(nc))
        nodeclasses.items[nc.name] = nc
        pool = builders.parsed_nodepool(requirements=[])
        return contract.Harness(
            provider=aws_provider,
            pool=pool,
            make_claim=contract.claims_of(pool),
            unknown_provider_id="aws:///us-east-1a/i-0123456789abcdef0",
        )
