"""The fake catalog mirrors upstream's fake.InstanceTypes / NewInstanceType."""

from __future__ import annotations

import pytest

from karpy.api import labels, quantity
from karpy.cloudprovider.fake import generator

GI = quantity.GI


@pytest.mark.parametrize("i", [0, 1, 399])
def test_benchmark_catalog_shapes_and_prices(i: int) -> None:
    it = generator.instance_types(400)[i]
    n = i + 1
    assert it.name == f"fake-it-{i}"
    assert dict(it.capacity) == {"cpu": n * 1000, "memory": 2 * n * GI, "pods": 10 * n * 1000}
    # 0.1 per CPU + 0.1 per 10^9 bytes: 2n GiB = 2n × 1.073741824 GB.
    assert it.offerings[0].price == pytest.approx(0.1 * n + 0.1 * 2 * n * 1.073741824)
    assert it.allocatable["cpu"] == n * 1000 - 100
    assert it.allocatable["memory"] == 2 * n * GI - 10 * quantity.MI
    assert it.labels[generator.LABEL_INTEGER] == str(n)


def test_offerings_match_upstream_places() -> None:
    it = generator.instance_types(1)[0]
    assert [(o.capacity_type, o.zone) for o in it.offerings] == [
        ("spot", "test-zone-1"),
        ("spot", "test-zone-2"),
        ("on-demand", "test-zone-1"),
        ("on-demand", "test-zone-2"),
        ("on-demand", "test-zone-3"),
    ]
    assert len({o.price for o in it.offerings}) == 1


@pytest.mark.parametrize(
    ("cpu", "mem_gi", "size", "exotic"), [(4, 16, "small", None), (5, 8, "small", None), (5, 9, "large", "optional")]
)
def test_size_labels(cpu: int, mem_gi: int, size: str, exotic: str | None) -> None:
    it = generator.new_instance_type("t", {"cpu": cpu * 1000, "memory": mem_gi * GI})
    assert it.labels[generator.LABEL_SIZE] == size
    assert it.labels.get(generator.LABEL_EXOTIC) == exotic


def test_defaults_and_default_catalog() -> None:
    it = generator.new_instance_type("d")
    assert dict(it.capacity) == {"cpu": 4000, "memory": 4 * GI, "pods": 5000}
    assert it.labels[labels.LABEL_ARCH] == "amd64"
    assert it.labels[labels.LABEL_OS] == "linux"
    names = {t.name: t for t in generator.default_instance_types()}
    assert names["arm-instance-type"].labels[labels.LABEL_ARCH] == "arm64"
    assert names["gpu-vendor-instance-type"].capacity[generator.RESOURCE_GPU_VENDOR_A] == 2000
    # A GPU vendor resource adds 1.0 to the price: 0.4 CPU + 0.4×1.073741824 memory + 1.0.
    assert names["gpu-vendor-instance-type"].offerings[0].price == pytest.approx(0.4 + 0.4 * 1.073741824 + 1.0)
    assert names["single-pod-instance-type"].capacity["pods"] == 1000
    assert names["windows-instance-type"].labels[labels.LABEL_OS] == "windows"
