"""Launch template content, name and request: pure. Named by a hash of the content, so equal content shares one.

(aws: pkg/providers/launchtemplate/launchtemplate.go, amifamily/resolver.go DefaultEBS)
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from karpy.api import ec2nodeclass, labels, quantity
from karpy.cloudprovider import types
from karpy.cloudprovider.aws import fleet

NAME_PREFIX = "karpenter.k8s.aws/"

_GP3_20GI = ec2nodeclass.BlockDevice(encrypted=True, volume_size=20 * quantity.GI, volume_type="gp3")
DEFAULT_BLOCK_DEVICES: Mapping[ec2nodeclass.AMIFamily, tuple[ec2nodeclass.BlockDeviceMapping, ...]] = {
    ec2nodeclass.AMIFamily.AL2: (ec2nodeclass.BlockDeviceMapping(device_name="/dev/xvda", ebs=_GP3_20GI),),
    ec2nodeclass.AMIFamily.AL2023: (ec2nodeclass.BlockDeviceMapping(device_name="/dev/xvda", ebs=_GP3_20GI),),
    ec2nodeclass.AMIFamily.BOTTLEROCKET: (
        ec2nodeclass.BlockDeviceMapping(
            device_name="/dev/xvda",
            ebs=ec2nodeclass.BlockDevice(encrypted=True, volume_size=4 * quantity.GI, volume_type="gp3"),
        ),
        ec2nodeclass.BlockDeviceMapping(device_name="/dev/xvdb", ebs=_GP3_20GI),
    ),
    ec2nodeclass.AMIFamily.WINDOWS2019: (
        ec2nodeclass.BlockDeviceMapping(
            device_name="/dev/sda1",
            ebs=ec2nodeclass.BlockDevice(encrypted=True, volume_size=50 * quantity.GI, volume_type="gp3"),
        ),
    ),
}


@dataclass(frozen=True, slots=True)
class LaunchTemplateSpec:
    """Everything that goes into one launch template; its hash is the template's name."""

    image_id: str
    user_data: str
    security_group_ids: tuple[str, ...]
    instance_profile: str
    block_device_mappings: tuple[ec2nodeclass.BlockDeviceMapping, ...]
    metadata_options: ec2nodeclass.MetadataOptions
    tags: Mapping[str, str]
    detailed_monitoring: bool = False
    associate_public_ip_address: bool | None = None
    ip_prefix_count: int | None = None
    network_interfaces: tuple[ec2nodeclass.NetworkInterface, ...] = ()
    efa_count: int = 0  # EFA interfaces the claim's instance types get (pods asked for vpc.amazonaws.com/efa)
    placement_group_id: str = ""
    capacity_reservation_id: str = ""  # set: the template launches into this reservation only
    capacity_block: bool = False  # the reservation is a capacity block (bought with its own market type)
    connection_tracking: ec2nodeclass.ConnectionTracking | None = None
    cpu_options: ec2nodeclass.CPUOptions | None = None
    enclave_options: ec2nodeclass.EnclaveOptions | None = None
    tenancy: str = ""  # "dedicated": single-tenant hardware; "" or "default": shared
    ipv6: bool = False  # an IPv6 cluster: the interfaces take a primary IPv6 address and IPv6 prefixes


def nodeclass_spec(
    nodeclass: ec2nodeclass.EC2NodeClass, *, image_id: str, user_data: str, tags: Mapping[str, str]
) -> LaunchTemplateSpec:
    """The template a node class decides; a launch adds what its claim decides (EFA, placement, reservation)."""
    spec = nodeclass.spec
    return LaunchTemplateSpec(
        image_id=image_id,
        user_data=user_data,
        security_group_ids=tuple(g.id for g in nodeclass.status.security_groups),
        instance_profile=nodeclass.status.instance_profile,
        block_device_mappings=block_devices_for(nodeclass),
        metadata_options=spec.metadata_options,
        tags=tags,
        detailed_monitoring=spec.detailed_monitoring,
        associate_public_ip_address=spec.associate_public_ip_address,
        ip_prefix_count=spec.ip_prefix_count,
        network_interfaces=spec.network_interfaces,
        connection_tracking=spec.connection_tracking,
        cpu_options=spec.cpu_options,
        enclave_options=spec.enclave_options,
    )


def block_devices_for(nodeclass: ec2nodeclass.EC2NodeClass) -> tuple[ec2nodeclass.BlockDeviceMapping, ...]:
    if nodeclass.spec.block_device_mappings:
        return nodeclass.spec.block_device_mappings
    family = nodeclass.resolved_ami_family
    if family in (ec2nodeclass.AMIFamily.WINDOWS2022, ec2nodeclass.AMIFamily.WINDOWS2025):
        family = ec2nodeclass.AMIFamily.WINDOWS2019
    return DEFAULT_BLOCK_DEVICES.get(family, ())


def _ebs(device: ec2nodeclass.BlockDevice) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in (
        ("DeleteOnTermination", device.delete_on_termination),
        ("Encrypted", device.encrypted),
        ("VolumeType", device.volume_type),
        ("KmsKeyId", device.kms_key_id),
        ("SnapshotId", device.snapshot_id),
        ("VolumeInitializationRate", device.volume_initialization_rate),
    ):
        if value is not None and value != "":
            out[key] = value
    # Zero IOPS/throughput means "the volume type's baseline": EC2 rejects an explicit 0 (upstream EmptyableToPtr).
    for key, amount in (("Iops", device.iops), ("Throughput", device.throughput)):
        if amount:
            out[key] = amount
    if device.volume_size is not None:
        # EBS sizes are whole GiB; round up so a request is never silently shrunk.
        out["VolumeSize"] = -(-device.volume_size // quantity.GI)
    return out


def connection_tracking(tracking: ec2nodeclass.ConnectionTracking | None) -> dict[str, int] | None:
    """ConnectionTrackingSpecification for an interface; None when no timeout is set (EC2 keeps its defaults)."""
    if tracking is None:
        return None
    out = {
        key: value
        for key, value in (
            ("TcpEstablishedTimeout", tracking.tcp_established_timeout),
            ("UdpStreamTimeout", tracking.udp_stream_timeout),
            ("UdpTimeout", tracking.udp_timeout),
        )
        if value is not None
    }
    return out or None


def cpu_options(options: ec2nodeclass.CPUOptions | None) -> dict[str, str] | None:
    """CpuOptions, or None when nothing is asked (an empty object would still be a field EC2 validates)."""
    if options is None or not options.nested_virtualization:
        return None
    return {"NestedVirtualization": options.nested_virtualization}


def enclave_options(options: ec2nodeclass.EnclaveOptions | None) -> dict[str, bool] | None:
    if options is None or options.enabled is None:
        return None
    return {"Enabled": options.enabled}


XEN = "xen"
"""The one hypervisor label of pre-Nitro types (Nitro types say "nitro"; bare-metal Nitro types say "")."""


def launchable(nodeclass: ec2nodeclass.EC2NodeClass, instance_type: types.InstanceType) -> bool:
    """False when the class asks for what the type cannot do at launch: connection-tracking timeouts exist on
    Nitro interfaces only, and EC2 refuses the whole request for a Xen type ("does not support configurable
    connection tracking"), so upstream drops those types for such a class."""
    if connection_tracking(nodeclass.spec.connection_tracking) is None:
        return True
    return instance_type.labels.get(labels.LABEL_INSTANCE_HYPERVISOR) != XEN


def _interface_type(kind: ec2nodeclass.NetworkInterfaceType) -> str:
    return "efa-only" if kind is ec2nodeclass.NetworkInterfaceType.EFA_ONLY else "interface"


def network_interfaces(spec: LaunchTemplateSpec) -> list[dict[str, Any]] | None:
    """The LT's interfaces, or None when the groups can sit on the instance (nothing interface-specific asked).

    Every interface carries the security groups. EFA interfaces follow upstream: one per network card, card 0 at
    device 0 and the others at device 1 so the primary card keeps precedence, each with the public-IP choice and
    prefix count (aws: launchtemplate.go generateNetworkInterfaces). Explicit `spec.networkInterfaces` put those two
    on the primary interface (card 0, device 0) only, where EC2 accepts them. Connection-tracking timeouts go on
    every interface that carries IP traffic (all but `efa-only`), as upstream applies them to each ENI it creates;
    asked alone, they make the primary interface explicit.
    """
    groups = list(spec.security_group_ids)
    tracking = connection_tracking(spec.connection_tracking)
    tracked: dict[str, Any] = {} if tracking is None else {"ConnectionTrackingSpecification": tracking}
    primary_extras: dict[str, Any] = {}
    if spec.associate_public_ip_address is not None:
        primary_extras["AssociatePublicIpAddress"] = spec.associate_public_ip_address
    if spec.ip_prefix_count is not None:
        primary_extras["Ipv6PrefixCount" if spec.ipv6 else "Ipv4PrefixCount"] = spec.ip_prefix_count
    # An IPv6 cluster's nodes take their primary IPv6 address as node IP (aws: launchtemplate.go ipCounts).
    ipv6: dict[str, Any] = {"PrimaryIpv6": True, "Ipv6AddressCount": 1} if spec.ipv6 else {}
    if spec.network_interfaces:
        out = []
        for nic in sorted(spec.network_interfaces, key=lambda n: (n.network_card_index, n.device_index)):
            entry: dict[str, Any] = {
                "NetworkCardIndex": nic.network_card_index,
                "DeviceIndex": nic.device_index,
                "InterfaceType": _interface_type(nic.interface_type),
                "Groups": groups,
            }
            if (nic.network_card_index, nic.device_index) == (0, 0):
                entry.update(primary_extras)
            if nic.interface_type is not ec2nodeclass.NetworkInterfaceType.EFA_ONLY:
                entry.update(tracked)
                entry.update(ipv6)
            out.append(entry)
        return out
    if spec.efa_count:
        return [
            {
                "NetworkCardIndex": card,
                "DeviceIndex": 0 if card == 0 else 1,
                "InterfaceType": "efa",
                "Groups": groups,
                # Upstream repeats these on every EFA interface; EC2 refuses a public IP on several interfaces,
                # which upstream leaves to the user's configuration.
                **primary_extras,
                **tracked,
                **ipv6,
            }
            for card in range(spec.efa_count)
        ]
    if not primary_extras and not tracked and not ipv6:
        return None
    return [{"DeviceIndex": 0, **primary_extras, "Groups": groups, **tracked, **ipv6}]


def build_launch_template_data(spec: LaunchTemplateSpec) -> dict[str, Any]:
    """LaunchTemplateData for CreateLaunchTemplate (user data base64-encoded as EC2 requires)."""
    meta_opts = spec.metadata_options
    data: dict[str, Any] = {
        "ImageId": spec.image_id,
        "UserData": base64.b64encode(spec.user_data.encode()).decode(),
        "IamInstanceProfile": {"Name": spec.instance_profile},
        "MetadataOptions": {
            "HttpEndpoint": meta_opts.http_endpoint,
            "HttpProtocolIpv6": meta_opts.http_protocol_ipv6,
            "HttpPutResponseHopLimit": meta_opts.http_put_response_hop_limit,
            "HttpTokens": meta_opts.http_tokens,
            # Fixed like upstream: an account default of "enabled" would expose tag keys with "/" that IMDS
            # cannot serve, failing the launch.
            "InstanceMetadataTags": "disabled",
        },
        "Monitoring": {"Enabled": spec.detailed_monitoring},
        # CreateFleet tags instances, volumes and the fleet; the interfaces it creates get theirs from here, and
        # the controller policy's request-tag conditions cover network interfaces too.
        "TagSpecifications": [{"ResourceType": "network-interface", "Tags": fleet.tag_list(spec.tags)}],
    }
    if spec.block_device_mappings:  # EC2 rejects an empty list
        data["BlockDeviceMappings"] = [
            {"DeviceName": m.device_name, **({"Ebs": _ebs(m.ebs)} if m.ebs else {})} for m in spec.block_device_mappings
        ]
    interfaces = network_interfaces(spec)
    if interfaces is None:
        data["SecurityGroupIds"] = list(spec.security_group_ids)
    else:
        data["NetworkInterfaces"] = interfaces  # the groups are on the interfaces then
    placement = {
        **({"GroupId": spec.placement_group_id} if spec.placement_group_id else {}),
        # Shared tenancy is EC2's default and stays unsaid, so existing templates keep their names.
        **({"Tenancy": spec.tenancy} if spec.tenancy and spec.tenancy != "default" else {}),
    }
    if placement:
        data["Placement"] = placement
    if spec.capacity_reservation_id:
        data["CapacityReservationSpecification"] = {
            "CapacityReservationPreference": "capacity-reservations-only",
            "CapacityReservationTarget": {"CapacityReservationId": spec.capacity_reservation_id},
        }
        if spec.capacity_block:
            data["InstanceMarketOptions"] = {"MarketType": "capacity-block"}
    for key, value in (
        ("CpuOptions", cpu_options(spec.cpu_options)),
        ("EnclaveOptions", enclave_options(spec.enclave_options)),
    ):
        if value is not None:
            data[key] = value
    return data


def launch_template_name(spec: LaunchTemplateSpec) -> str:
    canonical = json.dumps(
        {"data": build_launch_template_data(spec), "tags": dict(sorted(spec.tags.items()))},
        sort_keys=True,
        separators=(",", ":"),
    )
    return NAME_PREFIX + hashlib.sha256(canonical.encode()).hexdigest()[:32]


def build_create_launch_template_request(spec: LaunchTemplateSpec) -> dict[str, Any]:
    return {
        "LaunchTemplateName": launch_template_name(spec),
        "LaunchTemplateData": build_launch_template_data(spec),
        "TagSpecifications": [{"ResourceType": "launch-template", "Tags": fleet.tag_list(spec.tags)}],
    }
