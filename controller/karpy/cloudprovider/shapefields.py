"""The fields of a DescribeInstanceTypes record that `karpy.cloudprovider.ec2shapes` reads, and `compact`, which keeps
only those.

The AWS provider keeps every described shape for the instance-type cache's 5 minutes, to build catalogs from (a
new node class, a price refresh, an offering marked unavailable). As botocore parses it, a record carries far more
than the formulas read (boot modes, valid core counts, placement strategies, bandwidth weightings, ...), and each
of its strings is an object of its own. `compact` keeps the fields below, as plain dicts and tuples, with their
strings interned, so ~1,400 shapes cost a fraction of the parsed records.

A field `ec2shapes` starts reading must be added here: tests/cloudprovider/test_shapefields.py builds every moto shape
from its record and from its compact form and fails on the first difference.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

Spec = Mapping[str, "Spec | None"]
"""Per key: None keeps the value whole, a spec keeps those keys of a mapping (of each mapping, for a list)."""


def _keep(**fields: Spec | None) -> Spec:
    return MappingProxyType(fields)


FIELDS: Final = _keep(
    InstanceType=None,
    SupportedUsageClasses=None,
    Hypervisor=None,
    ProcessorInfo=_keep(SupportedArchitectures=None, Manufacturer=None, SustainedClockSpeedInGhz=None),
    VCpuInfo=_keep(DefaultVCpus=None),
    MemoryInfo=_keep(SizeInMiB=None),
    NetworkInfo=_keep(
        DefaultNetworkCardIndex=None,
        MaximumNetworkInterfaces=None,
        Ipv4AddressesPerInterface=None,
        EncryptionInTransitSupported=None,
        EnaSupport=None,
        EfaInfo=_keep(MaximumEfaInterfaces=None),
        NetworkCards=_keep(NetworkCardIndex=None, MaximumNetworkInterfaces=None, BaselineBandwidthInGbps=None),
    ),
    InstanceStorageInfo=_keep(TotalSizeInGB=None, NvmeSupport=None),
    GpuInfo=_keep(Gpus=_keep(Name=None, Manufacturer=None, Count=None, MemoryInfo=_keep(SizeInMiB=None))),
    # Whole: read for being non-empty (`shape_labels`' accelerator rule); small, and on few shapes.
    NeuronInfo=None,
    InferenceAcceleratorInfo=_keep(Accelerators=_keep(Name=None, Manufacturer=None, Count=None)),
    # EbsOptimizedInfo whole: read for being non-empty (the EBS bandwidth label).
    EbsInfo=_keep(EbsOptimizedSupport=None, EbsOptimizedInfo=None),
)


def compact(info: Mapping[str, Any], spec: Spec = FIELDS) -> dict[str, Any]:
    """`info` with only the keys of `spec`, present where they were (even when nothing below them is kept)."""
    return {key: _value(info[key], sub) for key, sub in spec.items() if key in info}


def _value(value: Any, spec: Spec | None) -> Any:
    if isinstance(value, str):
        return sys.intern(value)
    if isinstance(value, Mapping):
        return compact(value, spec) if spec is not None else {sys.intern(k): _value(v, None) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return tuple(_value(item, spec) for item in value)
    return value
