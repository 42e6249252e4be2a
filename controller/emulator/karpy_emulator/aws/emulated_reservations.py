"""EC2 capacity reservations for the local emulation (moto has none): what a test or the demo installs on the
controller's EC2 client so that node classes can select reservations, launch into them and see them end. Part of
the emulation like `emulator`: the runtime never imports it."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

_FLEET_CAPACITY_BLOCK_PATCHED = "_karpy_fleet_capacity_block_patched"


class CapacityReservations:
    """EC2 capacity reservations for the emulation: `install` on a client makes it see `reservations` (EC2
    DescribeCapacityReservations answers, with `EndDate` and `ReservationType`), launch into them, and describe
    the instances launched into one with its id and lifecycle, as EC2 does. moto buys a fleet's `capacity-block`
    target as on-demand (it knows only on-demand and spot)."""

    def __init__(self, reservations: Sequence[Mapping[str, Any]]) -> None:
        self.reservations = [dict(r) for r in reservations]
        self._template_targets: dict[str, str] = {}  # launch template name -> reservation id
        self.instances: dict[str, str] = {}  # instance id -> reservation id
        """The instances launched into a reservation, by id."""

    def install(self, ec2_client: Any) -> None:
        from botocore import awsrequest

        _buy_capacity_blocks_on_demand()
        ok = awsrequest.AWSResponse("http://127.0.0.1/", 200, {}, None)
        events = ec2_client.meta.events
        events.register(
            "before-call.ec2.DescribeCapacityReservations",
            lambda **_: (ok, {"CapacityReservations": [dict(r) for r in self.reservations]}),
            unique_id="karpy-capacity-reservations-describe",
        )
        events.register("provide-client-params.ec2.CreateLaunchTemplate", self._template_created)
        events.register("after-call.ec2.CreateFleet", self._fleet_created)
        events.register("after-call.ec2.DescribeInstances", self._describe_instances)

    def _template_created(self, params: Mapping[str, Any], **_: Any) -> None:
        if params.get("DryRun"):
            return
        spec = (params.get("LaunchTemplateData") or {}).get("CapacityReservationSpecification") or {}
        target = (spec.get("CapacityReservationTarget") or {}).get("CapacityReservationId")
        if target:
            self._template_targets[str(params["LaunchTemplateName"])] = str(target)

    def _fleet_created(self, parsed: Mapping[str, Any], **_: Any) -> None:
        for group in parsed.get("Instances") or ():
            spec = (group.get("LaunchTemplateAndOverrides") or {}).get("LaunchTemplateSpecification") or {}
            target = self._template_targets.get(str(spec.get("LaunchTemplateName", "")))
            if target:
                for instance_id in group.get("InstanceIds") or ():
                    self.instances[str(instance_id)] = target

    def _describe_instances(self, parsed: Mapping[str, Any], **_: Any) -> None:
        kinds = {str(r["CapacityReservationId"]): str(r.get("ReservationType") or "default") for r in self.reservations}
        for reservation in parsed.get("Reservations") or ():
            for instance in reservation.get("Instances") or ():
                target = self.instances.get(str(instance.get("InstanceId", "")))
                if target is None:
                    continue
                instance["CapacityReservationId"] = target
                instance["CapacityReservationSpecification"] = {
                    "CapacityReservationPreference": "capacity-reservations-only"
                }
                if kinds.get(target) == "capacity-block":
                    instance["InstanceLifecycle"] = "capacity-block"


def _buy_capacity_blocks_on_demand() -> None:
    """moto's fleets launch nothing for a `capacity-block` target; EC2 launches into the block. Idempotent."""
    from moto.ec2.models import fleets

    backend_class: Any = fleets.FleetsBackend
    if getattr(backend_class, _FLEET_CAPACITY_BLOCK_PATCHED, False):
        return
    original = backend_class.create_fleet

    @functools.wraps(original)
    def create_fleet(self: Any, *args: Any, **kwargs: Any) -> Any:
        target = kwargs.get("target_capacity_specification")
        if isinstance(target, dict) and target.get("DefaultTargetCapacityType") == "capacity-block":
            kwargs["target_capacity_specification"] = {**target, "DefaultTargetCapacityType": "on-demand"}
        return original(self, *args, **kwargs)

    backend_class.create_fleet = create_fleet
    setattr(backend_class, _FLEET_CAPACITY_BLOCK_PATCHED, True)
