"""An EC2NodeClass's AMI, subnet and security-group selector terms resolved read-only, by the resolver the
controller uses for the status (`nodeclass.NodeClassResolver`: describe calls and SSM reads, never a write), for
`karpy plan`, which receives it as a plain function and so stays free of AWS.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence

from botocore import exceptions as botocore_exceptions

from karpy import clock as karpy_clock
from karpy.api import ec2nodeclass
from karpy.cloudprovider import types
from karpy.cloudprovider.aws import amis, clients, nodeclass

_FAILURES = (botocore_exceptions.BotoCoreError, botocore_exceptions.ClientError, amis.AliasError)
"""What a lookup may fail with: AWS refusing or unreachable, no credentials, an alias no SSM parameter serves."""


def resolve(
    aws: clients.Clients,
    nodeclasses: Sequence[ec2nodeclass.EC2NodeClass],
    *,
    clock: karpy_clock.Now,
    region: str,
    cluster_name: str = "",
) -> dict[str, types.SelectorResolution]:
    """Each node class's selectors by name; a lookup that fails is that field's error, never an exception.
    `cluster_name` is for alias AMI terms (the cluster's Kubernetes version picks the SSM parameters)."""
    resolver = nodeclass.NodeClassResolver(
        aws=aws, clock=clock, cluster_name=cluster_name, region=region, reservation_counts=_no_reservations
    )
    return asyncio.run(_resolve_all(resolver, nodeclasses))


def _no_reservations(_counts: Mapping[str, int]) -> None:
    """`karpy plan` resolves AMI, subnet and security-group terms only: it never describes a capacity
    reservation, and keeps no provider whose reservation availability the counts would feed."""


async def _resolve_all(
    resolver: nodeclass.NodeClassResolver, nodeclasses: Sequence[ec2nodeclass.EC2NodeClass]
) -> dict[str, types.SelectorResolution]:
    return {nc.name: await _resolve(resolver, nc) for nc in nodeclasses}


async def _resolve(resolver: nodeclass.NodeClassResolver, nc: ec2nodeclass.EC2NodeClass) -> types.SelectorResolution:
    async def amis_of() -> frozenset[str]:
        return frozenset(a.id for a in await resolver.amis(nc))

    async def subnets_of() -> frozenset[str]:
        return frozenset(s.id for s in await resolver.subnets(nc))

    async def groups_of() -> frozenset[str]:
        return frozenset(g.id for g in await resolver.security_groups(nc))

    lookups: Mapping[types.SelectorField, Callable[[], Awaitable[frozenset[str]]]] = {
        types.SelectorField.AMI: amis_of,
        types.SelectorField.SUBNET: subnets_of,
        types.SelectorField.SECURITY_GROUP: groups_of,
    }
    ids: dict[types.SelectorField, frozenset[str]] = {}
    errors: dict[types.SelectorField, str] = {}
    for found, lookup in lookups.items():
        try:
            ids[found] = await lookup()
        except _FAILURES as exc:
            errors[found] = str(exc) or type(exc).__name__
    return types.SelectorResolution(ids, errors)
