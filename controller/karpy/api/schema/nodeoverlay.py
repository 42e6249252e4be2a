"""openAPIV3Schema of NodeOverlay (karpenter.sh/v1alpha1), after core:pkg/apis/v1alpha1/nodeoverlay.go as the AWS
chart ships it (charts/karpenter-crd/templates/karpenter.sh_nodeoverlays.yaml)."""

from __future__ import annotations

from typing import Any, Final

from karpy.api import labels
from karpy.api.schema import common, core

OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte")
PRICE_PATTERN: Final = r"^\d+(\.\d+)?$"
PRICE_ADJUSTMENT_PATTERN: Final = r"^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$"
_STANDARD: Final = ("cpu", "memory", "ephemeral-storage", "pods")
# The AWS labels an overlay may select on: the provider's instance-type labels as its CRD lists them, which leaves
# out the labels of reservations, placement groups and tenancy that NodePools may also name.
AWS_ALLOWED: Final = tuple(
    key
    for key in common.AWS_ALLOWED
    if key
    not in (
        labels.LABEL_CAPACITY_RESERVATION_ID,
        labels.LABEL_CAPACITY_RESERVATION_INTERRUPTIBLE,
        labels.LABEL_CAPACITY_RESERVATION_TYPE,
        labels.LABEL_INSTANCE_TENANCY,
        labels.LABEL_PLACEMENT_GROUP_ID,
        labels.LABEL_PLACEMENT_GROUP_PARTITION,
    )
)


def _has_values_when(operator: str) -> core.Rule:
    def check(reqs: list[dict[str, Any]]) -> bool:
        return all(len(r.get("values", [])) != 0 for r in reqs if r.get("operator") == operator)

    return core.Rule(
        f"self.all(x, x.operator == '{operator}' ? x.values.size() != 0 : true)",
        f"requirements with operator '{operator}' must have a value defined",
        check,
    )


def _numeric_single(reqs: list[dict[str, Any]]) -> bool:
    for r in reqs:
        if r.get("operator") in ("Gt", "Lt", "Gte", "Lte"):
            values = r.get("values", [])
            number = common.cel_int(values[0]) if len(values) == 1 else None
            if number is None or number < 0:
                return False
    return True


def requirements() -> core.Schema:
    item = core.obj(
        {
            "key": common.requirement_key(nodepool_restricted=False, aws_allowed=AWS_ALLOWED),
            "operator": core.string("Represents a key's relationship to a set of values.", enum=OPERATORS),
            "values": common.requirement_values(),
        },
        "A node selector requirement is a selector that contains values, a key, an operator that relates the key "
        "and values.",
        required=("key", "operator"),
    )
    return core.array(
        item,
        "requirements constrain when this NodeOverlay is applied during scheduling simulations.",
        max_items=100,
        list_type="atomic",
        rules=(
            _has_values_when("NotIn"),
            _has_values_when("In"),
            core.Rule(
                "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte')"
                " ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
                "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value",
                _numeric_single,
            ),
        ),
    )


def spec_schema() -> core.Schema:
    capacity = core.string_map(
        "Capacity adds extended resources only, and does not replace any existing resources.",
        values=core.quantity(),
        rules=(
            core.Rule(
                "self.all(x, !(x in [" + ", ".join(f"'{r}'" for r in _STANDARD) + "]))",
                "invalid resource restricted",
                lambda value: not set(value) & set(_STANDARD),
            ),
        ),
    )
    return core.obj(
        {
            "capacity": capacity,
            "price": core.string(
                "Price specifies amount for an instance types that match the specified labels.",
                pattern=PRICE_PATTERN,
            ),
            "priceAdjustment": core.string(
                "PriceAdjustment specifies the price change for matching instance types: a fixed price modifier "
                "(-0.5, +1.2) or a percentage modifier (+10%, -15%).",
                pattern=PRICE_ADJUSTMENT_PATTERN,
            ),
            "requirements": requirements(),
            "weight": core.integer(
                "Weight defines the priority of this NodeOverlay when overriding node attributes.",
                minimum=1,
                maximum=10000,
                fmt="int32",
            ),
        },
        required=("requirements",),
        rules=(
            core.Rule(
                "!has(self.price) || !has(self.priceAdjustment)",
                "cannot set both 'price' and 'priceAdjustment'",
                lambda spec: "price" not in spec or "priceAdjustment" not in spec,
            ),
        ),
    )


def status_schema() -> core.Schema:
    return core.obj(
        {"conditions": common.conditions()},
        "NodeOverlayStatus defines the observed state of NodeOverlay",
    )


def schema() -> core.Schema:
    return common.root("", spec_schema(), status_schema(), spec_required=True)
