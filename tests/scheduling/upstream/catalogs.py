"""The instance-type catalogs upstream's scheduling suites run against, as a case file names them (`catalog:`)."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping
from typing import Any

from karpy.api import labels, quantity
from karpy.cloudprovider import types
from karpy.cloudprovider.fake import generator


@functools.cache
def assorted() -> tuple[types.InstanceType, ...]:
    """Upstream's fake.InstanceTypesAssorted: every (cpu, memory, zone, capacity type, os, arch) with one offering.

    Built once per run: its 1,344 frozen types took a fifth of the upstream cases' time when built per case."""
    out = []
    for cpu, mem, zone, ct, os, arch in itertools.product(
        (1, 2, 4, 8, 16, 32, 64),
        (1, 2, 4, 8, 16, 32, 64, 128),
        generator.ZONES,
        (labels.CAPACITY_TYPE_SPOT, labels.CAPACITY_TYPE_ON_DEMAND),
        ("linux", "windows"),
        ("amd64", "arm64"),
    ):
        res = {labels.RESOURCE_CPU: cpu * quantity.MILLI, labels.RESOURCE_MEMORY: mem * quantity.GI}
        offering = types.Offering(zone=zone, capacity_type=ct, price=generator.price_from_resources(res))
        name = f"{cpu}-cpu-{mem}-mem-{arch}-{os}-{zone}-{ct}"
        out.append(generator.new_instance_type(name, res, offerings=[offering], arch=arch, os=os))
    return tuple(out)


def _inline(spec: Mapping[str, Any]) -> types.InstanceType:
    res = {k: quantity.parse(v) for k, v in (spec.get("resources") or {}).items()}
    offerings = [
        types.Offering(
            zone=o["zone"],
            capacity_type=o.get("capacityType", labels.CAPACITY_TYPE_ON_DEMAND),
            price=float(o.get("price", generator.price_from_resources(res or {}))),
            available=o.get("available", True),
        )
        for o in spec.get("offerings") or []
    ]
    return generator.new_instance_type(
        spec["name"],
        res,
        offerings=offerings or None,
        arch=spec.get("arch", "amd64"),
        os=spec.get("os", "linux"),
        extra_labels=spec.get("labels"),
    )


def catalog(spec: Any) -> list[types.InstanceType]:
    if isinstance(spec, list):
        return [_inline(t) for t in spec]
    if spec == "default":
        return generator.default_instance_types()
    if spec == "assorted":
        return list(assorted())
    if isinstance(spec, Mapping) and set(spec) == {"assorted_without"}:
        # upstream's tests filter InstanceTypesAssorted: drop the types carrying every label given (a zone: offered
        # there)
        drop = spec["assorted_without"]
        return [t for t in assorted() if not all(_carries(t, k, v) for k, v in drop.items())]
    if isinstance(spec, str) and spec.startswith("fake:"):
        return generator.instance_types(int(spec.removeprefix("fake:")))
    raise AssertionError(f"unknown catalog {spec!r}")


def _carries(t: types.InstanceType, key: str, value: str) -> bool:
    if key == labels.LABEL_ZONE:
        return any(o.zone == value for o in t.offerings)
    return t.labels.get(key) == value
