"""Helpers shared by the operator tests that run the app on a wall clock (import as `from tests.operator import
support`): a condition lookup, the fake cloud provider's parts. They wait with `tests.polling.until`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from karpy import clock, settings
from karpy.cloudprovider import parts as cloudprovider_parts
from karpy.cloudprovider.fake import provider as fake_provider
from karpy.state import cluster as state_cluster


def condition(obj: Mapping[str, Any] | None, type_: str) -> Mapping[str, Any]:
    """The status condition `type_` of `obj` ({} when it has none)."""
    for c in ((obj or {}).get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return dict(c)
    return {}


def fake_cloud(_: settings.Settings, __: state_cluster.Cluster, ___: clock.Clock) -> cloudprovider_parts.CloudParts:
    """The cloud factory of `karpy run` with the fake provider."""
    return cloudprovider_parts.CloudParts(provider=fake_provider.FakeCloudProvider())
