"""The AWS provider's lookups in the bundled catalog (ENI limits, static prices) never load its shapes."""

from __future__ import annotations

import gc
import tracemalloc

from karpy.cloudprovider import catalog


def test_eni_limits_and_static_prices_leave_the_bundled_shapes_unloaded() -> None:
    catalog._data.cache_clear()
    catalog._shapes.cache_clear()
    gc.collect()
    tracemalloc.start()
    try:
        assert catalog.eni_limits("m5.large") is not None
        assert catalog.on_demand_price("m5.large") is not None
        gc.collect()
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 2 * 2**20  # the tables alone are ~0.9 MB; with the shapes they were ~3.9 MB
    assert catalog._shapes.cache_info().currsize == 0  # a running controller takes its shapes from EC2

    assert catalog.shape("m5.large")["InstanceType"] == "m5.large"
    assert any(t.name == "m5.large" for t in catalog.load(zones=["us-east-1a"]))
    assert catalog._shapes.cache_info().currsize == 1
