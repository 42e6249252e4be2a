"""openAPIV3Schema of NodeClaim (karpenter.sh/v1), after core:pkg/apis/v1/nodeclaim.go and hack/validation/*.sh."""

from __future__ import annotations

from karpy.api.schema import common, core


def spec_schema() -> core.Schema:
    return core.obj(
        common.claim_spec_fields(
            nodepool=False,
            resources=core.obj(
                {"requests": core.resource_list("Requests describes the minimum required resources for the NodeClaim")},
                "Resources models the resource requirements for the NodeClaim to launch",
            ),
        ),
        "NodeClaimSpec describes the desired state of the NodeClaim",
        required=("nodeClassRef", "requirements"),
    )


def status_schema() -> core.Schema:
    return core.obj(
        {
            "allocatable": core.resource_list("Allocatable is the estimated allocatable capacity of the node"),
            "capacity": core.resource_list("Capacity is the estimated full capacity of the node"),
            # metav1.Condition's shape upstream: reason may be empty, message absent (a claim upstream wrote that
            # way must parse, or karpy would not see the instance behind it).
            "conditions": common.conditions(reason_required=False),
            "imageID": core.string("The image id of the instance that the NodeClaim launched"),
            "lastPodEventTime": {
                "description": "LastPodEventTime is updated with the last time a pod was scheduled or removed from "
                "the node.",
                "format": "date-time",
                "type": "string",
            },
            "nodeName": core.string("NodeName is the name of the corresponding node object"),
            "providerID": core.string("ProviderID of the corresponding node object"),
        },
        "NodeClaimStatus defines the observed state of NodeClaim",
    )


def schema() -> core.Schema:
    return common.root(
        "NodeClaim is the Schema for the NodeClaims API",
        spec_schema(),
        status_schema(),
        spec_required=True,
        spec_immutable=True,
    )
