"""The shared cloud-provider contract, run against AWSCloudProvider on the moto server (fixtures from moto_fixtures)."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Mapping, Sequence

import pytest
from tests.cloudprovider import contract
from tests.cloudprovider.aws.builders import make_nodeclass
from tests.cloudprovider.aws.moto_fixtures import NodeClasses

from karpy.api import meta, nodeclaim
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
        pool = contract.make_nodepool("default")
        counter = itertools.count()

        def make_claim(
            reqs: Sequence[meta.NodeSelectorRequirement], resources: Mapping[str, int]
        ) -> nodeclaim.NodeClaim:
            return contract.make_nodeclaim(pool, reqs, resources, name=f"default-{next(counter)}")

        return contract.Harness(
            provider=aws_provider,
            pool=pool,
            make_claim=make_claim,
            unknown_provider_id="aws:///us-east-1a/i-0123456789abcdef0",
        )
