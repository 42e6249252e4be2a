"""The newer EC2NodeClass fields reach EC2: resolution (placement group, capacity reservations, SG vpcID) and the
launch template a launch really creates on moto (network interface, monitoring, metadata, placement, RAID0).

moto has no placement groups or capacity reservations: those two describe calls are answered by `before-call`
hooks on the provider's EC2 client (recording what was asked), everything else is moto.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
from collections.abc import Callable
from typing import Any

import boto3
from botocore import awsrequest
from tests import builders
from tests.cloudprovider.aws.builders import make_nodeclass
from tests.cloudprovider.aws.moto_fixtures import CLUSTER, REGION, Clock, NodeClasses

from karpy.api import ec2nodeclass, labels
from karpy.cloudprovider import types
from karpy.cloudprovider.aws import instances, provider
from karpy_emulator.aws import seeding

_OK = awsrequest.AWSResponse("http://127.0.0.1/", 200, {}, None)
_GROUP = {"GroupId": "pg-0a1", "GroupName": "training", "Strategy": "cluster", "State": "available"}
_RESERVATION = {
    "CapacityReservationId": "cr-0b2",
    "AvailabilityZone": "us-east-1a",
    "InstanceType": "m5.large",
    "OwnerId": seeding.ACCOUNT_ID,
    "InstanceMatchCriteria": "targeted",
    "State": "active",
    "EndDate": datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC),
}


def _answer(client: Any, operation: str, body: dict[str, Any], asked: list[dict[str, Any]]) -> None:
    client.meta.events.register(
        f"provide-client-params.ec2.{operation}", lambda params, **_: asked.append(dict(params))
    )
    client.meta.events.register(f"before-call.ec2.{operation}", lambda **_: (_OK, body))


async def test_new_fields_resolve_and_reach_the_launch_template(
    seeded: seeding.Seeded, make_provider: Callable[..., provider.AWSCloudProvider], nodeclasses: NodeClasses
) -> None:
    aws_provider = make_provider()
    ec2_client = aws_provider._deps.aws.ec2
    asked_groups: list[dict[str, Any]] = []
    asked_reservations: list[dict[str, Any]] = []
    _answer(ec2_client, "DescribePlacementGroups", {"PlacementGroups": [_GROUP]}, asked_groups)
    _answer(ec2_client, "DescribeCapacityReservations", {"CapacityReservations": [_RESERVATION]}, asked_reservations)
    base = make_nodeclass(role=seeded.node_role, discovery=CLUSTER)
    spec = dataclasses.replace(
        base.spec,
        security_group_selector_terms=(
            ec2nodeclass.SecurityGroupSelectorTerm(name=f"{CLUSTER}-nodes", vpc_id=seeded.vpc_id),
        ),
        placement_group_selector=ec2nodeclass.PlacementGroupSelector(name="training"),
        capacity_reservation_selector_terms=(ec2nodeclass.CapacityReservationSelectorTerm(id="cr-0b2"),),
        detailed_monitoring=True,
        associate_public_ip_address=False,
        ip_prefix_count=1,
        instance_store_policy="RAID0",
        metadata_options=ec2nodeclass.MetadataOptions(http_put_response_hop_limit=2),
    )
    nc = dataclasses.replace(base, spec=spec)
    nc = dataclasses.replace(nc, status=await aws_provider.reconcile_nodeclass(nc))
    nodeclasses.items[nc.name] = nc

    conditions = {c.type: c.status for c in nc.status.conditions}
    assert conditions["PlacementGroupReady"] == "True"
    assert conditions["Ready"] == "True"
    assert [g.id for g in nc.status.security_groups] == list(seeded.security_group_ids)
    assert asked_groups == [{"GroupNames": ["training"]}]
    assert asked_reservations[0]["CapacityReservationIds"] == ["cr-0b2"]
    assert [(c.id, c.instance_type, c.instance_match_criteria) for c in nc.status.capacity_reservations] == [
        ("cr-0b2", "m5.large", "targeted")
    ]

    claim = builders.parsed_nodeclaim(
        requirements=(
            builders.requirement(labels.LABEL_INSTANCE_TYPE, "In", "m5.large"),
            builders.requirement(labels.LABEL_CAPACITY_TYPE, "In", "on-demand"),
        )
    )
    created = await aws_provider.create(claim)

    ec2 = boto3.client("ec2", region_name=REGION)
    (template,) = ec2.describe_launch_templates(
        Filters=[{"Name": f"tag:{labels.TAG_EC2NODECLASS}", "Values": [nc.name]}]
    )["LaunchTemplates"]
    data = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"], Versions=["$Latest"])[
        "LaunchTemplateVersions"
    ][0]["LaunchTemplateData"]
    assert data["Placement"] == {"GroupId": "pg-0a1"}
    assert data["Monitoring"] == {"Enabled": True}
    assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == 2
    assert "SecurityGroupIds" not in data
    (nic,) = data["NetworkInterfaces"]
    assert nic["DeviceIndex"] == 0
    assert nic["AssociatePublicIpAddress"] is False
    assert nic["Ipv4PrefixCount"] == 1
    assert nic["Groups"] == list(seeded.security_group_ids)
    assert "strategy: RAID0" in base64.b64decode(data["UserData"]).decode()

    # The emulated EC2 gives the instance its template's interface groups, so it is not drifted.
    instance_id = instances.parse_provider_id(created.status.provider_id)
    instance = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    assert [g["GroupId"] for g in instance["SecurityGroups"]] == list(seeded.security_group_ids)
    assert await aws_provider.is_drifted(created) is None


async def test_missing_placement_group_keeps_the_node_class_not_ready(
    seeded: seeding.Seeded, make_provider: Callable[..., provider.AWSCloudProvider]
) -> None:
    aws_provider = make_provider()
    asked: list[dict[str, Any]] = []
    _answer(aws_provider._deps.aws.ec2, "DescribePlacementGroups", {"PlacementGroups": []}, asked)
    base = make_nodeclass(role=seeded.node_role, discovery=CLUSTER)
    nc = dataclasses.replace(
        base,
        spec=dataclasses.replace(base.spec, placement_group_selector=ec2nodeclass.PlacementGroupSelector(id="pg-9")),
    )
    conditions = {c.type: (c.status, c.message) for c in (await aws_provider.reconcile_nodeclass(nc)).conditions}
    assert conditions["PlacementGroupReady"] == ("False", "no placement group matched id pg-9")
    assert conditions["Ready"] == ("False", "not ready: PlacementGroupReady")
    assert asked == [{"GroupIds": ["pg-9"]}]


async def _reserving_nodeclass(
    aws_provider: provider.AWSCloudProvider, seeded: seeding.Seeded, nodeclasses: NodeClasses
) -> ec2nodeclass.EC2NodeClass:
    """The default node class selecting reservation cr-0b2, reconciled (which describes the reservation)."""
    base = make_nodeclass(role=seeded.node_role, discovery=CLUSTER)
    nc = dataclasses.replace(
        base,
        spec=dataclasses.replace(
            base.spec,
            capacity_reservation_selector_terms=(ec2nodeclass.CapacityReservationSelectorTerm(id="cr-0b2"),),
        ),
    )
    nc = dataclasses.replace(nc, status=await aws_provider.reconcile_nodeclass(nc))
    nodeclasses.items[nc.name] = nc
    return nc


# The claims admit every capacity type: the reservation is preferred as it is already paid for.
_M5_OR_C5 = (builders.requirement(labels.LABEL_INSTANCE_TYPE, "In", "m5.large", "c5.large"),)


async def test_reserved_capacity_is_launched_into_its_reservation(
    seeded: seeding.Seeded, make_provider: Callable[..., provider.AWSCloudProvider], nodeclasses: NodeClasses
) -> None:
    aws_provider = make_provider()
    ec2_client = aws_provider._deps.aws.ec2
    _answer(ec2_client, "DescribeCapacityReservations", {"CapacityReservations": [_RESERVATION]}, [])
    fleets: list[dict[str, Any]] = []
    ec2_client.meta.events.register(
        "provide-client-params.ec2.CreateFleet",
        lambda params, **_: None if params.get("DryRun") else fleets.append(params),
    )
    await _reserving_nodeclass(aws_provider, seeded, nodeclasses)
    created = await aws_provider.create(builders.parsed_nodeclaim(requirements=_M5_OR_C5))

    assert created.metadata.labels[labels.LABEL_CAPACITY_TYPE] == "reserved"
    assert created.metadata.labels[labels.LABEL_CAPACITY_RESERVATION_ID] == "cr-0b2"
    assert created.metadata.labels[labels.LABEL_CAPACITY_RESERVATION_TYPE] == "default"
    assert created.metadata.labels[labels.LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE] == "false"
    assert created.metadata.labels[labels.LABEL_ZONE] == "us-east-1a"
    assert created.metadata.labels[labels.LABEL_INSTANCE_TYPE] == "m5.large"
    (request,) = fleets
    assert request["TargetCapacitySpecification"]["DefaultTargetCapacityType"] == "on-demand"
    (config,) = request["LaunchTemplateConfigs"]
    assert [(o["InstanceType"], o["AvailabilityZone"]) for o in config["Overrides"]] == [("m5.large", "us-east-1a")]
    ec2 = boto3.client("ec2", region_name=REGION)
    data = ec2.describe_launch_template_versions(
        LaunchTemplateName=config["LaunchTemplateSpecification"]["LaunchTemplateName"], Versions=["$Latest"]
    )["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "CapacityReservationTarget": {"CapacityReservationId": "cr-0b2"},
    }


async def test_a_reservation_takes_only_as_many_instances_as_ec2_says_it_has_left(
    seeded: seeding.Seeded,
    make_provider: Callable[..., provider.AWSCloudProvider],
    nodeclasses: NodeClasses,
    clock: Clock,
) -> None:
    """Upstream's capacity-reservation availability: `AvailableInstanceCount` at each describe, one fewer per launch
    into the reservation, one more per termination of one of its instances."""
    aws_provider = make_provider()
    ec2_client = aws_provider._deps.aws.ec2
    answer = {"CapacityReservations": [{**_RESERVATION, "AvailableInstanceCount": 1}]}
    ec2_client.meta.events.register("before-call.ec2.DescribeCapacityReservations", lambda **_: (_OK, answer))
    refused: list[dict[str, Any]] = []
    ec2_client.meta.events.register(
        "after-call.ec2.CreateFleet", lambda parsed, **_: refused.extend(parsed.get("Errors") or ())
    )
    in_reservation: set[str] = set()

    def tag_reserved_instances(parsed: dict[str, Any], **_: Any) -> None:
        # moto does not report an instance's reservation; EC2 does, and termination hands the slot back.
        for r in parsed.get("Reservations") or ():
            for i in r.get("Instances") or ():
                if i["InstanceId"] in in_reservation:
                    i["CapacityReservationId"] = "cr-0b2"

    ec2_client.meta.events.register("after-call.ec2.DescribeInstances", tag_reserved_instances)
    nc = await _reserving_nodeclass(aws_provider, seeded, nodeclasses)

    async def capacity_type_of_a_launch(name: str) -> str:
        created = await aws_provider.create(builders.parsed_nodeclaim(name, requirements=_M5_OR_C5))
        if created.metadata.labels[labels.LABEL_CAPACITY_TYPE] == labels.CAPACITY_TYPE_RESERVED:
            in_reservation.add(created.status.provider_id.rsplit("/", 1)[-1])
        return created.metadata.labels[labels.LABEL_CAPACITY_TYPE]

    assert await capacity_type_of_a_launch("default-1") == "reserved"
    first = (await aws_provider.list())[0]
    assert await capacity_type_of_a_launch("default-2") == "spot"  # none left: not even tried, spot is next
    await aws_provider.delete(first)
    assert await capacity_type_of_a_launch("default-3") == "reserved"  # the terminated instance's slot
    answer["CapacityReservations"][0]["AvailableInstanceCount"] = 2
    clock.step(61)  # past the describe's minute: the next status refresh asks EC2 again
    await aws_provider.reconcile_nodeclass(nc)
    assert await capacity_type_of_a_launch("default-4") == "reserved"
    assert refused == []


async def test_pods_asking_for_efa_get_efa_interfaces(
    seeded: seeding.Seeded, make_provider: Callable[..., provider.AWSCloudProvider], nodeclasses: NodeClasses
) -> None:
    aws_provider = make_provider()
    fleets: list[dict[str, Any]] = []
    aws_provider._deps.aws.ec2.meta.events.register(
        "provide-client-params.ec2.CreateFleet",
        lambda params, **_: None if params.get("DryRun") else fleets.append(params),
    )
    nc = make_nodeclass(role=seeded.node_role, discovery=CLUSTER)
    nc = dataclasses.replace(nc, status=await aws_provider.reconcile_nodeclass(nc))
    nodeclasses.items[nc.name] = nc
    claim = builders.parsed_nodeclaim(
        requirements=(
            builders.requirement(labels.LABEL_INSTANCE_TYPE, "In", "g4dn.8xlarge"),
            builders.requirement(labels.LABEL_CAPACITY_TYPE, "In", "on-demand"),
        ),
        requests={labels.RESOURCE_EFA: "1"},
    )
    created = await aws_provider.create(claim)
    assert created.status.capacity[labels.RESOURCE_EFA] == 1000  # g4dn.8xlarge: one EFA interface
    ec2 = boto3.client("ec2", region_name=REGION)
    (config,) = fleets[0]["LaunchTemplateConfigs"]
    data = ec2.describe_launch_template_versions(
        LaunchTemplateName=config["LaunchTemplateSpecification"]["LaunchTemplateName"], Versions=["$Latest"]
    )["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    assert data["NetworkInterfaces"] == [
        {
            "NetworkCardIndex": 0,
            "DeviceIndex": 0,
            "InterfaceType": "efa",
            "Groups": list(seeded.security_group_ids),
        }
    ]
    # The emulated EC2 gives the instance the interface's groups.
    instance_id = instances.parse_provider_id(created.status.provider_id)
    instance = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]
    assert [g["GroupId"] for g in instance["SecurityGroups"]] == list(seeded.security_group_ids)


async def test_tracking_cpu_and_enclave_options_reach_the_launched_template(
    seeded: seeding.Seeded, make_provider: Callable[..., provider.AWSCloudProvider], nodeclasses: NodeClasses
) -> None:
    aws_provider = make_provider()
    fleets: list[dict[str, Any]] = []
    aws_provider._deps.aws.ec2.meta.events.register(
        "provide-client-params.ec2.CreateFleet",
        lambda params, **_: None if params.get("DryRun") else fleets.append(params),
    )
    base = make_nodeclass(role=seeded.node_role, discovery=CLUSTER)
    spec = dataclasses.replace(
        base.spec,
        connection_tracking=ec2nodeclass.ConnectionTracking(tcp_established_timeout=7200, udp_timeout=30),
        cpu_options=ec2nodeclass.CPUOptions(nested_virtualization="enabled"),
        enclave_options=ec2nodeclass.EnclaveOptions(enabled=True),
    )
    nc = dataclasses.replace(base, spec=spec)
    nc = dataclasses.replace(nc, status=await aws_provider.reconcile_nodeclass(nc))
    nodeclasses.items[nc.name] = nc
    claim = builders.parsed_nodeclaim(
        requirements=(
            builders.requirement(labels.LABEL_INSTANCE_TYPE, "In", "m5.large"),
            builders.requirement(labels.LABEL_CAPACITY_TYPE, "In", "on-demand"),
        )
    )
    created = await aws_provider.create(claim)
    assert created.metadata.labels[labels.LABEL_INSTANCE_TYPE] == "m5.large"
    (config,) = fleets[0]["LaunchTemplateConfigs"]

    ec2 = boto3.client("ec2", region_name=REGION)
    data = ec2.describe_launch_template_versions(
        LaunchTemplateName=config["LaunchTemplateSpecification"]["LaunchTemplateName"], Versions=["$Latest"]
    )["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    (nic,) = data["NetworkInterfaces"]
    assert nic["DeviceIndex"] == 0
    assert nic["Groups"] == list(seeded.security_group_ids)
    assert nic["ConnectionTrackingSpecification"] == {"TcpEstablishedTimeout": 7200, "UdpTimeout": 30}
    assert data["CpuOptions"] == {"NestedVirtualization": "enabled"}
    assert data["EnclaveOptions"] == {"Enabled": True}
    assert "SecurityGroupIds" not in data


async def test_placement_group_drift(
    seeded: seeding.Seeded, make_provider: Callable[..., provider.AWSCloudProvider], nodeclasses: NodeClasses
) -> None:
    aws_provider = make_provider()
    ec2_client = aws_provider._deps.aws.ec2
    groups = {"training": _GROUP, "inference": {**_GROUP, "GroupId": "pg-0c3", "GroupName": "inference"}}
    asked: list[dict[str, Any]] = []
    ec2_client.meta.events.register(
        "provide-client-params.ec2.DescribePlacementGroups", lambda params, **_: asked.append(dict(params))
    )
    ec2_client.meta.events.register(
        "before-call.ec2.DescribePlacementGroups",
        lambda **_: (_OK, {"PlacementGroups": [groups[asked[-1]["GroupNames"][0]]]}),
    )
    base = make_nodeclass(role=seeded.node_role, discovery=CLUSTER)

    def selecting(group: str | None) -> ec2nodeclass.EC2NodeClass:
        selector = ec2nodeclass.PlacementGroupSelector(name=group) if group else None
        return dataclasses.replace(base, spec=dataclasses.replace(base.spec, placement_group_selector=selector))

    nc = selecting("training")
    nc = dataclasses.replace(nc, status=await aws_provider.reconcile_nodeclass(nc))
    nodeclasses.items[nc.name] = nc
    m5 = (
        builders.requirement(labels.LABEL_INSTANCE_TYPE, "In", "m5.large"),
        builders.requirement(labels.LABEL_CAPACITY_TYPE, "In", "on-demand"),
    )
    in_group = await aws_provider.create(builders.parsed_nodeclaim(name="in-group", requirements=m5))
    assert in_group.metadata.labels[labels.LABEL_PLACEMENT_GROUP_ID] == "pg-0a1"
    assert await aws_provider.is_drifted(in_group) is None

    nodeclasses.items[nc.name] = dataclasses.replace(selecting("inference"), status=nc.status)
    assert await aws_provider.is_drifted(in_group) is types.DriftReason.PLACEMENT_GROUP

    nodeclasses.items[nc.name] = dataclasses.replace(selecting(None), status=nc.status)
    assert await aws_provider.is_drifted(in_group) is types.DriftReason.PLACEMENT_GROUP
    outside = await aws_provider.create(builders.parsed_nodeclaim(name="outside", requirements=m5))
    assert labels.LABEL_PLACEMENT_GROUP_ID not in outside.metadata.labels
    assert await aws_provider.is_drifted(outside) is None

    nodeclasses.items[nc.name] = nc  # the class selects a group again
    assert await aws_provider.is_drifted(outside) is types.DriftReason.PLACEMENT_GROUP
    assert await aws_provider.is_drifted(in_group) is None
