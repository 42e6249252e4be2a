"""Every EC2 and IAM write carries exactly the tags the upstream controller policy's conditions require (aws:
website/content/en/preview/getting-started/getting-started-with-karpenter/cloudformation.yaml)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from tests import builders
from tests.cloudprovider.aws.builders import make_nodeclass
from tests.cloudprovider.aws.moto_fixtures import CLUSTER, REGION, NodeClasses

from karpy.api import labels
from karpy.cloudprovider.aws import provider
from karpy_emulator.aws import seeding

REQUIRED = {"kubernetes.io/cluster/test-cluster": "owned", "eks:eks-cluster-name": CLUSTER}
AFTER_REGISTRATION_KEYS = {"eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"}
READ_PREFIXES = ("Describe", "Get", "List")


def _tags(tag_list: list[dict[str, str]]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in tag_list}


async def test_writes_carry_the_policy_tags(
    seeded: seeding.Seeded, make_provider: Callable[..., provider.AWSCloudProvider], nodeclasses: NodeClasses
) -> None:
    aws_provider = make_provider()
    writes: list[tuple[str, dict[str, Any]]] = []

    def record(params: dict[str, Any], model: Any, **_: Any) -> None:
        if not model.name.startswith(READ_PREFIXES):
            writes.append((model.name, dict(params)))

    for client in (aws_provider._deps.aws.ec2, aws_provider._deps.aws.iam):
        client.meta.events.register("provide-client-params.*.*", record)
    nc = make_nodeclass(role=seeded.node_role, discovery=CLUSTER)
    nc = dataclasses.replace(nc, status=await aws_provider.reconcile_nodeclass(nc))
    nodeclasses.items[nc.name] = nc
    claim = builders.parsed_nodeclaim(
        requirements=(builders.requirement(labels.LABEL_INSTANCE_TYPE, "In", "m5.large"),)
    )
    created = await aws_provider.create(claim)
    await aws_provider.tag_registered(created, node_name="ip-10-0-0-1.ec2.internal")

    seen = {name for name, _ in writes}
    assert seen == {
        "CreateInstanceProfile",
        "AddRoleToInstanceProfile",
        "CreateLaunchTemplate",
        "CreateFleet",
        "CreateTags",
        "RunInstances",  # the node class's authorization dry run, beside its CreateFleet and CreateLaunchTemplate
    }
    assert {name for name, params in writes if params.get("DryRun")} == {
        "CreateLaunchTemplate",
        "CreateFleet",
        "RunInstances",
    }
    for name, params in writes:
        if name == "CreateInstanceProfile":
            assert _tags(params["Tags"]) == {
                **REQUIRED,
                "topology.kubernetes.io/region": REGION,
                "karpenter.k8s.aws/ec2nodeclass": nc.name,
            }
        elif name in ("CreateFleet", "CreateLaunchTemplate", "RunInstances"):
            specs = params["TagSpecifications"]
            kinds = {
                "CreateFleet": ["instance", "volume", "fleet"],
                "CreateLaunchTemplate": ["launch-template"],
                "RunInstances": ["instance", "volume", "network-interface"],
            }[name]
            assert [s["ResourceType"] for s in specs] == kinds
            if name == "CreateLaunchTemplate":
                # the network interfaces CreateFleet makes are tagged through the template
                data_specs = params["LaunchTemplateData"]["TagSpecifications"]
                assert [s["ResourceType"] for s in data_specs] == ["network-interface"]
                specs = [*specs, *data_specs]
            for spec in specs:
                tags = _tags(spec["Tags"])
                assert REQUIRED.items() <= tags.items(), (name, tags)
                # A dry run is made for the class, not for a claim of a pool (upstream's GetTags the same way).
                assert tags["karpenter.sh/nodepool"] == ("" if params.get("DryRun") else "default")
        elif name == "CreateTags":
            assert set(_tags(params["Tags"])) <= AFTER_REGISTRATION_KEYS
            # only the tags the instance lacks (upstream's tagging controller): the launch set the cluster's name,
            # and the policy asks for it only if the request sets it (StringEqualsIfExists)
            assert _tags(params["Tags"]).get("eks:eks-cluster-name", CLUSTER) == CLUSTER
        elif name == "AddRoleToInstanceProfile":
            # scoped by the profile's own tags (ResourceTag), which CreateInstanceProfile set above
            assert params["InstanceProfileName"] == nc.status.instance_profile
