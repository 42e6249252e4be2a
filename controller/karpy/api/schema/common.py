"""Schema parts shared by NodePool and NodeClaim: requirements, taints, nodeClassRef and label-domain rules."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

from karpy.api import labels
from karpy.api.schema import core

# In the order upstream's CRD lists them (core: NodeSelectorRequirementWithMinValues' enum marker).
OPERATORS: Final = ("Gte", "Lte", "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
TAINT_EFFECTS: Final = labels.TAINT_EFFECTS

# Since upstream v1.10 only the karpenter.sh and karpenter.k8s.aws domains and kubernetes.io/hostname are closed to
# requirement keys and template labels (core hack/validation/requirements.sh and labels.sh, aws
# hack/validation/requirements.sh and labels.sh); kubernetes.io and k8s.io keys are the user's.
_KARPENTER_SH_ALLOWED: Final = (labels.LABEL_CAPACITY_TYPE, labels.LABEL_NODEPOOL)
# AWS labels a user may select on (aws hack/validation/requirements.sh): the provider's well-known labels.
AWS_ALLOWED: Final = tuple(
    sorted(k for k in labels.WELL_KNOWN_LABELS if k.split("/", 1)[0] == labels.AWS_GROUP and "/" in k)
)

REASON_PATTERN: Final = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
"""A condition reason (operatorpkg status.Condition)."""

_DOMAIN = re.compile(r"^([^/]+)")
_INT = re.compile(r"^[+-]?[0-9]+$")


def domain(key: str) -> str:
    """CEL `key.find("^([^/]+)")`: the text before the first "/" (the whole key without one), "" if none."""
    match = _DOMAIN.search(key)
    return match.group(1) if match else ""


def cel_int(value: Any) -> int | None:
    """CEL `int(string)`: a base-10 int64, else None (an evaluation error, which rejects the object)."""
    if not isinstance(value, str) or not _INT.match(value):
        return None
    number = int(value)
    return number if -(2**63) <= number < 2**63 else None


def _cel_list(items: Iterable[str]) -> str:
    return ", ".join(f'"{item}"' for item in items)


def _karpenter_sh_ok(key: str) -> bool:
    return key in _KARPENTER_SH_ALLOWED or not domain(key).endswith("karpenter.sh")


def _aws_ok(key: str, allowed: tuple[str, ...] = AWS_ALLOWED) -> bool:
    return key in allowed or not domain(key).endswith(labels.AWS_GROUP)


def _key_rules(
    *, nodepool_restricted: bool, over_map: bool, aws_allowed: tuple[str, ...] = AWS_ALLOWED
) -> tuple[core.Rule, ...]:
    """Label-key rules, either on one key (`self` is the key) or over a map's keys (`self.all(x, ...)`), in
    upstream's order."""

    def wrap(expr: str) -> str:
        return f"self.all(x, {expr.replace('self', 'x')})" if over_map else expr

    def lift(check: core.Predicate) -> core.Predicate:
        if over_map:
            return lambda value: all(check(k) for k in value)
        return check

    find = 'self.find("^([^/]+)")'
    rules = [
        core.Rule(
            wrap(f'self in [{_cel_list(_KARPENTER_SH_ALLOWED)}] || !{find}.endsWith("karpenter.sh")'),
            'label domain "karpenter.sh" is restricted',
            lift(_karpenter_sh_ok),
        ),
    ]
    if nodepool_restricted:
        rules.append(
            core.Rule(
                wrap(f'self != "{labels.LABEL_NODEPOOL}"'),
                f'label "{labels.LABEL_NODEPOOL}" is restricted',
                lift(lambda key: key != labels.LABEL_NODEPOOL),
            )
        )
    rules += [
        core.Rule(
            wrap(f'self != "{labels.LABEL_HOSTNAME}"'),
            f'label "{labels.LABEL_HOSTNAME}" is restricted',
            lift(lambda key: key != labels.LABEL_HOSTNAME),
        ),
        core.Rule(
            wrap(f'self in [{_cel_list(aws_allowed)}] || !{find}.endsWith("{labels.AWS_GROUP}")'),
            f'label domain "{labels.AWS_GROUP}" is restricted',
            lift(lambda key: _aws_ok(key, aws_allowed)),
        ),
    ]
    return tuple(rules)


def _requirement_list_rules() -> tuple[core.Rule, ...]:
    def in_has_values(reqs: list[dict[str, Any]]) -> bool:
        return all(len(r.get("values", [])) != 0 for r in reqs if r.get("operator") == "In")

    def numeric_single(reqs: list[dict[str, Any]]) -> bool:
        for r in reqs:
            if r.get("operator") in ("Gt", "Lt", "Gte", "Lte"):
                values = r.get("values", [])
                number = cel_int(values[0]) if len(values) == 1 else None
                if number is None or number < 0:
                    return False
        return True

    def min_values_satisfied(reqs: list[dict[str, Any]]) -> bool:
        return all(
            len(r.get("values", [])) >= r["minValues"] for r in reqs if r.get("operator") == "In" and "minValues" in r
        )

    return (
        core.Rule(
            "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
            "requirements with operator 'In' must have a value defined",
            in_has_values,
        ),
        core.Rule(
            "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? "
            "(x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
            "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
            numeric_single,
        ),
        core.Rule(
            "self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)",
            "requirements with 'minValues' must have at least that many values specified in the 'values' field",
            min_values_satisfied,
        ),
    )


def requirement_key(*, nodepool_restricted: bool, aws_allowed: tuple[str, ...] = AWS_ALLOWED) -> core.Schema:
    """A requirement's `key`: a qualified name outside the restricted label domains."""
    return core.string(
        "The label key that the selector applies to.",
        max_length=316,
        pattern=core.QUALIFIED_NAME_PATTERN,
        rules=_key_rules(nodepool_restricted=nodepool_restricted, over_map=False, aws_allowed=aws_allowed),
    )


def requirement_values() -> core.Schema:
    """A requirement's `values`. Upstream's CRD puts the label-value length and pattern on the array itself. String
    keywords do not apply to an array (JSON Schema; the API server's validator skips them), so the values are
    checked at runtime (`semantics.requirements`), as upstream's RuntimeValidate does."""
    return core.array(
        core.string(),
        "An array of string values.",
        list_type="atomic",
        array_string_keywords={"maxLength": 63, "pattern": core.LABEL_VALUE_PATTERN},
    )


def requirements(*, nodepool: bool) -> core.Schema:
    key = requirement_key(nodepool_restricted=nodepool)
    item = core.obj(
        {
            "key": key,
            "minValues": core.integer(
                "MinValues is the minimum number of unique values required to define the flexibility of the "
                "specific requirement.",
                minimum=1,
                maximum=50,
            ),
            "operator": core.string("Represents a key's relationship to a set of values.", enum=OPERATORS),
            "values": requirement_values(),
        },
        "A node selector requirement with min values.",
        required=("key", "operator"),
    )
    return core.array(
        item,
        "Requirements are layered with GetLabels and applied to every node.",
        max_items=100,
        list_type="atomic",
        rules=_requirement_list_rules(),
    )


def taints(description: str) -> core.Schema:
    item = core.obj(
        {
            "effect": core.string("The effect of the taint on pods that do not tolerate it.", enum=TAINT_EFFECTS),
            "key": core.string("The taint key.", min_length=1, pattern=core.QUALIFIED_NAME_PATTERN),
            "timeAdded": {
                "description": "The time the taint was added (NoExecute only).",
                "format": "date-time",
                "type": "string",
            },
            "value": core.string("The taint value.", pattern=core.QUALIFIED_NAME_PATTERN),
        },
        "The node this Taint is attached to has the effect on any pod that does not tolerate the Taint.",
        required=("effect", "key"),
    )
    return core.array(item, description, list_type="atomic")


def claim_spec_fields(*, nodepool: bool, **more: core.Schema) -> dict[str, core.Schema]:
    """The properties NodeClaimSpec and a NodePool's NodeClaimTemplateSpec share (core: pkg/apis/v1/nodeclaim.go,
    nodepool.go), plus `more`, in name order as upstream's generator writes them. `nodepool`: the template's rules
    (restricted requirement keys, an immutable nodeClassRef group and kind)."""
    fields = {
        "expireAfter": core.string(EXPIRE_AFTER_DESCRIPTION, pattern=core.DURATION_OR_NEVER_PATTERN, default="720h"),
        "nodeClassRef": node_class_ref(immutable_group_kind=nodepool),
        "requirements": requirements(nodepool=nodepool),
        "startupTaints": taints(
            "StartupTaints are taints that are applied to nodes upon startup which are expected to be removed "
            "automatically within a short period of time."
        ),
        "taints": taints("Taints will be applied to the NodeClaim's node."),
        "terminationGracePeriod": core.string(TERMINATION_GRACE_PERIOD_DESCRIPTION, pattern=core.DURATION_PATTERN),
        **more,
    }
    return dict(sorted(fields.items()))


def template_labels() -> core.Schema:
    return core.string_map(
        "Map of string keys and values that can be used to organize and categorize objects.",
        values=core.string(max_length=63, pattern=core.LABEL_VALUE_PATTERN),
        max_properties=100,
        map_type="atomic",
        rules=_key_rules(nodepool_restricted=True, over_map=True),
    )


def node_class_ref(*, immutable_group_kind: bool) -> core.Schema:
    def non_empty(field: str) -> core.Rule:
        return core.Rule("self != ''", f"{field} may not be empty", lambda value: value != "")

    transition = (
        (
            core.Rule("self.group == oldSelf.group", "nodeClassRef.group is immutable", None),
            core.Rule("self.kind == oldSelf.kind", "nodeClassRef.kind is immutable", None),
        )
        if immutable_group_kind
        else ()
    )
    return core.obj(
        {
            "group": core.string("API version of the referent", pattern=r"^[^/]*$", rules=(non_empty("group"),)),
            "kind": core.string("Kind of the referent", rules=(non_empty("kind"),)),
            "name": core.string("Name of the referent", rules=(non_empty("name"),)),
        },
        "NodeClassRef is a reference to an object that defines provider specific configuration",
        required=("group", "kind", "name"),
        rules=transition,
    )


TERMINATION_GRACE_PERIOD_DESCRIPTION: Final = (
    "TerminationGracePeriod is the maximum duration the controller will wait before forcefully deleting the pods "
    "on a node, measured from when deletion is first initiated."
)
EXPIRE_AFTER_DESCRIPTION: Final = (
    "ExpireAfter is the duration the controller will wait before terminating a node, measured from when the node "
    "is created."
)


def conditions(*, reason_required: bool = True, keyed: bool = True) -> core.Schema:
    """status.conditions as operatorpkg's status.Condition writes it: a map list keyed by type. NodeClaims take
    metav1.Condition's looser shape upstream (`reason_required=False`): reason may be empty, message absent.
    EC2NodeClass's upstream CRD does not key the list (`keyed=False`)."""
    condition = core.obj(
        {
            "lastTransitionTime": {
                "description": "lastTransitionTime is the last time the condition transitioned from one status to "
                "another.",
                "format": "date-time",
                "type": "string",
            },
            "message": core.string(
                "message is a human readable message indicating details about the transition.", max_length=32768
            ),
            "observedGeneration": core.integer(
                "observedGeneration represents the .metadata.generation that the condition was set based upon.",
                minimum=0,
                fmt="int64",
            ),
            "reason": core.string(
                "reason contains a programmatic identifier indicating the reason for the condition's last transition.",
                max_length=1024,
                min_length=1 if reason_required else None,
                pattern=REASON_PATTERN if reason_required else f"^({REASON_PATTERN[1:-1]}|)$",
            ),
            "status": core.string(
                "status of the condition, one of True, False, Unknown.", enum=("True", "False", "Unknown")
            ),
            "type": core.string(
                "type of condition in CamelCase or in foo.example.com/CamelCase.",
                max_length=316,
                pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
            ),
        },
        "Condition aliases the upstream type and adds additional helper methods",
        required=("lastTransitionTime", "message", "reason", "status", "type")
        if reason_required
        else ("lastTransitionTime", "status", "type"),
    )
    return core.array(
        condition,
        "Conditions contains signals for health and readiness",
        list_type="map" if keyed else None,
        list_map_keys=("type",) if keyed else (),
    )


def root(
    description: str,
    spec: core.Schema,
    status: core.Schema,
    *,
    spec_required: bool,
    spec_immutable: bool = False,
) -> core.Schema:
    """The top-level openAPIV3Schema: apiVersion, kind, metadata, spec, status."""
    if spec_immutable:
        rules = list(spec.get("x-kubernetes-validations", []))
        rules.append(core.Rule("self == oldSelf", "spec is immutable", None))
        spec = {**spec, "x-kubernetes-validations": rules}
    return core.obj(
        {
            "apiVersion": core.string("APIVersion defines the versioned schema of this representation of an object."),
            "kind": core.string("Kind is a string value representing the REST resource this object represents."),
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
        description,
        required=("spec",) if spec_required else (),
    )


def re_search(pattern: str, value: str) -> bool:
    """CEL `matches` (RE2, unanchored unless the pattern anchors itself)."""
    return re.search(pattern, value) is not None
