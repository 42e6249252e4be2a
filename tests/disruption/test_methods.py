"""Table tests for the pure consolidation rules: replacement pricing (worst launch price)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest
from tests.disruption import world as world_mod

from karpy.api import labels, nodepool
from karpy.cloudprovider import types
from karpy.cloudprovider.fake import generator
from karpy.disruption import candidates, consolidation, simulation
from karpy.scheduling import requirements, results

Reason = nodepool.DisruptionReason
OD, SPOT, RESERVED = labels.CAPACITY_TYPE_ON_DEMAND, labels.CAPACITY_TYPE_SPOT, labels.CAPACITY_TYPE_RESERVED
candidate = world_mod.candidate


def offering(capacity_type: str, price: float, *, zone: str = "a", available: bool = True) -> types.Offering:
    return types.Offering(zone=zone, capacity_type=capacity_type, price=price, available=available)


def itype(name: str, *offerings: types.Offering) -> types.InstanceType:
    return generator.new_instance_type(name, offerings=list(offerings))


def reqs(**values: Sequence[str]) -> requirements.Requirements:
    keys = {"capacity_type": labels.LABEL_CAPACITY_TYPE, "zone": labels.LABEL_ZONE}
    return requirements.Requirements(requirements.Requirement.in_(keys[k], v) for k, v in values.items())


# --- replacement pricing ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("offerings", "constraint", "worst"),
    [
        # spot is launched before on-demand, so spot's price bounds the launch, not the dearer on-demand one
        ([offering(OD, 0.20), offering(SPOT, 0.08)], {}, 0.08),
        ([offering(OD, 0.20), offering(SPOT, 0.08)], {"capacity_type": [OD]}, 0.20),
        # the dearest offering of that capacity type, even when on-demand would be cheaper
        ([offering(SPOT, 0.08), offering(SPOT, 0.18, zone="b"), offering(OD, 0.10)], {}, 0.18),
        ([offering(SPOT, 0.08), offering(SPOT, 0.18, zone="b")], {"zone": ["a"]}, 0.08),
        # reserved comes first; an unavailable offering does not count
        ([offering(RESERVED, 0.05), offering(SPOT, 0.08), offering(OD, 0.20)], {}, 0.05),
        ([offering(RESERVED, 0.01, available=False), offering(SPOT, 0.08)], {}, 0.08),
        ([offering(OD, 0.20)], {"capacity_type": [SPOT]}, math.inf),
        ([offering(SPOT, 0.08, available=False)], {}, math.inf),
    ],
)
def test_worst_launch_price(offerings: list[types.Offering], constraint: dict[str, list[str]], worst: float) -> None:
    assert consolidation.worst_launch_price(itype("t", *offerings), reqs(**constraint)) == worst


def test_filter_by_price_keeps_types_whose_worst_launch_price_is_below_the_candidates() -> None:
    spot_cheap = itype("spot-cheap", offering(OD, 0.30), offering(SPOT, 0.10))
    od_only = itype("od-only", offering(OD, 0.12))
    dear = itype("dear", offering(OD, 0.30), offering(SPOT, 0.25))
    options = (spot_cheap, od_only, dear)
    assert [t.name for t in consolidation.filter_by_price(options, reqs(), 0.20)] == ["spot-cheap", "od-only"]
    assert [t.name for t in consolidation.filter_by_price(options, reqs(capacity_type=[OD]), 0.20)] == ["od-only"]
    assert consolidation.filter_by_price(options, reqs(), 0.10) == ()  # strictly cheaper


def _replacing_with(
    options: Sequence[types.InstanceType], constraint: requirements.Requirements
) -> simulation.Simulate:
    plan = results.PlannedNodeClaim(
        nodepool="default",
        requirements=constraint,
        instance_type_options=tuple(options),
        pods=(),
        requests={},
        cheapest=None,
    )

    def simulate(chosen: Sequence[candidates.Candidate], /, *, consolidation: bool = True) -> simulation.Simulation:
        return simulation.Simulation(replacements=(plan,), unschedulable={})

    return simulate


@pytest.mark.parametrize(
    ("allowed", "offered", "decision", "pinned_spot"),
    [
        # on-demand → spot: the on-demand price (0.25) is above the candidate's, the spot one is not
        ([OD, SPOT], [offering(OD, 0.25), offering(SPOT, 0.08)], "replace", True),
        ([OD], [offering(OD, 0.25), offering(SPOT, 0.08)], "can't replace with a cheaper node", False),
        ([OD, SPOT], [offering(OD, 0.15)], "replace", False),  # nothing spot to pin to
        ([OD, SPOT], [offering(OD, 0.15), offering(SPOT, 0.25)], "can't replace with a cheaper node", False),
    ],
)
def test_on_demand_candidate_replacement(
    allowed: list[str], offered: list[types.Offering], decision: str, pinned_spot: bool
) -> None:
    simulate = _replacing_with([itype("r", *offered)], reqs(capacity_type=allowed))
    got = consolidation.compute([candidate("n", price=0.20)], simulate, method="single-node-consolidation")
    if isinstance(got, str):
        assert got == decision
        return
    assert got.decision == decision
    ct = got.replacements[0].requirements.get(labels.LABEL_CAPACITY_TYPE)
    assert ct is not None
    assert (ct.values() == frozenset({SPOT})) == pinned_spot
