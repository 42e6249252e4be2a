"""A node class's EFA-only interfaces reach the instance types the AWS provider lists: m6idn.32xlarge offers 345
pods, not 394, with one on network card 0 (aws: pkg/providers/instancetype/suite_test.go "Network Interfaces")."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest
from tests import builders
from tests.cloudprovider.aws.moto_fixtures import REGION, NodeClasses, boto_session, with_ready_nodeclass

from karpy.api import ec2nodeclass, labels, quantity
from karpy.cloudprovider.aws import clients, provider
from karpy_emulator.aws import seeding

EFA_ONLY = ec2nodeclass.NetworkInterfaceType.EFA_ONLY
INTERFACE = ec2nodeclass.NetworkInterfaceType.INTERFACE


def nic(card: int, device: int, kind: ec2nodeclass.NetworkInterfaceType) -> ec2nodeclass.NetworkInterface:
    return ec2nodeclass.NetworkInterface(network_card_index=card, device_index=device, interface_type=kind)


CASES = (
    ((), 394, 2),
    ((nic(0, 0, INTERFACE), nic(1, 0, EFA_ONLY)), 394, 1),
    ((nic(0, 0, INTERFACE), nic(0, 1, EFA_ONLY)), 345, 1),
    ((), 394, 2),
)
"""(spec.networkInterfaces, pods, EFAs), listed one after the other by one provider: a change of the interfaces
builds the instance types again rather than answering from the cache of the previous ones."""


async def test_efa_only_interfaces_on_card_0_lower_the_listed_pods(
    seeded: seeding.Seeded,
    make_provider: Callable[..., provider.AWSCloudProvider],
    nodeclasses: NodeClasses,
    request: pytest.FixtureRequest,
) -> None:
    aws = clients.build_clients(region=REGION, max_attempts=3, session=boto_session(request.config))
    seeding.install_fast_catalog(aws.ec2, region=REGION, families=frozenset({"m6idn"}))
    aws_provider, nc = await with_ready_nodeclass(
        make_provider(aws_clients=aws), seeded=seeded, nodeclasses=nodeclasses
    )
    seen = []
    for interfaces, _, _ in CASES:
        nodeclasses.items[nc.name] = dataclasses.replace(
            nc, spec=dataclasses.replace(nc.spec, network_interfaces=interfaces)
        )
        listed = await aws_provider.instance_types(builders.parsed_nodepool(requirements=[]))
        m6idn = next(t for t in listed if t.name == "m6idn.32xlarge")
        seen.append((m6idn.capacity[labels.RESOURCE_PODS], m6idn.capacity[labels.RESOURCE_EFA]))
    assert seen == [(pods * quantity.MILLI, efa * quantity.MILLI) for _, pods, efa in CASES]


async def test_a_shape_that_cannot_take_the_interfaces_is_offered_unavailable(
    seeded: seeding.Seeded,
    make_provider: Callable[..., provider.AWSCloudProvider],
    nodeclasses: NodeClasses,
    request: pytest.FixtureRequest,
) -> None:
    """suite_test.go "should mark instance type offering as unavailable when it does not support network interface
    configuration": EFA-only interfaces on cards 0-4, where m6idn.32xlarge has two cards and two EFAs."""
    aws = clients.build_clients(region=REGION, max_attempts=3, session=boto_session(request.config))
    seeding.install_fast_catalog(aws.ec2, region=REGION, families=frozenset({"m6idn"}))
    aws_provider, nc = await with_ready_nodeclass(
        make_provider(aws_clients=aws), seeded=seeded, nodeclasses=nodeclasses
    )
    two = (nic(0, 0, INTERFACE), nic(0, 1, EFA_ONLY))
    five = (*two, *(nic(card, 0, EFA_ONLY) for card in range(1, 5)))
    available = []
    for interfaces in (two, five):
        nodeclasses.items[nc.name] = dataclasses.replace(
            nc, spec=dataclasses.replace(nc.spec, network_interfaces=interfaces)
        )
        listed = await aws_provider.instance_types(builders.parsed_nodepool(requirements=[]))
        m6idn = next(t for t in listed if t.name == "m6idn.32xlarge")
        assert m6idn.offerings  # still offered, as upstream: unavailable, not gone
        available.append({o.available for o in m6idn.offerings})
    assert available == [{True}, {False}]
