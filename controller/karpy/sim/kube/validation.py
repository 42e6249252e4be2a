"""Admission of karpenter custom resources: the CRD schema and CEL rules, as the API server enforces them.

A `Defaulter` fills in the CRD schema's defaults, as the API server does before it stores an object. A `Validator`
sees the object a create/update would store (and the stored one on update) and returns the causes of a 422. The
defaults call `karpy.api.parse` and `karpy.api.schema`, the project's single source of truth for the CRD schemas
and CEL rules; NodeClaim adds the CRD's `self == oldSelf` rule on `spec`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from karpy.api import errors, labels, parse, validator
from karpy.api.schema import core, ec2nodeclass, nodeclaim, nodepool
from karpy.sim.kube import status

Validator = Callable[[Mapping[str, Any], Mapping[str, Any] | None], Sequence[status.Cause]]
Defaulter = Callable[[Mapping[str, Any]], dict[str, Any]]
Parser = Callable[[Mapping[str, Any]], object]

NODEPOOLS = f"{labels.GROUP}/{labels.VERSION}/nodepools"
NODECLAIMS = f"{labels.GROUP}/{labels.VERSION}/nodeclaims"
EC2NODECLASSES = f"{labels.AWS_GROUP}/{labels.VERSION}/ec2nodeclasses"
SPEC_IMMUTABLE = "spec is immutable"  # the message of the NodeClaim CRD's CEL rule


def from_parser(parser: Parser) -> Validator:
    """A validator that refuses what `parser` raises `errors.ValidationError` for, one cause per problem."""

    def validate(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> Sequence[status.Cause]:
        try:
            parser(obj)
        except errors.ValidationError as error:
            return [status.Cause(problem.path, problem.message) for problem in error.problems]
        return ()

    return validate


def with_immutable_spec(validator: Validator) -> Validator:
    """Adds the CEL rule `self == oldSelf` on `spec` (checked on update only, as CEL transition rules are)."""

    def validate(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> Sequence[status.Cause]:
        causes = list(validator(obj, old))
        if old is not None and obj.get("spec") != old.get("spec"):
            causes.append(status.Cause("spec", SPEC_IMMUTABLE))
        return causes

    return validate


def karpenter() -> dict[str, Validator]:
    """The validators of the three karpenter resources, keyed `group/version/plural`."""
    return {
        NODEPOOLS: from_parser(parse.nodepool),
        NODECLAIMS: with_immutable_spec(from_parser(parse.nodeclaim)),
        EC2NODECLASSES: from_parser(parse.ec2nodeclass),
    }


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
    }
