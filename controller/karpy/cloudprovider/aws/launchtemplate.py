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

from karpy.api import ec2nodeclass, quantity
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
        ("Iops", device.iops),
        ("Throughput", device.throughput),
        ("VolumeType", device.volume_type),
        ("KmsKeyId", device.kms_key_id),
        ("SnapshotId", device.snapshot_id),
        ("VolumeInitializationRate", device.volume_initialization_rate),
    ):
        if value is not None and value != "":
            out[key] = value
    if device.volume_size is not None:
        # EBS sizes are whole GiB; round up so a request is never silently shrunk.
        out["VolumeSize"] = -(-device.volume_size // quantity.GI)
    return out


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
        },
        "Monitoring": {"Enabled": spec.detailed_monitoring},
        "BlockDeviceMappings": [
            {"DeviceName": m.device_name, **({"Ebs": _ebs(m.ebs)} if m.ebs else {})} for m in spec.block_device_mappings
        ],
    }
    if spec.associate_public_ip_address is None:
        data["SecurityGroupIds"] = list(spec.security_group_ids)
    else:
        # A public-IP choice must be made on the interface, which then carries the groups.
        data["NetworkInterfaces"] = [
            {
                "DeviceIndex": 0,
                "AssociatePublicIpAddress": spec.associate_public_ip_address,
                "Groups": list(spec.security_group_ids),
            }
        ]
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
