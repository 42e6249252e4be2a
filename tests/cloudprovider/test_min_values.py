"""The one minValues rule (`types.min_values_needed`, core: pkg/cloudprovider/types.go SatisfiesMinValues): how many
instance types, in order, it takes to offer minValues distinct values for every key that sets one."""

from __future__ import annotations

import pytest

from karpy import requirements
from karpy.api import labels, meta
from karpy.cloudprovider import types

FAMILY = labels.LABEL_INSTANCE_FAMILY


def _type(name: str, family: str, *zones: str, capacity: str = labels.CAPACITY_TYPE_ON_DEMAND) -> types.InstanceType:
    return types.InstanceType(
        name=name,
        labels={labels.LABEL_INSTANCE_TYPE: name, FAMILY: family},
        capacity={},
        offerings=tuple(types.Offering(zone, capacity, 1.0) for zone in zones),
    )


# cheapest first, as the callers hand them over
TYPES = [
    _type("m5.large", "m5", "a"),
    _type("m5.xlarge", "m5", "a"),
    _type("c5.large", "c5", "b"),
    _type("r5.large", "r5", "a", "c", capacity=labels.CAPACITY_TYPE_SPOT),
]


def _reqs(*entries: tuple[str, tuple[str, ...], int | None]) -> requirements.Requirements:
    return requirements.Requirements(
        requirements.Requirement.new(
            key, meta.Operator.IN if values else meta.Operator.EXISTS, values=values, min_values=mv
        )
        for key, values, mv in entries
    )


@pytest.mark.parametrize(
    ("reqs", "needed"),
    [
        (_reqs((FAMILY, (), None)), 0),  # no key sets minValues: nothing to meet
        (_reqs((labels.LABEL_INSTANCE_TYPE, (), 3)), 3),  # types are distinct by name
        (_reqs((FAMILY, (), 2)), 3),  # m5, m5, c5: the third type brings the second family
        (_reqs((FAMILY, (), 3)), 4),
        (_reqs((FAMILY, (), 4)), None),  # three families in all
        (_reqs((FAMILY, ("m5", "r5"), 2)), 4),  # only allowed values count: c5 is not one
        (_reqs((labels.LABEL_ZONE, (), 3)), 4),  # zones come from the offerings: a, b, then a and c
        (_reqs((labels.LABEL_CAPACITY_TYPE, (), 2)), 4),
        (_reqs((labels.LABEL_INSTANCE_TYPE, (), 1), (FAMILY, (), 2)), 3),  # every key at once
    ],
)
def test_the_types_needed_in_order(reqs: requirements.Requirements, needed: int | None) -> None:
    assert types.min_values_needed(TYPES, reqs) == needed
    assert types.satisfies_min_values(TYPES, reqs) is (needed is not None)
