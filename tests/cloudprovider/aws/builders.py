"""Shared value builders for the AWS provider tests (no I/O)."""

from __future__ import annotations

import functools
from collections.abc import Mapping

from tests import builders

from karpy.api import labels, quantity
from karpy.cloudprovider import types

OD = labels.CAPACITY_TYPE_ON_DEMAND
SPOT = labels.CAPACITY_TYPE_SPOT


def make_instance_type(
    name: str,
    *,
    cpu: int = 2,
    memory_gib: int = 8,
    prices: Mapping[tuple[str, str], float] | None = None,
    extra_capacity: Mapping[str, int] | None = None,
    arch: str = "amd64",
) -> types.InstanceType:
    """`prices` maps (zone, capacity type) → $/h; default one on-demand offering in zone a."""
    offers = prices or {("us-east-1a", OD): 0.1}
    capacity = {
        labels.RESOURCE_CPU: cpu * 1000,
        labels.RESOURCE_MEMORY: memory_gib * quantity.GI,
        labels.RESOURCE_PODS: 110 * 1000,
        **(extra_capacity or {}),
    }
    return types.InstanceType(
        name=name,
        labels={labels.LABEL_INSTANCE_TYPE: name, labels.LABEL_ARCH: arch, labels.LABEL_OS: "linux"},
        capacity=capacity,
        offerings=tuple(types.Offering(zone=z, capacity_type=ct, price=p) for (z, ct), p in offers.items()),
    )


make_nodeclass = functools.partial(
    builders.parsed_ec2nodeclass,
    uid="uid-default",
    generation=1,
    role="KarpenterNodeRole-test",
    discovery="test-cluster",
)
"""EC2NodeClass `default` as the AWS tests start from: generation 1, role KarpenterNodeRole-test, subnets and
security groups of cluster test-cluster (moto_fixtures.CLUSTER); a test sets a resolved status with
dataclasses.replace, as the nodeclass reconciler does."""
