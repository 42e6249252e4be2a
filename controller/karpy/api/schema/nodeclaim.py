"""openAPIV3Schema of NodeClaim (karpenter.sh/v1), after core:pkg/apis/v1/nodeclaim.go and hack/validation/*.sh."""

from __future__ import annotations

from karpy.api.schema import common, core


def spec_schema() -> core.Schema:
    return core.obj(
        {
            "expireAfter": core.string(
                common.EXPIRE_AFTER_DESCRIPTION, pattern=core.DURATION_OR_NEVER_PATTERN, default="720h"
            ),
            "nodeClassRef": common.node_class_ref(immutable_group_kind=False),
            "requirements": common.requirements(nodepool=False),
            "resources": core.obj(
                {"requests": core.resource_list("Requests describes the minimum required resources for the NodeClaim")},
                "Resources models the resource requirements for the NodeClaim to launch",
            ),
            "startupTaints": common.taints(
                "StartupTaints are taints that are applied to nodes upon startup which are expected to be removed "
                "automatically within a short period of time."
            ),
            "taints": common.taints("Taints will be applied to the NodeClaim's node."),
            "terminationGracePeriod": core.string(
                common.TERMINATION_GRACE_PERIOD_DESCRIPTION, pattern=core.DURATION_PATTERN
            ),
        },
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
