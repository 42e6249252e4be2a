"""NodeOverlays at launch against moto: the AWS provider chooses among a claim's types at the prices the overlays
give its NodePool (aws: pkg/cloudprovider/cloudprovider.go Create), and asks EC2 for a prioritized fleet whose
overrides carry those prices (aws: pkg/providers/instance/types.go WithOverlay); a claim of a pool the overlays
have not been evaluated for is not launched."""

from __future__ import annotations

import dataclasses

import pytest
from tests import builders

from karpy.api import ec2nodeclass, labels, nodeoverlay, parse
from karpy.cloudprovider import errors, overlay
from karpy.cloudprovider.aws import provider

Ready = tuple[provider.AWSCloudProvider, ec2nodeclass.EC2NodeClass]
TYPES = builders.requirement(labels.LABEL_INSTANCE_TYPE, "In", "m5.large", "m5.xlarge")
ON_DEMAND = builders.requirement(labels.LABEL_CAPACITY_TYPE, "In", "on-demand")


def _dear_m5_large() -> tuple[overlay.Overlays, nodeoverlay.NodeOverlay]:
    dear = parse.nodeoverlay(
        {
            "apiVersion": "karpenter.sh/v1alpha1",
            "kind": "NodeOverlay",
            "metadata": {"name": "dear"},
            "spec": {
                "requirements": [{"key": labels.LABEL_INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]}],
                "price": "50",
            },
        }
    )
    return overlay.Overlays(), dear


async def test_a_launch_takes_the_overlaid_prices(ready: Ready) -> None:
    aws_provider, _ = ready
    fleets: list[dict[str, object]] = []
    aws_provider._deps.aws.ec2.meta.events.register(
        "provide-client-params.ec2.CreateFleet",
        lambda params, **_: None if params.get("DryRun") else fleets.append(params),
    )
    overlays, dear = _dear_m5_large()
    aws_provider.use_overlays(overlays)
    pool = builders.parsed_nodepool(requirements=[])
    listed = await aws_provider.instance_types(pool)
    overlays.store = overlay.evaluate([dear], [pool], {pool.name: listed}).store

    standalone = builders.parsed_nodeclaim("standalone", requirements=(TYPES, ON_DEMAND))
    standalone = dataclasses.replace(standalone, metadata=dataclasses.replace(standalone.metadata, labels={}))
    plain = await aws_provider.create(standalone)
    assert plain.metadata.labels[labels.LABEL_INSTANCE_TYPE] == "m5.large"  # no pool: list prices, the cheaper one
    with pytest.raises(errors.UnevaluatedNodePool):
        await aws_provider.create(builders.parsed_nodeclaim("waiting", pool="unseen", requirements=(TYPES, ON_DEMAND)))
    fleets.clear()

    created = await aws_provider.create(builders.parsed_nodeclaim("overlaid", requirements=(TYPES, ON_DEMAND)))
    assert created.metadata.labels[labels.LABEL_INSTANCE_TYPE] == "m5.xlarge"
    (request,) = fleets
    assert request["OnDemandOptions"] == {"AllocationStrategy": "prioritized"}
    priorities = {
        o["InstanceType"]: o["Priority"]
        for config in request["LaunchTemplateConfigs"]  # type: ignore[attr-defined]
        for o in config["Overrides"]
    }
    assert priorities["m5.large"] == 50.0
    assert priorities["m5.xlarge"] < 50.0
