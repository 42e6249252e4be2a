"""The NodePool the provisioner cannot launch for: its requirements leave none of its instance types (pure; core:
pkg/controllers/provisioning/scheduling/scheduler.go `NewScheduler`, events.go `NoCompatibleInstanceTypes`)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from karpy import events, requirements
from karpy.api import labels, nodepool
from karpy.cloudprovider import types
from karpy.scheduling import catalog

log = logging.getLogger(__name__)

NO_COMPATIBLE_INSTANCE_TYPES: Final = "NoCompatibleInstanceTypes"
NO_COMPATIBLE_MESSAGE: Final = "NodePool requirements filtered out all compatible available instance types"
DEDUPE_SECONDS: Final = 60.0
"""Upstream publishes the event on every scheduler it builds, deduplicated per NodePool for a minute."""


def _type_requirements(instance_type: types.InstanceType) -> requirements.Requirements:
    """The type's labels, and the zones and capacity types of its available offerings."""
    offered = instance_type.available_offerings()
    return requirements.Requirements.from_labels(instance_type.labels).add(
        requirements.Requirement.in_(labels.LABEL_ZONE, {o.zone for o in offered}),
        requirements.Requirement.in_(labels.LABEL_CAPACITY_TYPE, {o.capacity_type for o in offered}),
    )


def without_instance_types(
    pools: Iterable[nodepool.NodePool], instance_types: Mapping[str, Sequence[types.InstanceType]]
) -> list[nodepool.NodePool]:
    """The pools whose requirements intersect none of their listed instance types (a pool not listed is left out:
    its types did not resolve, which the provisioner reports on its own)."""
    out = []
    for pool in pools:
        listed = instance_types.get(pool.name)
        if listed is None:
            continue
        reqs = catalog.pool_requirements(pool)
        if not any(reqs.intersects(_type_requirements(t)) is None for t in listed):
            out.append(pool)
    return out


class IncompatiblePools:
    """Records a Warning on each NodePool whose requirements leave none of its instance types, once a minute."""

    def __init__(self, recorder: events.Recorder) -> None:
        self._recorder = recorder

    def report(
        self, pools: Iterable[nodepool.NodePool], instance_types: Mapping[str, Sequence[types.InstanceType]]
    ) -> list[str]:
        """The names of the pools reported now (the recorder drops an event it took less than a minute ago)."""
        reported = []
        for pool in without_instance_types(pools, instance_types):
            log.info("skipping, nodepool requirements filtered out all instance types", extra={"nodepool": pool.name})
            ref = nodepool.event_ref(pool)
            dedupe = events.about(ref, timeout=DEDUPE_SECONDS)
            self._recorder.record(ref, "Warning", NO_COMPATIBLE_INSTANCE_TYPES, NO_COMPATIBLE_MESSAGE, dedupe=dedupe)
            reported.append(pool.name)
        return reported
