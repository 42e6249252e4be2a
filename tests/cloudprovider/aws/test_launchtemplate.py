"""Launch template data and content-hash names (pure)."""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

import pytest
from tests.cloudprovider.aws.builders import make_instance_type, make_nodeclass

from karpy.api import ec2nodeclass, labels, quantity
from karpy.cloudprovider.aws import launchtemplate

SPEC = launchtemplate.LaunchTemplateSpec(
    image_id="ami-1",
    user_data="#!/bin/bash\n",
    security_group_ids=("sg-1", "sg-2"),
    instance_profile="demo_1",
    block_device_mappings=launchtemplate.block_devices_for(make_nodeclass()),
    metadata_options=ec2nodeclass.MetadataOptions(),
    tags={"karpenter.sh/nodepool": "default"},
)


def test_data_carries_every_input() -> None:
    data = launchtemplate.build_launch_template_data(SPEC)
    assert data["ImageId"] == "ami-1"
    assert base64.b64decode(data["UserData"]).decode() == "#!/bin/bash\n"
    assert data["SecurityGroupIds"] == ["sg-1", "sg-2"]
    assert data["IamInstanceProfile"] == {"Name": "demo_1"}
    assert data["MetadataOptions"] == {
        "HttpEndpoint": "enabled",
        "HttpProtocolIpv6": "disabled",
        "HttpPutResponseHopLimit": 1,
        "HttpTokens": "required",
        "InstanceMetadataTags": "disabled",
    }
    # AL2023 default root volume: 20 GiB gp3, encrypted
    assert data["BlockDeviceMappings"] == [
        {"DeviceName": "/dev/xvda", "Ebs": {"Encrypted": True, "VolumeType": "gp3", "VolumeSize": 20}}
    ]


def test_public_ip_choice_moves_groups_onto_the_interface() -> None:
    data = launchtemplate.build_launch_template_data(dataclasses.replace(SPEC, associate_public_ip_address=False))
    assert "SecurityGroupIds" not in data
    assert data["NetworkInterfaces"] == [
        {"DeviceIndex": 0, "AssociatePublicIpAddress": False, "Groups": ["sg-1", "sg-2"]}
    ]


def test_volume_size_rounds_up_to_whole_gib() -> None:
    bdm = ec2nodeclass.BlockDeviceMapping(
        device_name="/dev/xvda", ebs=ec2nodeclass.BlockDevice(volume_size=quantity.parse("100G"))
    )
    data = launchtemplate.build_launch_template_data(dataclasses.replace(SPEC, block_device_mappings=(bdm,)))
    assert data["BlockDeviceMappings"][0]["Ebs"]["VolumeSize"] == 94  # 100e9 bytes = 93.13 GiB


def test_name_is_a_hash_of_the_content() -> None:
    name = launchtemplate.launch_template_name(SPEC)
    assert name.startswith("karpenter.k8s.aws/")
    assert launchtemplate.launch_template_name(dataclasses.replace(SPEC)) == name
    variants = [
        dataclasses.replace(SPEC, image_id="ami-2"),
        dataclasses.replace(SPEC, user_data="x"),
        dataclasses.replace(SPEC, security_group_ids=("sg-1",)),
        dataclasses.replace(SPEC, tags={}),
    ]
    assert all(launchtemplate.launch_template_name(v) != name for v in variants)
    request = launchtemplate.build_create_launch_template_request(SPEC)
    assert request["LaunchTemplateName"] == name
    assert request["TagSpecifications"] == [
        {"ResourceType": "launch-template", "Tags": [{"Key": "karpenter.sh/nodepool", "Value": "default"}]}
    ]


def test_bottlerocket_default_has_os_and_data_volumes() -> None:
    devices = launchtemplate.block_devices_for(make_nodeclass(alias="bottlerocket@latest"))
    assert [d.device_name for d in devices] == ["/dev/xvda", "/dev/xvdb"]


_NIC = ec2nodeclass.NetworkInterface
_EFA_ONLY = ec2nodeclass.NetworkInterfaceType.EFA_ONLY
_ENA = ec2nodeclass.NetworkInterfaceType.INTERFACE


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        # Nothing interface-specific: the groups sit on the instance, no interface is pre-configured.
        ({}, None),
        ({"ip_prefix_count": 2}, [{"DeviceIndex": 0, "Ipv4PrefixCount": 2, "Groups": ["sg-1", "sg-2"]}]),
        (
            {"associate_public_ip_address": True, "ip_prefix_count": 0},
            [{"DeviceIndex": 0, "AssociatePublicIpAddress": True, "Ipv4PrefixCount": 0, "Groups": ["sg-1", "sg-2"]}],
        ),
        # Explicit interfaces, given out of order: sorted by (card, device); public IP/prefixes on the primary only.
        (
            {
                "associate_public_ip_address": False,
                "ip_prefix_count": 1,
                "network_interfaces": (_NIC(1, 0, _EFA_ONLY), _NIC(0, 1, _EFA_ONLY), _NIC(0, 0, _ENA)),
            },
            [
                {
                    "NetworkCardIndex": 0,
                    "DeviceIndex": 0,
                    "InterfaceType": "interface",
                    "Groups": ["sg-1", "sg-2"],
                    "AssociatePublicIpAddress": False,
                    "Ipv4PrefixCount": 1,
                },
                {"NetworkCardIndex": 0, "DeviceIndex": 1, "InterfaceType": "efa-only", "Groups": ["sg-1", "sg-2"]},
                {"NetworkCardIndex": 1, "DeviceIndex": 0, "InterfaceType": "efa-only", "Groups": ["sg-1", "sg-2"]},
            ],
        ),
        # Pods asked for EFA: one EFA interface per card; cards after the first at device 1 (upstream's priority).
        (
            {"efa_count": 3},
            [
                {"NetworkCardIndex": 0, "DeviceIndex": 0, "InterfaceType": "efa", "Groups": ["sg-1", "sg-2"]},
                {"NetworkCardIndex": 1, "DeviceIndex": 1, "InterfaceType": "efa", "Groups": ["sg-1", "sg-2"]},
                {"NetworkCardIndex": 2, "DeviceIndex": 1, "InterfaceType": "efa", "Groups": ["sg-1", "sg-2"]},
            ],
        ),
        # ... each with the prefix count (and public-IP choice), as upstream.
        (
            {"efa_count": 2, "ip_prefix_count": 4},
            [
                {
                    "NetworkCardIndex": card,
                    "DeviceIndex": device,
                    "InterfaceType": "efa",
                    "Groups": ["sg-1", "sg-2"],
                    "Ipv4PrefixCount": 4,
                }
                for card, device in ((0, 0), (1, 1))
            ],
        ),
        # An IPv6 cluster: the primary interface takes a primary IPv6 address; prefixes are IPv6 ones.
        (
            {"ipv6": True},
            [{"DeviceIndex": 0, "Groups": ["sg-1", "sg-2"], "PrimaryIpv6": True, "Ipv6AddressCount": 1}],
        ),
        (
            {"ipv6": True, "ip_prefix_count": 2},
            [
                {
                    "DeviceIndex": 0,
                    "Ipv6PrefixCount": 2,
                    "Groups": ["sg-1", "sg-2"],
                    "PrimaryIpv6": True,
                    "Ipv6AddressCount": 1,
                }
            ],
        ),
        # ... on every interface that carries IP traffic, never on an EFA-only one.
        (
            {"ipv6": True, "network_interfaces": (_NIC(0, 0, _ENA), _NIC(1, 0, _EFA_ONLY))},
            [
                {
                    "NetworkCardIndex": 0,
                    "DeviceIndex": 0,
                    "InterfaceType": "interface",
                    "Groups": ["sg-1", "sg-2"],
                    "PrimaryIpv6": True,
                    "Ipv6AddressCount": 1,
                },
                {"NetworkCardIndex": 1, "DeviceIndex": 0, "InterfaceType": "efa-only", "Groups": ["sg-1", "sg-2"]},
            ],
        ),
        (
            {"ipv6": True, "efa_count": 2},
            [
                {
                    "NetworkCardIndex": card,
                    "DeviceIndex": device,
                    "InterfaceType": "efa",
                    "Groups": ["sg-1", "sg-2"],
                    "PrimaryIpv6": True,
                    "Ipv6AddressCount": 1,
                }
                for card, device in ((0, 0), (1, 1))
            ],
        ),
    ],
)
def test_network_interfaces(changes: dict[str, Any], expected: list[dict[str, Any]] | None) -> None:
    spec = dataclasses.replace(SPEC, **changes)
    assert launchtemplate.network_interfaces(spec) == expected
    data = launchtemplate.build_launch_template_data(spec)
    # EC2 refuses groups on both the instance and its interfaces: exactly one of the two carries them.
    if expected is None:
        assert data["SecurityGroupIds"] == ["sg-1", "sg-2"]
        assert "NetworkInterfaces" not in data
    else:
        assert "SecurityGroupIds" not in data
        assert data["NetworkInterfaces"] == expected


def test_monitoring_metadata_and_placement() -> None:
    spec = dataclasses.replace(
        SPEC,
        detailed_monitoring=True,
        metadata_options=ec2nodeclass.MetadataOptions(
            http_endpoint="disabled",
            http_protocol_ipv6="enabled",
            http_put_response_hop_limit=3,
            http_tokens="optional",
        ),
        placement_group_id="pg-0123",
    )
    data = launchtemplate.build_launch_template_data(spec)
    assert data["Monitoring"] == {"Enabled": True}
    assert data["MetadataOptions"] == {
        "HttpEndpoint": "disabled",
        "HttpProtocolIpv6": "enabled",
        "HttpPutResponseHopLimit": 3,
        "HttpTokens": "optional",
        "InstanceMetadataTags": "disabled",
    }
    assert data["Placement"] == {"GroupId": "pg-0123"}
    assert "Placement" not in launchtemplate.build_launch_template_data(SPEC)


def test_every_ebs_field_reaches_the_mapping_and_zero_iops_throughput_mean_baseline() -> None:
    full = ec2nodeclass.BlockDevice(
        delete_on_termination=False,
        encrypted=True,
        iops=6000,
        kms_key_id="arn:aws:kms:us-east-1:123456789012:key/k",
        snapshot_id="snap-1",
        throughput=250,
        volume_initialization_rate=200,
        volume_size=quantity.parse("100Gi"),
        volume_type="gp3",
    )
    baseline = ec2nodeclass.BlockDevice(iops=0, throughput=0, volume_type="gp3")
    devices = (
        ec2nodeclass.BlockDeviceMapping(device_name="/dev/xvda", root_volume=True, ebs=full),
        ec2nodeclass.BlockDeviceMapping(device_name="/dev/xvdb", ebs=baseline),
    )
    data = launchtemplate.build_launch_template_data(dataclasses.replace(SPEC, block_device_mappings=devices))
    assert data["BlockDeviceMappings"] == [
        {
            "DeviceName": "/dev/xvda",
            "Ebs": {
                "DeleteOnTermination": False,
                "Encrypted": True,
                "Iops": 6000,
                "KmsKeyId": "arn:aws:kms:us-east-1:123456789012:key/k",
                "SnapshotId": "snap-1",
                "Throughput": 250,
                "VolumeInitializationRate": 200,
                "VolumeSize": 100,
                "VolumeType": "gp3",
            },
        },
        {"DeviceName": "/dev/xvdb", "Ebs": {"VolumeType": "gp3"}},
    ]


@pytest.mark.parametrize(
    ("alias", "ami_family", "expected"),
    [
        ("al2023@latest", None, [("/dev/xvda", 20)]),
        ("al2@latest", None, [("/dev/xvda", 20)]),
        ("bottlerocket@latest", None, [("/dev/xvda", 4), ("/dev/xvdb", 20)]),
        ("windows2022@latest", None, [("/dev/sda1", 50)]),
        # Custom AMIs bring their own mappings: none is sent (EC2 rejects an empty list, so the key is absent).
        ("al2023@latest", ec2nodeclass.AMIFamily.CUSTOM, []),
    ],
)
def test_default_block_devices_per_family(
    alias: str, ami_family: ec2nodeclass.AMIFamily | None, expected: list[tuple[str, int]]
) -> None:
    nc = make_nodeclass(alias=alias)
    nc = dataclasses.replace(nc, spec=dataclasses.replace(nc.spec, ami_family=ami_family))
    devices = launchtemplate.block_devices_for(nc)
    data = launchtemplate.build_launch_template_data(dataclasses.replace(SPEC, block_device_mappings=devices))
    got = [(m["DeviceName"], m["Ebs"]["VolumeSize"]) for m in data.get("BlockDeviceMappings", [])]
    assert got == expected
    assert all(
        m["Ebs"]["Encrypted"] is True and m["Ebs"]["VolumeType"] == "gp3" for m in data.get("BlockDeviceMappings", [])
    )


@pytest.mark.parametrize(
    "changes",
    [
        {"detailed_monitoring": True},
        {"associate_public_ip_address": True},
        {"ip_prefix_count": 1},
        {"network_interfaces": (_NIC(0, 0, _ENA),)},
        {"efa_count": 1},
        {"placement_group_id": "pg-1"},
        {"metadata_options": ec2nodeclass.MetadataOptions(http_put_response_hop_limit=2)},
        {"block_device_mappings": ()},
        {"instance_profile": "other"},
        {"connection_tracking": ec2nodeclass.ConnectionTracking(udp_timeout=30)},
        {"cpu_options": ec2nodeclass.CPUOptions("enabled")},
        {"enclave_options": ec2nodeclass.EnclaveOptions(enabled=True)},
    ],
)
def test_each_launch_field_changes_the_content_hash(changes: dict[str, Any]) -> None:
    assert launchtemplate.launch_template_name(
        dataclasses.replace(SPEC, **changes)
    ) != launchtemplate.launch_template_name(SPEC)


@pytest.mark.parametrize(
    ("block", "market"),
    [(False, None), (True, {"MarketType": "capacity-block"})],
)
def test_reserved_template_targets_its_reservation_only(block: bool, market: dict[str, str] | None) -> None:
    spec = dataclasses.replace(SPEC, capacity_reservation_id="cr-1", capacity_block=block)
    data = launchtemplate.build_launch_template_data(spec)
    assert data["CapacityReservationSpecification"] == {
        "CapacityReservationPreference": "capacity-reservations-only",
        "CapacityReservationTarget": {"CapacityReservationId": "cr-1"},
    }
    assert data.get("InstanceMarketOptions") == market
    assert launchtemplate.launch_template_name(spec) != launchtemplate.launch_template_name(SPEC)
    plain = launchtemplate.build_launch_template_data(SPEC)
    assert "CapacityReservationSpecification" not in plain
    assert "InstanceMarketOptions" not in plain


_TRACKING = ec2nodeclass.ConnectionTracking(tcp_established_timeout=3600, udp_stream_timeout=90, udp_timeout=45)
_TRACKED = {"TcpEstablishedTimeout": 3600, "UdpStreamTimeout": 90, "UdpTimeout": 45}
_GROUPS = ["sg-1", "sg-2"]


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        # No timeout set: nothing to send, the groups stay on the instance.
        ({"connection_tracking": ec2nodeclass.ConnectionTracking()}, None),
        # Asked alone: the primary interface becomes explicit to carry them (and the groups move onto it).
        (
            {"connection_tracking": _TRACKING},
            [{"DeviceIndex": 0, "Groups": _GROUPS, "ConnectionTrackingSpecification": _TRACKED}],
        ),
        # Only the timeouts given are sent: EC2 keeps its own default for the others.
        (
            {"connection_tracking": ec2nodeclass.ConnectionTracking(udp_timeout=60), "ip_prefix_count": 2},
            [
                {
                    "DeviceIndex": 0,
                    "Ipv4PrefixCount": 2,
                    "Groups": _GROUPS,
                    "ConnectionTrackingSpecification": {"UdpTimeout": 60},
                }
            ],
        ),
        # Explicit interfaces: every IP-carrying interface is tracked, efa-only ones (no IP stack) are not.
        (
            {"connection_tracking": _TRACKING, "network_interfaces": (_NIC(0, 0, _ENA), _NIC(1, 0, _EFA_ONLY))},
            [
                {
                    "NetworkCardIndex": 0,
                    "DeviceIndex": 0,
                    "InterfaceType": "interface",
                    "Groups": _GROUPS,
                    "ConnectionTrackingSpecification": _TRACKED,
                },
                {"NetworkCardIndex": 1, "DeviceIndex": 0, "InterfaceType": "efa-only", "Groups": _GROUPS},
            ],
        ),
        # EFA interfaces (ENA + EFA) carry IP traffic: each one is tracked.
        (
            {"connection_tracking": _TRACKING, "efa_count": 2},
            [
                {
                    "NetworkCardIndex": card,
                    "DeviceIndex": device,
                    "InterfaceType": "efa",
                    "Groups": _GROUPS,
                    "ConnectionTrackingSpecification": _TRACKED,
                }
                for card, device in ((0, 0), (1, 1))
            ],
        ),
    ],
)
def test_connection_tracking_on_the_interfaces(changes: dict[str, Any], expected: list[dict[str, Any]] | None) -> None:
    spec = dataclasses.replace(SPEC, **changes)
    assert launchtemplate.network_interfaces(spec) == expected
    data = launchtemplate.build_launch_template_data(spec)
    assert ("SecurityGroupIds" in data) is (expected is None)


@pytest.mark.parametrize(
    ("changes", "cpu", "enclave"),
    [
        ({}, None, None),
        # Present but empty: nothing asked, nothing sent.
        ({"cpu_options": ec2nodeclass.CPUOptions(), "enclave_options": ec2nodeclass.EnclaveOptions()}, None, None),
        ({"cpu_options": ec2nodeclass.CPUOptions("enabled")}, {"NestedVirtualization": "enabled"}, None),
        ({"cpu_options": ec2nodeclass.CPUOptions("disabled")}, {"NestedVirtualization": "disabled"}, None),
        ({"enclave_options": ec2nodeclass.EnclaveOptions(enabled=True)}, None, {"Enabled": True}),
        # An explicit false is the user's choice (it overrides nothing, but it is what they wrote).
        ({"enclave_options": ec2nodeclass.EnclaveOptions(enabled=False)}, None, {"Enabled": False}),
    ],
)
def test_cpu_and_enclave_options(
    changes: dict[str, Any], cpu: dict[str, str] | None, enclave: dict[str, bool] | None
) -> None:
    data = launchtemplate.build_launch_template_data(dataclasses.replace(SPEC, **changes))
    assert data.get("CpuOptions") == cpu
    assert data.get("EnclaveOptions") == enclave
    # Instance-level options: the groups stay where they were.
    assert data["SecurityGroupIds"] == _GROUPS


@pytest.mark.parametrize(
    ("tracking", "hypervisor", "expected"),
    [
        (None, "xen", True),
        (ec2nodeclass.ConnectionTracking(), "xen", True),  # nothing set: nothing a Xen type would refuse
        (ec2nodeclass.ConnectionTracking(udp_timeout=30), "xen", False),
        (ec2nodeclass.ConnectionTracking(udp_timeout=30), "nitro", True),
        (ec2nodeclass.ConnectionTracking(udp_timeout=30), "", True),  # bare metal runs on Nitro too
    ],
)
def test_a_tracked_class_launches_no_xen_type(
    tracking: ec2nodeclass.ConnectionTracking | None, hypervisor: str, expected: bool
) -> None:
    nc = make_nodeclass()
    nc = dataclasses.replace(nc, spec=dataclasses.replace(nc.spec, connection_tracking=tracking))
    it = make_instance_type("m4.large")
    it = dataclasses.replace(it, labels={**it.labels, labels.LABEL_INSTANCE_HYPERVISOR: hypervisor})
    assert launchtemplate.launchable(nc, it) is expected


def test_dedicated_tenancy_is_placed_and_default_stays_unsaid() -> None:
    dedicated = launchtemplate.build_launch_template_data(dataclasses.replace(SPEC, tenancy="dedicated"))
    assert dedicated["Placement"] == {"Tenancy": "dedicated"}
    grouped = dataclasses.replace(SPEC, tenancy="dedicated", placement_group_id="pg-1")
    assert launchtemplate.build_launch_template_data(grouped)["Placement"] == {
        "GroupId": "pg-1",
        "Tenancy": "dedicated",
    }
    shared = dataclasses.replace(SPEC, tenancy="default")
    assert "Placement" not in launchtemplate.build_launch_template_data(shared)
    assert launchtemplate.launch_template_name(shared) == launchtemplate.launch_template_name(SPEC)
