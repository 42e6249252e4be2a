"""Launch template data and content-hash names (pure)."""

from __future__ import annotations

import base64
import dataclasses

from tests.cloudprovider.aws.builders import make_nodeclass

from karpy.api import ec2nodeclass, quantity
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
