"""Admission of karpenter custom resources: the CRD schema and CEL rules, as the API server enforces them.

A `Defaulter` fills in the CRD schema's defaults, as the API server does before it stores an object. A `Validator`
sees the object a create/update would store (and the stored one on update) and returns the causes of a 422. The
defaults call `karpy.api.parse` and `karpy.api.schema`, the project's single source of truth for the CRD schemas
and CEL rules. `karpy.api.parse` enforces the schema and every CEL rule it pairs with a Python predicate;
`transitions` evaluates the rules that read `oldSelf` (NodeClaim's `spec` immutability, NodePool's immutable
`nodeClassRef.group`/`kind`, ...) on update.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from karpy.api import errors, labels, parse, validator
from karpy.api.schema import core, ec2nodeclass, nodeclaim, nodepool
from karpy.sim.kube import status, transitions

Validator = Callable[[Mapping[str, Any], Mapping[str, Any] | None], Sequence[status.Cause]]
Defaulter = Callable[[Mapping[str, Any]], dict[str, Any]]
Parser = Callable[[Mapping[str, Any]], object]

NODEPOOLS = f"{labels.GROUP}/{labels.VERSION}/nodepools"
NODECLAIMS = f"{labels.GROUP}/{labels.VERSION}/nodeclaims"
EC2NODECLASSES = f"{labels.AWS_GROUP}/{labels.VERSION}/ec2nodeclasses"


def from_parser(parser: Parser) -> Validator:
    """A validator that refuses what `parser` raises `errors.ValidationError` for, one cause per problem."""

    def validate(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> Sequence[status.Cause]:
        try:
            parser(obj)
        except errors.ValidationError as error:
            return [status.Cause(problem.path, problem.message) for problem in error.problems]
        return ()

    return validate


def all_of(*validators: Validator) -> Validator:
    """A validator that reports the causes of every one of `validators`, in order."""

    def validate(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> Sequence[status.Cause]:
        return [cause for each in validators for cause in each(obj, old)]

    return validate


def karpenter() -> dict[str, Validator]:
    """The validators of the three karpenter resources, keyed `group/version/plural`."""
    return {
        NODEPOOLS: all_of(from_parser(parse.nodepool), transitions.checker(nodepool.schema())),
        NODECLAIMS: all_of(from_parser(parse.nodeclaim), transitions.checker(nodeclaim.schema())),
        EC2NODECLASSES: all_of(from_parser(parse.ec2nodeclass), transitions.checker(ec2nodeclass.schema())),
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
