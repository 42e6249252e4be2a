"""Tag each instance with its node's name and its NodeClaim once the node registered (aws:
pkg/controllers/nodeclaim/tagging): `Name`, `karpenter.sh/nodeclaim` and `eks:eks-cluster-name`.

Not at launch: launches of one shape must send identical CreateFleet requests to be merged into one call
(`ec2batch`), so nothing of one NodeClaim goes into them. A pass describes the registered claims' instances not yet
known to be tagged (one merged DescribeInstances) and writes only the tags missing, at most one CreateTags a second
as upstream (CreateTags shares EC2's pool of mutating-call tokens with CreateFleet and TerminateInstances). What was
tagged is remembered in memory only: after a restart one describe per claim finds the tags already there.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Final

from botocore import exceptions as botocore_exceptions

from karpy.api import labels, nodeclaim
from karpy.cloudprovider.aws import clients, ec2batch, error_codes, instances

log = logging.getLogger(__name__)

CREATE_TAGS_INTERVAL: Final = 1.0
"""Seconds after each CreateTags call (upstream's one per second)."""
PASS_INTERVAL: Final = 5.0
"""Seconds between passes over the registered claims."""
_AWS_ERRORS = (botocore_exceptions.BotoCoreError, botocore_exceptions.ClientError)


class Tagger:
    def __init__(
        self,
        *,
        aws: clients.Clients,
        batchers: ec2batch.EC2Batchers,
        cluster_name: str,
        nodeclaims: Callable[[], Iterable[nodeclaim.NodeClaim]],
        sleep: Callable[[float], Awaitable[None]],
        retagged: Callable[[str, Mapping[str, str]], None],
        shifted: Callable[[nodeclaim.NodeClaim], bool] = lambda _: False,
    ) -> None:
        """`retagged(instance_id, tags)` after `tags` were written (the provider updates its cached instance);
        `shifted(claim)`: its instance is in a zonally shifted zone, where no describe or CreateTags is sent until
        the shift ends (aws: pkg/providers/instance/instance.go CreateTags)."""
        self._shifted = shifted
        self._aws = aws
        self._retagged = retagged
        self._batchers = batchers
        self._cluster_name = cluster_name
        self._nodeclaims = nodeclaims
        self._sleep = sleep
        self._tagged: set[str] = set()

    def wanted(self, claim: nodeclaim.NodeClaim) -> dict[str, str]:
        return {
            labels.TAG_NAME: claim.status.node_name,
            labels.TAG_NODECLAIM: claim.name,
            labels.TAG_EKS_CLUSTER_NAME: self._cluster_name,
        }

    async def run(self) -> None:
        """Forever (cancel to stop); the leader runs it, as it writes to EC2."""
        while True:
            await self.tag_pass()
            await self._sleep(PASS_INTERVAL)

    async def tag_pass(self) -> int:
        """Tag what registered since the last pass; returns how many instances were written to."""
        claims = [
            c
            for c in self._nodeclaims()
            if c.status.node_name and c.status.provider_id and c.metadata.deletion_timestamp is None
        ]
        self._tagged &= {c.name for c in claims}
        todo = [c for c in claims if c.name not in self._tagged and not self._shifted(c)]
        found = await asyncio.gather(*(self._describe(c) for c in todo))  # one merged DescribeInstances
        written = 0
        for claim, instance in zip(todo, found, strict=True):
            if instance is None:
                continue  # gone, or not described this time: garbage collection or the next pass sees to it
            outcome = await self._write_missing(claim, instance)
            if outcome is not None:
                self._tagged.add(claim.name)
                written += outcome
        return written

    async def tag(self, claim: nodeclaim.NodeClaim) -> bool:
        """Tag one registered claim's instance now; whether it carries the tags afterwards."""
        instance = await self._describe(claim)
        return instance is not None and await self._write_missing(claim, instance) is not None

    async def _write_missing(self, claim: nodeclaim.NodeClaim, instance: Mapping[str, Any]) -> bool | None:
        """Whether tags had to be written; None when writing them failed."""
        have = clients.tags_of(instance)
        missing = {k: v for k, v in self.wanted(claim).items() if k not in have}
        if missing and not await self._create_tags(str(instance["InstanceId"]), missing):
            return None
        return bool(missing)

    async def _describe(self, claim: nodeclaim.NodeClaim) -> dict[str, Any] | None:
        try:
            return await self._batchers.describe_instance(instances.parse_provider_id(claim.status.provider_id))
        except instances.BadProviderID:
            return None
        except _AWS_ERRORS as exc:
            if not error_codes.is_not_found(exc):
                log.warning("describing the instance of %s for tagging failed: %s", claim.name, exc)
            return None

    async def _create_tags(self, instance_id: str, tags: dict[str, str]) -> bool:
        try:
            await clients.call(
                self._aws.ec2,
                "create_tags",
                Resources=[instance_id],
                Tags=[{"Key": k, "Value": v} for k, v in sorted(tags.items())],
            )
        except _AWS_ERRORS as exc:
            log.warning("tagging instance %s failed, retrying on the next pass: %s", instance_id, exc)
            return False
        finally:
            await self._sleep(CREATE_TAGS_INTERVAL)
        self._retagged(instance_id, tags)
        return True
