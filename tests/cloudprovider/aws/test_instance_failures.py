"""karpenter_cloudprovider_instance_launch_failures_total and _termination_failures_total, counted by the AWS provider
against the moto server (aws: providers/instance/instance.go): each CreateFleet error under its override's zone,
zone id, capacity type and upstream's reason, and each failed TerminateInstances under the instance's zone."""

from __future__ import annotations

from typing import Any

import pytest
from botocore import exceptions as botocore_exceptions
from tests import builders
from tests.cloudprovider.aws import test_provider

from karpy.cloudprovider import errors
from karpy.cloudprovider.aws import error_codes


async def test_each_fleet_error_is_a_launch_failure_of_its_zone(ready: test_provider.Ready) -> None:
    aws_provider, _ = ready
    calls: list[list[str]] = []
    test_provider._install_ice(aws_provider._deps.aws.ec2, lambda o: o["InstanceType"] == "c5.large", calls)
    await aws_provider.create(builders.parsed_nodeclaim(requirements=test_provider.SMALL))
    failures = aws_provider._deps.aws.calls.launch_failures()
    refused = calls[0].count("c5.large")  # one override per zone the subnets offer
    assert sorted(zone for zone, _, _, _ in failures) == ["us-east-1a", "us-east-1b", "us-east-1c"][:refused]
    assert all(zone_id for _, zone_id, _, _ in failures)  # the offering's zone id
    assert {(capacity, reason) for _, _, capacity, reason in failures} == {("on-demand", "LaunchFailed")}
    assert sum(failures.values()) == refused  # once each, though the fleet's answer is read by every caller


async def test_a_refused_termination_is_a_termination_failure_of_its_zone(ready: test_provider.Ready) -> None:
    aws_provider, _ = ready
    created = await aws_provider.create(builders.parsed_nodeclaim(requirements=test_provider.SMALL))

    def refuse(**_: Any) -> None:
        raise botocore_exceptions.ClientError(
            {"Error": {"Code": "UnauthorizedOperation", "Message": "no"}}, "TerminateInstances"
        )

    aws_provider._deps.aws.ec2.meta.events.register("before-call.ec2.TerminateInstances", refuse)
    with pytest.raises(errors.CloudProviderError):
        await aws_provider.delete(created)
    ((zone, zone_id), count), *rest = aws_provider._deps.aws.calls.termination_failures().items()
    assert (zone, count, rest) == (created.metadata.labels["topology.kubernetes.io/zone"], 1, [])
    assert zone_id == created.metadata.labels["topology.k8s.aws/zone-id"]  # moto's Placement has none: the label


@pytest.mark.parametrize(
    ("code", "message", "reason"),
    [
        ("InsufficientInstanceCapacity", "no capacity", "LaunchFailed"),
        ("UnauthorizedOperation", "You are not authorized", "Unauthorized"),
        ("AuthFailure.ServiceLinkedRoleCreationNotPermitted", "", "SpotSLRCreationFailed"),
        ("UnauthorizedOperation", "Not authorized for images: [ami-1]", "AMIAuthorizationFailure"),
        ("InvalidParameter", "groups and subnet belong to different networks", "SecurityGroupSubnetVPCMismatch"),
        ("MaxSpotInstanceCountExceeded", "", "SpotQuotaExceeded"),
        ("VcpuLimitExceeded", "", "VCPULimitExceeded"),
        ("InsufficientFreeAddressesInSubnet", "", "InsufficientFreeAddressesInSubnet"),
        ("InvalidAMIID.NotFound", "", "AMINotFound"),
    ],
)
def test_reasons_are_upstreams(code: str, message: str, reason: str) -> None:
    assert error_codes.launch_failure_reason(code, message) == reason
