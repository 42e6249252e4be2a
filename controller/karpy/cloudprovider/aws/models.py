"""The AWS operations the controller calls, and botocore service models cut down to them.

A botocore client keeps its service's whole model for the life of the process (botocore/loaders.py
`Loader.load_service_model` is `instance_cache`d): EC2's has 830 operations and 4,400 shapes, 6.9 MB live even
without its documentation (`karpy.cloudprovider.aws.sessions`), of which the controller calls 17 operations. A model
pruned by `prune` keeps those operations and the shapes they reach (input, output, errors, and every shape below
them), plus every exception shape, which botocore turns into `client.exceptions` classes; the rest is dropped as the
file is parsed. A client then has no method for an operation that was dropped, so `CALLED` must name every operation
the controller calls: tests/cloudprovider/aws/test_models.py derives that list from the product's code and fails when
one is missing here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

CALLED: Final[Mapping[str, frozenset[str]]] = {
    "ec2": frozenset(
        {
            "CreateFleet",
            "CreateLaunchTemplate",
            "CreateTags",
            "DeleteLaunchTemplate",
            "DescribeCapacityReservations",
            "DescribeImages",
            "DescribeInstanceStatus",
            "DescribeInstanceTypeOfferings",
            "DescribeInstanceTypes",
            "DescribeInstances",
            "DescribeLaunchTemplates",
            "DescribePlacementGroups",
            "DescribeSecurityGroups",
            "DescribeSpotPriceHistory",
            "DescribeSubnets",
            "RunInstances",
            "TerminateInstances",
        }
    ),
    "ssm": frozenset({"GetParameter"}),
    "iam": frozenset(
        {
            "AddRoleToInstanceProfile",
            "CreateInstanceProfile",
            "DeleteInstanceProfile",
            "GetInstanceProfile",
            "RemoveRoleFromInstanceProfile",
            "TagInstanceProfile",
        }
    ),
    "pricing": frozenset({"GetProducts"}),
    "sqs": frozenset({"DeleteMessage", "GetQueueUrl", "ReceiveMessage"}),
    "eks": frozenset({"DescribeCluster"}),
    "sts": frozenset({"GetCallerIdentity"}),
    "arc-zonal-shift": frozenset({"GetManagedResource"}),
}
"""Per botocore service name, the operations (as the model names them) the controller calls."""

ENDPOINT_PREFIXES: Final = frozenset({"ec2", "ssm", "iam", "api.pricing", "sqs", "eks", "sts", "arc-zonal-shift"})
"""The `endpointPrefix` of each service of `CALLED`: the keys botocore's endpoint data (endpoints.json) has them
under, and by which a client resolves its endpoint and signing scope (botocore/args.py passes the model's
`endpoint_prefix` to `EndpointResolver.construct_endpoint`)."""


def prune_endpoints(data: dict[str, Any]) -> dict[str, Any]:
    """botocore's endpoint data (endpoints.json: per partition, its regions and defaults and ~400 services, 4.1 MB
    live) with only the services of `ENDPOINT_PREFIXES` (0.2 MB); partitions, regions and defaults are kept, so any
    other service still resolves by its partition's defaults."""
    partitions = [
        {**partition, "services": {k: v for k, v in partition["services"].items() if k in ENDPOINT_PREFIXES}}
        for partition in data["partitions"]
    ]
    return {**data, "partitions": partitions}


def _references(shape: Mapping[str, Any]) -> Iterator[str]:
    """The shapes one shape names: a structure's members, a list's member, a map's key and value."""
    for member in (shape.get("members") or {}).values():
        yield member["shape"]
    for part in ("member", "key", "value"):
        if part in shape:
            yield shape[part]["shape"]


def prune(model: dict[str, Any], operations: frozenset[str]) -> dict[str, Any]:
    """`model` (a parsed `service-2` file) with only `operations`, the shapes they reach and the exception shapes.
    An operation of `operations` the model does not have is left out, as botocore would have no method for it."""
    kept = {name: op for name, op in model["operations"].items() if name in operations}
    shapes: dict[str, Any] = model["shapes"]
    pending = [name for name, shape in shapes.items() if shape.get("exception")]
    for op in kept.values():
        pending.extend(op[part]["shape"] for part in ("input", "output") if part in op)
        pending.extend(error["shape"] for error in op.get("errors") or ())
    reached: set[str] = set()
    while pending:
        name = pending.pop()
        if name not in reached:
            reached.add(name)
            pending.extend(_references(shapes[name]))
    return {**model, "operations": kept, "shapes": {name: s for name, s in shapes.items() if name in reached}}
