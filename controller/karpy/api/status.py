"""Status serializers: the `status` body a controller writes through the status subresource, the inverse of what
`karpy.api.parse` reads (parse({**to_manifest(x), "status": to_status(x)}) == x). Pure functions."""

from __future__ import annotations

from typing import Any

from karpy.api import decoding, ec2nodeclass, meta, nodeclaim, nodepool, quantity


def to_status(obj: nodepool.NodePool | nodeclaim.NodeClaim | ec2nodeclass.EC2NodeClass) -> dict[str, Any]:
    if isinstance(obj, nodepool.NodePool):
        return _nodepool(obj.status)
    if isinstance(obj, nodeclaim.NodeClaim):
        return _nodeclaim(obj.status)
    return _ec2nodeclass(obj.status)


def conditions(items: tuple[meta.Condition, ...]) -> list[dict[str, Any]]:
    out = []
    for c in items:
        item: dict[str, Any] = {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}
        if c.last_transition_time is not None:
            item["lastTransitionTime"] = decoding.format_timestamp(c.last_transition_time)
        if c.observed_generation:
            item["observedGeneration"] = c.observed_generation
        out.append(item)
    return out


def _resources(values: Any) -> dict[str, str]:
    return {name: quantity.format_resource(name, milli) for name, milli in values.items()}


def _without_empty(status: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in status.items() if v not in ("", None, {}, [])}


def _nodepool(s: nodepool.NodePoolStatus) -> dict[str, Any]:
    out = _without_empty({"resources": _resources(s.resources), "conditions": conditions(s.conditions)})
    out["nodes"] = s.nodes
    if s.node_class_observed_generation:
        out["nodeClassObservedGeneration"] = s.node_class_observed_generation
    return out


def _nodeclaim(s: nodeclaim.NodeClaimStatus) -> dict[str, Any]:
    return _without_empty(
        {
            "nodeName": s.node_name,
            "providerID": s.provider_id,
            "imageID": s.image_id,
            "capacity": _resources(s.capacity),
            "allocatable": _resources(s.allocatable),
            "lastPodEventTime": (
                decoding.format_timestamp(s.last_pod_event_time) if s.last_pod_event_time is not None else None
            ),
            "conditions": conditions(s.conditions),
        }
    )


def _requirement(r: meta.NodeSelectorRequirement) -> dict[str, Any]:
    item: dict[str, Any] = {"key": r.key, "operator": r.operator.value}
    if r.values:
        item["values"] = list(r.values)
    return item


def _capacity_reservation(r: ec2nodeclass.CapacityReservationStatus) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": r.id,
        "availabilityZone": r.availability_zone,
        "instanceType": r.instance_type,
        "ownerID": r.owner_id,
        "instanceMatchCriteria": r.instance_match_criteria,
        "reservationType": r.reservation_type,
        "state": r.state,
    }
    if r.interruptible:
        item["interruptible"] = True
    if r.end_time is not None:
        item["endTime"] = decoding.format_timestamp(r.end_time)
    return item


def _ec2nodeclass(s: ec2nodeclass.EC2NodeClassStatus) -> dict[str, Any]:
    return _without_empty(
        {
            "subnets": [_without_empty({"id": n.id, "zone": n.zone, "zoneID": n.zone_id}) for n in s.subnets],
            "securityGroups": [_without_empty({"id": g.id, "name": g.name}) for g in s.security_groups],
            "amis": [
                {
                    **_without_empty({"id": a.id, "name": a.name}),
                    **({"deprecated": True} if a.deprecated else {}),
                    "requirements": [_requirement(r) for r in a.requirements],
                }
                for a in s.amis
            ],
            "capacityReservations": [_capacity_reservation(r) for r in s.capacity_reservations],
            "instanceProfile": s.instance_profile,
            "conditions": conditions(s.conditions),
        }
    )
