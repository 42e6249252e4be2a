"""Fidelity fixes to moto that the emulation needs, installed once per process (moto runs in-process here).

CreateFleet with a launch template: moto builds each launch spec from the template's `GroupSet` only, so an
instance launched from a template with `SecurityGroupIds` (or groups on its network interfaces) gets the VPC's
default group. Real EC2 applies the template's groups, and the AWS provider's drift check compares them with the
EC2NodeClass status, so without this every emulated node would look drifted (SecurityGroupDrift). The fix applies
the template's groups to the fleet's instances right after moto launched them.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

_MARK = "_karpy_fleet_groups_fixed"


def _template_groups(backend: Any, spec: Mapping[str, Any] | None) -> list[str]:
    if not spec or not spec.get("LaunchTemplateId"):
        return []
    template = backend.get_launch_template(spec["LaunchTemplateId"])
    data = template.get_version(spec.get("Version") or template.default_version_number).data
    groups = list(data.get("SecurityGroupIds") or [])
    for interface in data.get("NetworkInterfaces") or ():
        groups.extend(g for g in interface.get("Groups") or () if g not in groups)
    return groups


def _fix_fleet(backend: Any, fleet: Any) -> None:
    launched: list[tuple[Any, Any]] = [(i["instance"], i.get("launch_spec")) for i in fleet.on_demand_instances]
    launched.extend((r.instance, getattr(r, "launch_spec", None)) for r in fleet.spot_requests)
    for instance, launch_spec in launched:
        groups = _template_groups(backend, getattr(launch_spec, "launch_template_spec", None))
        if groups and sorted(g.id for g in instance.security_groups) != sorted(groups):
            backend.modify_instance_security_groups(instance.id, groups)


def install() -> None:
    """Idempotent."""
    from moto.ec2.models import fleets

    backend_class: Any = fleets.FleetsBackend
    if getattr(backend_class, _MARK, False):
        return
    original = backend_class.create_fleet

    @functools.wraps(original)
    def create_fleet(self: Any, *args: Any, **kwargs: Any) -> Any:
        fleet = original(self, *args, **kwargs)
        _fix_fleet(self, fleet)
        return fleet

    backend_class.create_fleet = create_fleet
    setattr(backend_class, _MARK, True)
