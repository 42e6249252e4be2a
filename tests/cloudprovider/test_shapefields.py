"""`shapefields.compact` keeps every field `ec2shapes` reads, and little else.

Every moto shape (~1,400 DescribeInstanceTypes records) must build the same `InstanceType` from its record and from
its compact form, under the AMI families and node-class options that read different parts of the record.
"""

from __future__ import annotations

import gc
import json
import tracemalloc
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from moto.ec2.models import instance_types as models_instance_types

from karpy.api import ec2nodeclass
from karpy.cloudprovider import catalog, ec2shapes, shapefields

SHAPES: Sequence[Mapping[str, Any]] = tuple(models_instance_types.INSTANCE_TYPES.values())
EFA_ONLY = ec2nodeclass.NetworkInterfaceType.EFA_ONLY
INTERFACE = ec2nodeclass.NetworkInterfaceType.INTERFACE


@dataclass(frozen=True)
class Options:
    name: str
    ami_family: ec2nodeclass.AMIFamily
    kubelet: ec2shapes.KubeletOverrides | None = None
    network_interfaces: tuple[ec2nodeclass.NetworkInterface, ...] = ()
    instance_store_policy: str = ""
    block_device_mappings: tuple[ec2nodeclass.BlockDeviceMapping, ...] = field(default=())


OPTIONS = [
    Options("al2023 defaults", ec2nodeclass.AMIFamily.AL2023),
    Options("al2 with RAID0 instance store", ec2nodeclass.AMIFamily.AL2, instance_store_policy="RAID0"),
    Options(
        "bottlerocket with kubelet overrides",
        ec2nodeclass.AMIFamily.BOTTLEROCKET,
        kubelet=ec2shapes.KubeletOverrides(pods_per_core=4, eviction_hard={"memory.available": "5%"}),
    ),
    Options("windows2022 (amd64 only, private IPv4)", ec2nodeclass.AMIFamily.WINDOWS2022),
    Options(
        "efa-only interfaces on two cards",
        ec2nodeclass.AMIFamily.AL2023,
        network_interfaces=(
            ec2nodeclass.NetworkInterface(0, 0, INTERFACE),
            ec2nodeclass.NetworkInterface(0, 1, EFA_ONLY),
            ec2nodeclass.NetworkInterface(1, 0, EFA_ONLY),
        ),
    ),
]


def _built(info: Mapping[str, Any], options: Options) -> object:
    """Everything the catalog derives from one record under `options` (the InstanceType, or why there is none)."""
    family = options.ami_family
    fits = ec2shapes.network_interfaces_fit(info, network_interfaces=options.network_interfaces)
    if not ec2shapes.supports(info, ami_family=family):
        return ("unsupported", fits)
    root = ec2shapes.ephemeral_storage(
        info,
        ami_family=family,
        block_device_mappings=options.block_device_mappings,
        instance_store_policy=options.instance_store_policy,
    )
    return (
        fits,
        ec2shapes.instance_type_from_ec2(
            info,
            offerings=(),
            eni_limits=catalog.eni_limits(str(info["InstanceType"])),
            kubelet=options.kubelet,
            ami_family=family,
            root_volume=root,
            region="us-east-1",
            network_interfaces=options.network_interfaces,
        ),
    )


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: o.name)
def test_every_moto_shape_builds_the_same_from_its_compact_form(options: Options) -> None:
    assert len(SHAPES) > 1000
    for info in SHAPES:
        assert _built(shapefields.compact(info), options) == _built(info, options), info["InstanceType"]


def test_the_supported_usage_classes_the_bundled_catalog_reads_are_kept() -> None:
    info = next(s for s in SHAPES if s["InstanceType"] == "m5.large")
    assert shapefields.compact(info)["SupportedUsageClasses"] == ("on-demand", "spot")


def test_a_section_is_kept_where_it_was_even_with_nothing_read_below_it() -> None:
    info = {"InstanceType": "x1.large", "ProcessorInfo": {"SustainedClockSpeedInGhz": 2.5, "Unread": [1]}}
    assert shapefields.compact(info) == {"InstanceType": "x1.large", "ProcessorInfo": {"SustainedClockSpeedInGhz": 2.5}}
    assert shapefields.compact({"InstanceType": "x1.large", "ProcessorInfo": {"Unread": 1}})["ProcessorInfo"] == {}


def _held(make: Callable[[], object]) -> int:
    """Bytes still allocated once `make()` returned, its result alive."""
    gc.collect()
    tracemalloc.start()
    try:
        kept = make()
        gc.collect()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del kept
    return held


def test_compact_shapes_hold_a_fraction_of_the_records() -> None:
    # A JSON round trip makes the records as botocore parses them: shared keys, a string object per value.
    text = json.dumps(list(SHAPES))
    records = _held(lambda: json.loads(text))
    parsed = json.loads(text)
    compacted = _held(lambda: [shapefields.compact(info) for info in parsed])
    assert compacted < records / 3, (compacted, records)
