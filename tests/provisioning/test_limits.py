"""NodePool limits re-checked before each create: usage from state plus this batch's earlier claims."""

from __future__ import annotations

import pytest
from tests.scheduling.conftest import make_instance_type

from karpy import requirements
from karpy.api import labels, quantity
from karpy.provisioning import limits
from karpy.scheduling import results

CPU, MEM, NODES = labels.RESOURCE_CPU, labels.RESOURCE_MEMORY, labels.RESOURCE_NODES


def _plan(*cpus: int) -> results.PlannedNodeClaim:
    options = tuple(make_instance_type(f"t-{c}", cpu=c, memory_gib=2 * c) for c in cpus)
    return results.PlannedNodeClaim("p", requirements.Requirements(), options, (), {}, None)


def test_claim_estimate_is_largest_option_and_one_node() -> None:
    est = limits.claim_estimate(_plan(2, 8, 4))
    assert est[CPU] == 8000
    assert est[MEM] == 16 * quantity.GI
    assert est[NODES] == limits.NODE


@pytest.mark.parametrize(
    ("pool_limits", "usage", "earlier", "refused"),
    [
        ({}, {CPU: 10**9}, [], None),  # no limits: always allowed
        ({CPU: 16000}, {CPU: 16000}, [], None),  # at the limit is not over it (upstream ExceededBy is strict)
        ({CPU: 16000}, {CPU: 16001}, [], "cpu resource usage of 16001m exceeds limit of 16"),
        ({CPU: 16000}, {CPU: 12000}, [(4,)], None),  # 12 + 4 = 16
        ({CPU: 16000}, {CPU: 12000}, [(4,), (2,)], "cpu resource usage of 18 exceeds limit of 16"),
        ({CPU: 16000}, {CPU: 12000}, [(2, 8)], "cpu resource usage of 20 exceeds limit of 16"),  # largest option
        ({NODES: 2000}, {NODES: 1000}, [(2,)], None),
        ({NODES: 2000}, {NODES: 1000}, [(2,), (2,)], "nodes resource usage of 3 exceeds limit of 2"),
        ({MEM: 8 * quantity.GI}, {}, [(8,)], "memory resource usage of 16Gi exceeds limit of 8Gi"),
        ({"nvidia.com/gpu": 0}, {CPU: 4000}, [], None),  # nothing of a limited resource in use: within it
        ({CPU: 16000, "nvidia.com/gpu": 0}, {CPU: 17000}, [], "cpu resource usage of 17 exceeds limit of 16"),
    ],
)
def test_check_before_create(
    pool_limits: dict[str, int], usage: dict[str, int], earlier: list[tuple[int, ...]], refused: str | None
) -> None:
    got = limits.check_before_create(pool_limits, usage, created_in_batch=[_plan(*c) for c in earlier])
    assert got == refused


def test_claim_estimate_keeps_a_zero_capacity_at_zero() -> None:
    gpu_less = make_instance_type("t-2", cpu=2, memory_gib=4, extra_capacity={"nvidia.com/gpu": 0})
    est = limits.claim_estimate(results.PlannedNodeClaim("p", requirements.Requirements(), (gpu_less,), (), {}, None))
    assert est["nvidia.com/gpu"] == 0
