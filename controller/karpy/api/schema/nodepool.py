"""openAPIV3Schema of NodePool (karpenter.sh/v1), after core:pkg/apis/v1/nodepool.go and hack/validation/*.sh."""

from __future__ import annotations

from typing import Any, Final

from karpy.api import labels, nodepool
from karpy.api.schema import common, core

CONSOLIDATION_POLICIES: Final = ("WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced")  # upstream's enum order
DISRUPTION_REASONS: Final = tuple(r.value for r in nodepool.DisruptionReason)
BUDGET_NODES_PATTERN: Final = r"^((100|[0-9]{1,2})%|[0-9]+)$"
BUDGET_SCHEDULE_PATTERN: Final = (
    r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$"
)
BUDGET_DURATION_PATTERN: Final = r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$"


def _budgets() -> core.Schema:
    budget = core.obj(
        {
            "duration": core.string(
                "Duration determines how long a Budget is active since each Schedule hit. Only minutes and hours "
                "are accepted, as cron does not work in seconds. If omitted, the budget is always active.",
                pattern=BUDGET_DURATION_PATTERN,
            ),
            "nodes": core.string(
                "Nodes dictates the maximum number of NodeClaims owned by this NodePool that can be terminating "
                "at once.",
                pattern=BUDGET_NODES_PATTERN,
                default=nodepool.DEFAULT_BUDGET_NODES,
            ),
            "reasons": core.array(
                core.string("DisruptionReason defines valid reasons for disruption budgets.", enum=DISRUPTION_REASONS),
                "Reasons is a list of disruption methods that this budget applies to. If Reasons is not set, this "
                "budget applies to all methods.",
                max_items=50,
                list_type="set",
            ),
            "schedule": core.string(
                "Schedule specifies when a budget begins being active, following the upstream cronjob syntax "
                "(UTC). If omitted, the budget is always active.",
                pattern=BUDGET_SCHEDULE_PATTERN,
            ),
        },
        "Budget defines when Karpenter will restrict the number of Node Claims that can be terminating simultaneously.",
        required=("nodes",),
    )
    return core.array(
        budget,
        "Budgets is a list of Budgets. If there are multiple active budgets, Karpenter uses the most restrictive "
        "value. If left undefined, this will default to one budget with a value to 10%.",
        max_items=50,
        default=[{"nodes": nodepool.DEFAULT_BUDGET_NODES}],
        list_type="atomic",
        rules=(
            core.Rule(
                "self.all(x, has(x.schedule) == has(x.duration))",
                "'schedule' must be set with 'duration'",
                lambda budgets: all(("schedule" in b) == ("duration" in b) for b in budgets),
            ),
        ),
    )


def _disruption() -> core.Schema:
    return core.obj(
        {
            "budgets": _budgets(),
            "consolidateAfter": core.string(
                "ConsolidateAfter is the duration the controller will wait before attempting to terminate nodes "
                "that are underutilized.",
                pattern=core.DURATION_OR_NEVER_PATTERN,
            ),
            "consolidationPolicy": core.string(
                "ConsolidationPolicy describes which nodes Karpenter can disrupt through its consolidation algorithm.",
                enum=CONSOLIDATION_POLICIES,
                default=nodepool.ConsolidationPolicy.WHEN_EMPTY_OR_UNDERUTILIZED.value,
            ),
        },
        "Disruption contains the parameters that relate to Karpenter's disruption logic",
        required=("consolidateAfter",),
        default={"consolidateAfter": "0s"},
    )


def _template() -> core.Schema:
    spec = core.obj(
        common.claim_spec_fields(nodepool=True),
        "NodeClaimTemplateSpec describes the desired state of the NodeClaim in the Nodepool",
        required=("nodeClassRef", "requirements"),
    )
    metadata = core.obj(
        {
            "annotations": core.string_map("Annotations is an unstructured key value map.", map_type="granular"),
            "labels": common.template_labels(),
        }
    )
    return core.obj(
        {"metadata": metadata, "spec": spec},
        "Template contains the template of possibilities for the provisioning logic to launch a NodeClaim with.",
        required=("spec",),
    )


def _static_limits_only_nodes(spec: dict[str, Any]) -> bool:
    limits = spec.get("limits")
    return "replicas" not in spec or not limits or (len(limits) == 1 and labels.RESOURCE_NODES in limits)


def spec_schema() -> core.Schema:
    return core.obj(
        {
            "disruption": _disruption(),
            "limits": core.resource_list("Limits define a set of bounds for provisioning capacity."),
            "replicas": core.integer(
                "Replicas is the desired number of nodes for the NodePool (alpha, static capacity).",
                minimum=0,
                fmt="int64",
            ),
            "template": _template(),
            "weight": core.integer(
                "Weight is the priority given to the nodepool during scheduling.", minimum=1, maximum=100, fmt="int32"
            ),
        },
        "NodePoolSpec is the top level nodepool specification.",
        required=("template",),
        rules=(
            core.Rule(
                "has(self.replicas) == has(oldSelf.replicas)",
                "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) "
                "provisioning modes",
                None,
            ),
            core.Rule(
                "!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || (size(self.limits) == 1 && "
                "'nodes' in self.limits))",
                "only 'limits.nodes' is supported on static NodePools",
                _static_limits_only_nodes,
            ),
            core.Rule(
                "!has(self.replicas) || !has(self.weight)",
                "'weight' is not supported on static NodePools",
                lambda spec: "replicas" not in spec or "weight" not in spec,
            ),
        ),
    )


def status_schema() -> core.Schema:
    return core.obj(
        {
            "conditions": common.conditions(),
            "nodeClassObservedGeneration": core.integer(fmt="int64"),
            "nodes": core.integer("Nodes is the count of nodes associated with this NodePool", fmt="int64", default=0),
            "resources": core.resource_list("Resources is the list of resources that have been provisioned."),
        },
        "NodePoolStatus defines the observed state of NodePool",
    )


def schema() -> core.Schema:
    return common.root(
        "NodePool is the Schema for the NodePools API", spec_schema(), status_schema(), spec_required=True
    )
