"""EFA-only network interfaces in ENI-limited pod density and the EFA count, ported from upstream's instance type
suite (aws: pkg/providers/instancetype/suite_test.go; the formulas of pkg/providers/instancetype/types.go
ENILimitedPods and efas). m6idn.32xlarge: 8 ENIs on network card 0 (16 over two cards) × 50 IPv4, 2 EFAs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from karpy.api import ec2nodeclass, labels, quantity
from karpy.cloudprovider import ec2shapes

Record = tuple[Mapping[str, Any], Mapping[str, Any]]
EFA_ONLY = ec2nodeclass.NetworkInterfaceType.EFA_ONLY
INTERFACE = ec2nodeclass.NetworkInterfaceType.INTERFACE


def nic(card: int, device: int, kind: ec2nodeclass.NetworkInterfaceType) -> ec2nodeclass.NetworkInterface:
    return ec2nodeclass.NetworkInterface(network_card_index=card, device_index=device, interface_type=kind)


@dataclass(frozen=True)
class Case:
    upstream: str
    instance_type: str
    nics: tuple[ec2nodeclass.NetworkInterface, ...]
    pods: int
    efa: int
    reserved_enis: int = 0


CASES = [
    Case("should default max pods based off of network interfaces (t3.large)", "t3.large", (), 35, 0),
    # No interfaces listed: the default card's 8 ENIs, and every EFA the shape supports.
    Case("should default max pods based off of network interfaces (m6idn.32xlarge)", "m6idn.32xlarge", (), 394, 2),
    # The EFA-only interface sits on card 1: card 0 keeps its 8 ENIs (8 × 49 + 2).
    Case(
        "Network Interfaces: should calculate max pods according when no EFA-only interfaces used on NC 0",
        "m6idn.32xlarge",
        (nic(0, 0, INTERFACE), nic(1, 0, EFA_ONLY)),
        394,
        1,
    ),
    # One EFA-only interface on card 0 takes an ENI without addresses: (8 − 1) × 49 + 2.
    Case(
        "Network Interfaces: should calculate max pods according to EFA-only interfaces used",
        "m6idn.32xlarge",
        (nic(0, 0, INTERFACE), nic(0, 1, EFA_ONLY)),
        345,
        1,
    ),
    # types.go efas: listed interfaces replace the shape's EFA count, so none listed as EFA-only means no EFA.
    Case("efas: interfaces listed without an EFA-only one", "m6idn.32xlarge", (nic(0, 0, INTERFACE),), 394, 0),
    # types.go ENILimitedPods subtracts reserved ENIs and EFA-only ones alike: (8 − 1 − 1) × 49 + 2.
    Case(
        "ENILimitedPods: reserved ENIs and an EFA-only interface",
        "m6idn.32xlarge",
        (nic(0, 0, INTERFACE), nic(0, 1, EFA_ONLY)),
        296,
        1,
        reserved_enis=1,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.upstream for case in CASES])
def test_efa_only_interfaces_in_pods_and_efa(case: Case, ec2_record: Callable[[str], Record]) -> None:
    info, vpc = ec2_record(case.instance_type)
    it = ec2shapes.instance_type_from_ec2(
        info, offerings=(), eni_limits=vpc, reserved_enis=case.reserved_enis, network_interfaces=case.nics
    )
    assert it.capacity[labels.RESOURCE_PODS] == case.pods * quantity.MILLI
    assert it.capacity.get(labels.RESOURCE_EFA, 0) == case.efa * quantity.MILLI


def test_efa_only_interfaces_lower_the_kube_reserved_memory(ec2_record: Callable[[str], Record]) -> None:
    """AL2023 sizes kube-reserved memory from the ENI-limited pods with the node class's interfaces (types.go
    NewInstanceType: ENILimitedPods(ctx, info, 0, networkInterfaces)): 11 MiB per pod, 49 pods fewer."""
    info, vpc = ec2_record("m6idn.32xlarge")
    plain = ec2shapes.instance_type_from_ec2(info, offerings=(), eni_limits=vpc)
    efa = ec2shapes.instance_type_from_ec2(
        info, offerings=(), eni_limits=vpc, network_interfaces=(nic(0, 0, INTERFACE), nic(0, 1, EFA_ONLY))
    )
    memory = labels.RESOURCE_MEMORY
    assert efa.allocatable[memory] - plain.allocatable[memory] == 11 * 49 * quantity.MI


FIT_CASES = [
    # suite_test.go "should mark instance type offering as available when it supports network interface
    # configuration": p5.48xlarge takes an interface and an EFA-only one on card 0.
    ("p5.48xlarge", (nic(0, 0, INTERFACE), nic(0, 1, EFA_ONLY)), True),
    # "... as unavailable when it does not support network interface configuration": five EFA-only interfaces on
    # cards 0-4; m6idn.32xlarge has two cards and two EFAs.
    (
        "m6idn.32xlarge",
        (nic(0, 0, INTERFACE), nic(0, 1, EFA_ONLY), *(nic(card, 0, EFA_ONLY) for card in range(1, 5))),
        False,
    ),
    # compatibility.go networkInterfaceCheck, one rule at a time.
    ("m6idn.32xlarge", (), True),  # none listed: any shape
    ("m6idn.32xlarge", (nic(0, 0, INTERFACE), nic(1, 0, EFA_ONLY)), True),
    ("m6idn.32xlarge", (nic(0, 0, INTERFACE), nic(2, 0, INTERFACE)), False),  # no card 2
    ("m6idn.32xlarge", (nic(0, 0, INTERFACE), nic(0, 8, INTERFACE)), False),  # card 0 has devices 0-7
    ("m6idn.32xlarge", (nic(0, 0, INTERFACE), nic(0, 1, EFA_ONLY), nic(1, 0, EFA_ONLY), nic(1, 1, EFA_ONLY)), False),
    ("m5.large", (nic(0, 0, INTERFACE), nic(0, 1, EFA_ONLY)), False),  # no EFA at all
    ("m5.large", (nic(0, 0, INTERFACE), nic(0, 1, INTERFACE)), True),
]


@pytest.mark.parametrize(("instance_type", "nics", "fits"), FIT_CASES)
def test_which_shapes_take_the_interfaces(
    instance_type: str,
    nics: tuple[ec2nodeclass.NetworkInterface, ...],
    fits: bool,
    ec2_record: Callable[[str], Record],
) -> None:
    info, _ = ec2_record(instance_type)
    assert ec2shapes.network_interfaces_fit(info, network_interfaces=nics) is fits


def test_a_shape_without_ena_takes_no_listed_interface(ec2_record: Callable[[str], Record]) -> None:
    info, _ = ec2_record("m5.large")
    no_ena = {**info, "NetworkInfo": {**info["NetworkInfo"], "EnaSupport": "unsupported"}}
    assert not ec2shapes.network_interfaces_fit(no_ena, network_interfaces=(nic(0, 0, INTERFACE),))
    assert ec2shapes.network_interfaces_fit(no_ena, network_interfaces=())
