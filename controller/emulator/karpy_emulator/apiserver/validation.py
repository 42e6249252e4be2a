"""Admission of karpenter custom resources: the CRD schema and CEL rules, as the API server enforces them.

A `Defaulter` fills in the CRD schema's defaults, as the API server does before it stores an object. A `Validator`
sees the object a create/update would store (and the stored one on update) and returns the causes of a 422. Both
read `karpy.api.schema`, the project's single source of truth for the CRD schemas and CEL rules: `from_schema_rules`
enforces the schema and every CEL rule it pairs with a Python predicate (`karpy.api.validator`), `transitions`
evaluates the rules that read `oldSelf` (NodeClaim's `spec` immutability, NodePool's immutable
`nodeClassRef.group`/`kind`, ...) on update. Only the CRD: what upstream checks in its controller instead (a
NodePool's RuntimeValidate, an EC2NodeClass's kubelet fields), `karpy.api.parse` checks too, and the API server
stores such objects all the same, as a real one does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from karpy.api import capacitybuffer as api_capacitybuffer
from karpy.api import decoding, errors, labels, validator
from karpy.api import nodeoverlay as api_nodeoverlay
from karpy.api.schema import capacitybuffer, core, ec2nodeclass, nodeclaim, nodeoverlay, nodepool
from karpy_emulator.apiserver import api_status, transitions

Validator = Callable[[Mapping[str, Any], Mapping[str, Any] | None], Sequence[api_status.Cause]]
Defaulter = Callable[[Mapping[str, Any]], dict[str, Any]]

NODEPOOLS = f"{labels.GROUP}/{labels.VERSION}/nodepools"
NODECLAIMS = f"{labels.GROUP}/{labels.VERSION}/nodeclaims"
EC2NODECLASSES = f"{labels.AWS_GROUP}/{labels.VERSION}/ec2nodeclasses"
NODEOVERLAYS = f"{labels.GROUP}/{api_nodeoverlay.VERSION}/nodeoverlays"
CAPACITYBUFFERS = f"{api_capacitybuffer.API_VERSION}/{api_capacitybuffer.PLURAL}"


def from_schema_rules(schema: core.Schema) -> Validator:
    """A validator that refuses what the CRD schema and its CEL rules refuse, one cause per problem, plus malformed
    metadata (which the API server checks for every object)."""

    def validate(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> Sequence[api_status.Cause]:
        problems: list[errors.Problem] = []
        decoding.metadata(obj.get("metadata"), problems)
        _, found = validator.validate({k: v for k, v in obj.items() if k not in ("metadata",)}, schema)
        problems += [p for p in found if p.path not in ("apiVersion", "kind")]
        return [api_status.Cause(problem.path, problem.message) for problem in problems]

    return validate


def all_of(*validators: Validator) -> Validator:
    """A validator that reports the causes of every one of `validators`, in order."""

    def validate(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> Sequence[api_status.Cause]:
        return [cause for each in validators for cause in each(obj, old)]

    return validate


def karpenter() -> dict[str, Validator]:
    """The validators of the custom resources, keyed `group/version/plural`."""
    return {
        NODEPOOLS: _crd(nodepool.schema()),
        NODECLAIMS: _crd(nodeclaim.schema()),
        EC2NODECLASSES: _crd(ec2nodeclass.schema()),
        NODEOVERLAYS: _crd(nodeoverlay.schema()),
        CAPACITYBUFFERS: _crd(capacitybuffer.schema()),
    }


def _crd(schema: core.Schema) -> Validator:
    return all_of(from_schema_rules(schema), transitions.checker(schema))


def from_schema(schema: core.Schema) -> Defaulter:
    """The object with the schema's defaults applied (metadata untouched; problems are left to the validator)."""

    def default(obj: Mapping[str, Any]) -> dict[str, Any]:
        body = {k: v for k, v in obj.items() if k != "metadata"}
        defaulted, _ = validator.validate(body, schema)
        if not isinstance(defaulted, dict):
            return dict(obj)
        return {**defaulted, "metadata": obj["metadata"]} if "metadata" in obj else defaulted

    return default


def karpenter_defaults() -> dict[str, Defaulter]:
    return {
        NODEPOOLS: from_schema(nodepool.schema()),
        NODECLAIMS: from_schema(nodeclaim.schema()),
        EC2NODECLASSES: from_schema(ec2nodeclass.schema()),
        NODEOVERLAYS: from_schema(nodeoverlay.schema()),
        CAPACITYBUFFERS: from_schema(capacitybuffer.schema()),
    }
