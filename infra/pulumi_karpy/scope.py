"""`Scope`: what every builder of the component's children shares (names, resolved arguments, lookups, options)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pulumi

from pulumi_karpy import spec as pulumi_karpy_spec


@dataclass(frozen=True, slots=True)
class Scope:
    name: str
    """The component's name: every child is `f"{name}-<role>"`."""
    spec: pulumi_karpy_spec.Karpenter
    child: pulumi.ResourceOptions
    """`parent=` the component, so the caller's providers are inherited."""
    partition: pulumi.Output[str]
    region: pulumi.Output[str]
    account: pulumi.Output[str]
    cluster_name: pulumi.Output[str]
    tags: Mapping[str, pulumi.Input[str]]

    def after(self, *resources: pulumi.Resource | None) -> pulumi.ResourceOptions:
        """Child options that also wait for `resources` (created after them, deleted before them)."""
        needed = [r for r in resources if r is not None]
        return pulumi.ResourceOptions.merge(self.child, pulumi.ResourceOptions(depends_on=needed))
