"""karpenter_ec2nodeclasses_userdata_bytes, kept by the AWS provider against the moto server (aws:
providers/launchtemplate/launchtemplate.go): the size of the user data rendered for a node class's launch template,
measured before CreateLaunchTemplate, and forgotten when the node class's templates are deleted with it."""

from __future__ import annotations

import base64

import boto3
from tests import builders
from tests.cloudprovider.aws import test_provider
from tests.cloudprovider.aws.moto_fixtures import REGION


async def test_the_rendered_user_data_is_measured_per_node_class_and_forgotten_with_it(
    ready: test_provider.Ready,
) -> None:
    aws_provider, nodeclass = ready
    await aws_provider.create(builders.parsed_nodeclaim(requirements=test_provider.SMALL))
    ec2 = boto3.client("ec2", region_name=REGION)
    sizes = set()
    for template in ec2.describe_launch_templates()["LaunchTemplates"]:
        version = ec2.describe_launch_template_versions(LaunchTemplateId=template["LaunchTemplateId"])
        sizes.add(len(base64.b64decode(version["LaunchTemplateVersions"][0]["LaunchTemplateData"]["UserData"])))
    (size,) = sizes  # the claim's templates (one per launch group) share the class's user data
    assert aws_provider._deps.aws.calls.userdata_bytes() == {nodeclass.name: size}
    await aws_provider.launch_templates.delete_for_nodeclass(nodeclass.name)
    assert aws_provider._deps.aws.calls.userdata_bytes() == {}
