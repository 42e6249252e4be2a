"""EC2NodeClass status as a pure function of what the describe calls found.

Each readiness condition says exactly what is missing; `Ready` is True only when every other condition is
(aws: pkg/controllers/nodeclass/{subnet,securitygroup,ami,instanceprofile,validation}.go).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from karpy.api import ec2nodeclass, meta
from karpy.cloudprovider.aws import fleet, placement, selectors


@dataclass(frozen=True, slots=True)
class Resolution:
    """What resolving a node class found. Error strings are set when a lookup itself failed."""

    subnets: tuple[fleet.Subnet, ...] = ()
    security_groups: tuple[ec2nodeclass.SecurityGroupStatus, ...] = ()
    amis: tuple[ec2nodeclass.AMIStatus, ...] = ()
    instance_profile: str = ""
    ami_error: str = ""
    instance_profile_error: str = ""
    validation_problems: tuple[str, ...] = ()
    validation_reason: str = ""
    """ValidationSucceeded's reason when there are problems (upstream's reason names); "" = ValidationFailed."""
    placement_group: placement.PlacementGroup | None = None
    placement_group_error: str = ""
    capacity_reservations: tuple[ec2nodeclass.CapacityReservationStatus, ...] = ()


_CHILDREN = (
    ec2nodeclass.SUBNETS_READY,
    ec2nodeclass.SECURITY_GROUPS_READY,
    ec2nodeclass.AMIS_READY,
    ec2nodeclass.INSTANCE_PROFILE_READY,
    ec2nodeclass.VALIDATION_SUCCEEDED,
)


def _profile_source(spec: ec2nodeclass.EC2NodeClassSpec) -> str:
    return f"role {spec.role}" if spec.role else f"instanceProfile {spec.instance_profile}"


def _condition(type_: str, ok: bool, reason: str, message: str) -> tuple[str, bool, str, str]:
    return (type_, ok, type_ if ok else reason, "" if ok else message)


def compute_status(
    nodeclass: ec2nodeclass.EC2NodeClass,
    found: Resolution,
    *,
    now: float,
) -> ec2nodeclass.EC2NodeClassStatus:
    spec = nodeclass.spec
    verdicts = [
        _condition(
            ec2nodeclass.SUBNETS_READY,
            bool(found.subnets),
            "SubnetsNotFound",
            f"no subnets matched selector terms {selectors.describe_terms(spec.subnet_selector_terms)}",
        ),
        _condition(
            ec2nodeclass.SECURITY_GROUPS_READY,
            bool(found.security_groups),
            "SecurityGroupsNotFound",
            f"no security groups matched selector terms {selectors.describe_terms(spec.security_group_selector_terms)}",
        ),
        _condition(
            ec2nodeclass.AMIS_READY,
            bool(found.amis) and not found.ami_error,
            "AMINotFound",
            found.ami_error or f"no AMIs matched selector terms {selectors.describe_terms(spec.ami_selector_terms)}",
        ),
        _condition(
            ec2nodeclass.INSTANCE_PROFILE_READY,
            bool(found.instance_profile) and not found.instance_profile_error,
            "InstanceProfileNotFound",
            found.instance_profile_error or f"instance profile for {_profile_source(spec)} not resolved",
        ),
        _condition(
            ec2nodeclass.VALIDATION_SUCCEEDED,
            not found.validation_problems,
            found.validation_reason or "ValidationFailed",
            "; ".join(found.validation_problems),
        ),
    ]
    selector = spec.placement_group_selector
    if selector is not None:
        # Present only while a placement group is selected, like upstream's condition.
        problem = found.placement_group_error or placement.readiness(selector, found.placement_group)
        verdicts.append(_condition(ec2nodeclass.PLACEMENT_GROUP_READY, not problem, "PlacementGroupNotReady", problem))
    not_ready = [type_ for type_, ok, _, _ in verdicts if not ok]
    verdicts.append(
        _condition(
            ec2nodeclass.READY,
            not not_ready,
            "NotReady",
            "not ready: " + ", ".join(not_ready),
        )
    )
    previous = nodeclass.status.conditions
    conditions = tuple(
        _with_transition(previous, type_, ok, reason, message, now=now, generation=nodeclass.metadata.generation)
        for type_, ok, reason, message in verdicts
    )
    return ec2nodeclass.EC2NodeClassStatus(
        subnets=tuple(ec2nodeclass.SubnetStatus(id=s.id, zone=s.zone, zone_id=s.zone_id) for s in found.subnets),
        security_groups=found.security_groups,
        amis=found.amis,
        instance_profile=found.instance_profile,
        conditions=conditions,
        capacity_reservations=found.capacity_reservations,
    )


def _with_transition(
    previous: Sequence[meta.Condition],
    type_: str,
    ok: bool,
    reason: str,
    message: str,
    *,
    now: float,
    generation: int,
) -> meta.Condition:
    """Keep the previous transition time when the status did not flip (Kubernetes condition semantics)."""
    status = "True" if ok else "False"
    before = meta.condition(tuple(previous), type_)
    since = before.last_transition_time if before is not None and before.status == status else now
    return meta.Condition(
        type=type_,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=since,
        observed_generation=generation,
    )


def is_ready(nodeclass: ec2nodeclass.EC2NodeClass) -> bool:
    ready = nodeclass.condition(ec2nodeclass.READY)
    return ready is not None and ready.is_true and ready.observed_generation == nodeclass.metadata.generation
