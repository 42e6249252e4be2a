"""Instance tenancy (`karpenter.k8s.aws/instance-tenancy`): shared ("default") or single-tenant hardware
("dedicated"), pure.

Every instance type can be launched either way. A launch takes default tenancy whenever its claim allows it and
dedicated only when the claim asks for it alone; the launch template then places the instance on dedicated
hardware (aws: pkg/providers/instance/instance.go getTenancyType, pkg/providers/launchtemplate/types.go).
karpy's instance types carry single-valued labels, so a NodePool that allows only dedicated tenancy sees its
types labelled dedicated (`for_pool`), and every other pool sees them labelled default. Both providers use this.
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


def for_pool(instance_types: Sequence[types.InstanceType], tenancy: str) -> Sequence[types.InstanceType]:
    """The types as a pool of `tenancy` sees them (unchanged for default)."""
    if tenancy == DEFAULT:
        return instance_types
    return [
        dataclasses.replace(it, labels={**it.labels, labels.LABEL_INSTANCE_TENANCY: tenancy}) for it in instance_types
    ]
