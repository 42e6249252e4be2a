"""Launch templates in EC2, cached by content-hash name; deleted when evicted and when their node class goes.

The cache starts from the templates this cluster already has (upstream's hydrateCache): a restarted controller
reuses them without a describe per name, and the ones nobody uses any more expire and are deleted, by the next
launch or by `run_janitor` (upstream's cache janitor), whichever comes first.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Final

from botocore import exceptions as botocore_exceptions

from karpy import clock as karpy_clock
from karpy.api import labels
from karpy.cloudprovider.aws import cache, clients, error_codes, launchtemplate

log = logging.getLogger(__name__)

JANITOR_INTERVAL: Final = 60.0
"""Seconds between sweeps for expired templates (upstream's go-cache cleanup interval, 1 min)."""


class LaunchTemplates:
    def __init__(
        self, *, aws: clients.Clients, clock: karpy_clock.Now, cluster_name: str, ttl: float = cache.DEFAULT_TTL
    ):
        self._aws = aws
        self._cluster_name = cluster_name
        self._cache: cache.TTLCache[str, str] = cache.TTLCache(ttl, clock=clock)
        self._hydrated = False
        self._ensuring = asyncio.Lock()

    async def hydrate(self) -> int:
        """Cache every template tagged with this cluster; returns how many. A failure is logged, not raised:
        the cache then fills one describe at a time, as without hydration."""
        self._hydrated = True
        try:
            found = await clients.paginate(
                self._aws.ec2,
                "describe_launch_templates",
                "LaunchTemplates",
                Filters=[{"Name": f"tag:{labels.TAG_EKS_CLUSTER_NAME}", "Values": [self._cluster_name]}],
                MaxResults=200,
            )
        except (botocore_exceptions.BotoCoreError, botocore_exceptions.ClientError) as exc:
            log.error("unable to hydrate the launch template cache: %s", exc)
            return 0
        for template in found:
            name = str(template["LaunchTemplateName"])
            self._cache.set(name, name)
        log.debug("hydrated launch template cache with %d templates", len(found))
        return len(found)

    async def ensure(self, spec: launchtemplate.LaunchTemplateSpec) -> str:
        """The template's name, creating it unless it exists; expired cache entries are cleaned up first.

        One at a time (upstream's EnsureAll holds the provider's lock): a burst of launches of one shape finds the
        template the first of them made instead of each describing and creating it."""
        name = launchtemplate.launch_template_name(spec)
        async with self._ensuring:
            return await self._ensure(spec, name)

    async def _ensure(self, spec: launchtemplate.LaunchTemplateSpec, name: str) -> str:
        if not self._hydrated:
            await self.hydrate()
        await self.evict_expired()
        if self._cache.get(name) is not None:
            return name
        try:
            await clients.call(self._aws.ec2, "describe_launch_templates", LaunchTemplateNames=[name])
        except botocore_exceptions.ClientError as exc:
            if error_codes.classify(exc) not in (
                error_codes.Kind.LAUNCH_TEMPLATE_NOT_FOUND,
                error_codes.Kind.NOT_FOUND,
            ):
                raise
            self._aws.calls.record_userdata(spec.tags.get(labels.TAG_EC2NODECLASS, ""), len(spec.user_data.encode()))
            try:
                await clients.call(
                    self._aws.ec2, "create_launch_template", **launchtemplate.build_create_launch_template_request(spec)
                )
            except botocore_exceptions.ClientError as create_exc:
                if error_codes.classify(create_exc) is not error_codes.Kind.ALREADY_EXISTS:
                    raise
        self._cache.set(name, name)
        return name

    def invalidate(self, name: str) -> None:
        self._cache.delete(name)

    async def evict_expired(self) -> list[str]:
        """Delete templates whose cache entry expired (upstream's cachedEvictedFunc); gone already is fine. Returns
        the names deleted. A delete EC2 refuses is logged and the name cached again, so the next sweep retries it
        instead of leaving the template behind (and a launch never fails over an old template)."""
        deleted = []
        for name, _ in self._cache.expire():
            try:
                await self._delete(name)
            except (botocore_exceptions.BotoCoreError, botocore_exceptions.ClientError) as exc:
                log.warning("deleting launch template %s failed, retrying on the next sweep: %s", name, exc)
                self._cache.set(name, name)
            else:
                deleted.append(name)
        return deleted

    async def run_janitor(
        self, *, sleep: Callable[[float], Awaitable[None]], interval: float = JANITOR_INTERVAL
    ) -> None:
        """Forever (cancel to stop): every `interval`, delete the templates unused for a TTL, so they do not outlive
        the last launch that needed them. `sleep` is the injected clock's."""
        while True:
            await sleep(interval)
            deleted = await self.evict_expired()
            if deleted:
                log.debug("deleted %d expired launch templates", len(deleted))

    async def _delete(self, name: str) -> None:
        try:
            await clients.call(self._aws.ec2, "delete_launch_template", LaunchTemplateName=name)
        except botocore_exceptions.ClientError as exc:
            if error_codes.classify(exc) not in (
                error_codes.Kind.LAUNCH_TEMPLATE_NOT_FOUND,
                error_codes.Kind.NOT_FOUND,
            ):
                raise

    async def delete_for_nodeclass(self, nodeclass: str) -> list[str]:
        """Delete every template this cluster made for `nodeclass`; returns their names."""
        found = await clients.paginate(
            self._aws.ec2,
            "describe_launch_templates",
            "LaunchTemplates",
            Filters=[
                {"Name": f"tag:{labels.TAG_EKS_CLUSTER_NAME}", "Values": [self._cluster_name]},
                {"Name": f"tag:{labels.TAG_EC2NODECLASS}", "Values": [nodeclass]},
            ],
        )
        names = sorted(str(t["LaunchTemplateName"]) for t in found)
        for name in names:
            self._cache.delete(name)
            await self._delete(name)
        self._aws.calls.forget_userdata(nodeclass)
        return names
