"""Instance tenancy (`karpenter.k8s.aws/instance-tenancy`): shared ("default") or single-tenant hardware
("dedicated"), pure.

Every instance type can be launched either way. A launch takes default tenancy whenever its claim allows it and
dedicated only when the claim asks for it alone; the launch template then places the instance on dedicated
hardware (aws: pkg/providers/instance/instance.go getTenancyType, pkg/providers/launchtemplate/types.go).
Upstream's instance types carry the requirement `instance-tenancy In [default, dedicated]`
(aws: pkg/providers/instancetype/types.go). karpy's instance types carry single-valued labels, so they leave the
tenancy label out (an undefined well-known label is the pool's and the pod's to decide): a pod requiring dedicated
tenancy in a pool allowing both gets a claim that requires it, and `choose` launches it on dedicated hardware.
`for_pool` labels the types of a pool allowing only one tenancy with it, and `for_claim` a launch's types with the
launch's. Both providers use this.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Final

from karpy import requirements
from karpy.api import labels, meta
from karpy.cloudprovider import types

DEFAULT: Final = "default"
DEDICATED: Final = "dedicated"


def choose(requirement_terms: Sequence[meta.NodeSelectorRequirement]) -> str:
    """Default tenancy unless the requirements allow only dedicated."""
    reqs = requirements.Requirements.from_node_selector(tuple(requirement_terms))
    found = reqs.get(labels.LABEL_INSTANCE_TENANCY)
    if found is None or found.has(DEFAULT) or not found.has(DEDICATED):
        return DEFAULT
    return DEDICATED


def for_claim(instance_types: Sequence[types.InstanceType], tenancy: str) -> Sequence[types.InstanceType]:
    """The types as a launch of `tenancy` sees them: labelled with it, as the instance will be."""
    return [
        dataclasses.replace(it, labels={**it.labels, labels.LABEL_INSTANCE_TENANCY: tenancy}) for it in instance_types
    ]


def for_pool(
    instance_types: Sequence[types.InstanceType], requirement_terms: Sequence[meta.NodeSelectorRequirement]
) -> Sequence[types.InstanceType]:
    """The types as a NodePool with these requirements sees them (see the module docstring): the same sequence
    when it allows both tenancies, so callers that memoise on the sequence keep their memos."""
    found = requirements.Requirements.from_node_selector(tuple(requirement_terms)).get(labels.LABEL_INSTANCE_TENANCY)
    if found is None or (found.has(DEFAULT) and found.has(DEDICATED)):
        return instance_types
    return for_claim(instance_types, DEFAULT if found.has(DEFAULT) else DEDICATED)
