"""EC2NodeClass validation by authorization dry runs: CreateLaunchTemplate, CreateFleet and RunInstances with
DryRun=True, so a missing permission shows on `ValidationSucceeded` instead of as launch failures.

Runs only once the class resolved (subnets, security groups, AMIs, instance profile) and passed the static checks.
A verdict (success or an authorization failure) is cached for 30 minutes per node class and per everything the
calls depend on, so a class is not dry-run on every status refresh; DISABLE_DRY_RUN skips the calls and accepts
the class (aws: pkg/controllers/nodeclass/validation.go, pkg/cache/cache.go ValidationTTL).
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from botocore import exceptions as botocore_exceptions

from karpy import clock as karpy_clock
from karpy.api import ec2nodeclass, labels
from karpy.cloudprovider.aws import cache, clients, error_codes, fleet, launchtemplate, nodeclass_status, userdata
from karpy.cloudprovider.aws import cluster as aws_cluster
from karpy.cloudprovider.aws import nodeclass as aws_nodeclass

log = logging.getLogger(__name__)

VALIDATION_TTL: Final = 30 * 60.0
"""Seconds a verdict is kept (upstream's ValidationTTL)."""

CREATE_LAUNCH_TEMPLATE_FAILED: Final = "CreateLaunchTemplateAuthCheckFailed"
CREATE_FLEET_FAILED: Final = "CreateFleetAuthCheckFailed"
RUN_INSTANCES_FAILED: Final = "RunInstancesAuthCheckFailed"
USER_DATA_INVALID: Final = "UserDataInvalid"
CLUSTER_CIDR_UNRESOLVED: Final = "ClusterCIDRResolutionFailed"  # AL2023 while the service CIDR is unknown
"""ValidationSucceeded reasons, upstream's names."""

_MESSAGES: Final = {
    CREATE_LAUNCH_TEMPLATE_FAILED: "Controller isn't authorized to call ec2:CreateLaunchTemplate",
    CREATE_FLEET_FAILED: "Controller isn't authorized to call ec2:CreateFleet",
    RUN_INSTANCES_FAILED: "Controller isn't authorized to call ec2:RunInstances",
}
FALLBACK_TYPES: Final = {"amd64": "m5.large", "arm64": "m6g.large"}
"""The instance type each dry run names, by the architecture of the class's first AMI (upstream's fallback types)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """A cached outcome: reason "" is success."""

    reason: str = ""
    message: str = ""


class _Inconclusive(Exception):
    """EC2 does not know something the dry run names yet (an instance profile created a moment ago): no verdict."""


class _Unauthorized(Exception):
    def __init__(self, reason: str, exc: BaseException) -> None:
        super().__init__(reason)
        self.reason = reason
        self.message = f"{_MESSAGES[reason]}: {error_codes.error_code(exc)}: {_aws_message(exc)}"


class AuthorizationValidator:
    def __init__(
        self,
        *,
        aws: clients.Clients,
        clock: karpy_clock.Now,
        cluster_name: str,
        resolver: aws_nodeclass.NodeClassResolver,
        disabled: bool = False,
    ) -> None:
        self._aws = aws
        self._cluster_name = cluster_name
        self._resolver = resolver
        self._disabled = disabled
        self._verdicts: cache.TTLCache[tuple[str, str], Verdict] = cache.TTLCache(VALIDATION_TTL, clock=clock)

    async def validate(
        self, nc: ec2nodeclass.EC2NodeClass, found: nodeclass_status.Resolution
    ) -> nodeclass_status.Resolution:
        """`found` with the dry runs' verdict as its validation problem, when the class is far enough along to
        launch; a throttled or failing EC2 call raises (the reconcile is retried), it is never a verdict."""
        if found.validation_problems or not _resolved(found):
            return found
        tags = fleet.launch_tags(
            cluster_name=self._cluster_name, nodepool="", nodeclass=nc.name, user_tags=nc.spec.tags
        )
        key = (nc.name, _fingerprint(nc, found, tags))
        verdict = self._verdicts.get(key)
        if verdict is None:
            try:
                verdict = Verdict() if self._disabled else await self._dry_run(nc, found, tags)
            except _Inconclusive as exc:
                # Not cached: the next refresh asks again (upstream requeues on an instance profile not found yet).
                log.info("EC2NodeClass %s: authorization dry run inconclusive: %s", nc.name, exc)
                return found
            self._verdicts.set(key, verdict)
        if not verdict.reason:
            return found
        return _with_problem(found, verdict)

    def forget(self, name: str) -> None:
        """Drop a deleted class's verdicts (a class created again under the name is validated afresh)."""
        for key, _ in self._verdicts.items():
            if key[0] == name:
                self._verdicts.delete(key)

    async def _dry_run(
        self, nc: ec2nodeclass.EC2NodeClass, found: nodeclass_status.Resolution, tags: Mapping[str, str]
    ) -> Verdict:
        resolved = _as_resolved(nc, found)
        image = resolved.status.amis[0]
        arch = next((r.values[0] for r in image.requirements if r.key == labels.LABEL_ARCH and r.values), "amd64")
        instance_type = FALLBACK_TYPES.get(arch, FALLBACK_TYPES["amd64"])
        cluster = await self._resolver.cluster()
        try:
            text = userdata.render(
                resolved.resolved_ami_family,
                userdata.BootstrapOptions(
                    cluster_name=cluster.name,
                    cluster_endpoint=cluster.endpoint,
                    ca_bundle=cluster.ca_bundle,
                    cluster_cidr=cluster.service_cidr,
                    kubelet=aws_cluster.with_cluster_dns(nc.spec.kubelet, cluster),
                    user_data=nc.spec.user_data,
                    instance_store_policy=nc.spec.instance_store_policy,
                ),
            )
        except userdata.UserDataError as exc:
            return Verdict(USER_DATA_INVALID, str(exc))  # every launch would fail the same way
        except userdata.ClusterCIDRUnknown:
            return Verdict(CLUSTER_CIDR_UNRESOLVED, "Failed to detect the cluster CIDR")
        spec = dataclasses.replace(
            launchtemplate.nodeclass_spec(resolved, image_id=image.id, user_data=text, tags=tags), ipv6=cluster.ipv6
        )
        template = launchtemplate.build_create_launch_template_request(spec)
        try:
            await self._expect_dry_run(CREATE_LAUNCH_TEMPLATE_FAILED, "create_launch_template", **template)
            overrides = tuple(
                fleet.Override(instance_type=instance_type, subnet_id=s.id, zone=s.zone, price=0.0)
                for s in found.subnets
            )
            request = fleet.build_create_fleet_request(
                [fleet.LaunchTemplateOverrides(template["LaunchTemplateName"], overrides)],
                capacity_type=labels.CAPACITY_TYPE_ON_DEMAND,
                tags=tags,
                context=nc.spec.context,
            )
            await self._expect_dry_run(CREATE_FLEET_FAILED, "create_fleet", **request)
            await self._run_instances(spec, instance_type=instance_type, subnets=found.subnets, tags=tags)
        except _Unauthorized as exc:
            log.error("EC2NodeClass %s: %s", nc.name, exc.message)
            return Verdict(exc.reason, exc.message)
        return Verdict()

    async def _run_instances(
        self,
        spec: launchtemplate.LaunchTemplateSpec,
        *,
        instance_type: str,
        subnets: tuple[fleet.Subnet, ...],
        tags: Mapping[str, str],
    ) -> None:
        """RunInstances in each subnet until one is authorized; the first subnet's refusal is the verdict."""
        first: _Unauthorized | None = None
        for subnet in subnets:
            try:
                await self._expect_dry_run(
                    RUN_INSTANCES_FAILED,
                    "run_instances",
                    ImageId=spec.image_id,
                    InstanceType=instance_type,
                    MinCount=1,
                    MaxCount=1,
                    SubnetId=subnet.id,
                    SecurityGroupIds=list(spec.security_group_ids),
                    IamInstanceProfile={"Name": spec.instance_profile},
                    TagSpecifications=[
                        {"ResourceType": kind, "Tags": fleet.tag_list(tags)}
                        for kind in ("instance", "volume", "network-interface")
                    ],
                )
            except _Unauthorized as exc:
                first = first or exc
            else:
                return
        if first is not None:
            raise first

    async def _expect_dry_run(self, reason: str, operation: str, **params: Any) -> None:
        """Call `operation` with DryRun=True: DryRunOperation means authorized, an authorization error raises
        `_Unauthorized`. A template that does not exist yet (CreateFleet names the class's template before any
        launch made it) is past the authorization check, so it counts as authorized too."""
        try:
            await clients.call(self._aws.ec2, operation, DryRun=True, **params)
        except botocore_exceptions.ClientError as exc:
            kind = error_codes.classify(exc)
            if kind in (error_codes.Kind.DRY_RUN_SUCCEEDED, error_codes.Kind.LAUNCH_TEMPLATE_NOT_FOUND):
                return
            if kind is error_codes.Kind.UNAUTHORIZED:
                raise _Unauthorized(reason, exc) from exc
            if kind is error_codes.Kind.NOT_FOUND:
                raise _Inconclusive(f"{operation}: {error_codes.error_code(exc)}: {_aws_message(exc)}") from exc
            raise
        raise error_codes.AWSError(
            error_codes.Kind.UNKNOWN, "NoDryRunAnswer", f"{operation} with DryRun=True did not answer DryRunOperation"
        )


def _resolved(found: nodeclass_status.Resolution) -> bool:
    return bool(found.subnets and found.security_groups and found.amis and found.instance_profile) and not (
        found.ami_error or found.instance_profile_error
    )


def _as_resolved(nc: ec2nodeclass.EC2NodeClass, found: nodeclass_status.Resolution) -> ec2nodeclass.EC2NodeClass:
    """The class with what resolution found as its status (what a launch would read)."""
    return ec2nodeclass.EC2NodeClass(
        metadata=nc.metadata,
        spec=nc.spec,
        status=ec2nodeclass.EC2NodeClassStatus(
            security_groups=found.security_groups, amis=found.amis, instance_profile=found.instance_profile
        ),
    )


def _fingerprint(nc: ec2nodeclass.EC2NodeClass, found: nodeclass_status.Resolution, tags: Mapping[str, str]) -> str:
    """What the dry runs depend on (upstream's cacheKey: resolved status, spec, annotations, tags)."""
    parts = (
        found.subnets,
        found.security_groups,
        found.amis,
        found.instance_profile,
        nc.spec,
        sorted(nc.metadata.annotations.items()),
        sorted(tags.items()),
    )
    return hashlib.sha256(repr(parts).encode()).hexdigest()


def _with_problem(found: nodeclass_status.Resolution, verdict: Verdict) -> nodeclass_status.Resolution:
    return dataclasses.replace(found, validation_reason=verdict.reason, validation_problems=(verdict.message,))


def _aws_message(exc: BaseException) -> str:
    if isinstance(exc, botocore_exceptions.ClientError):
        return str(exc.response.get("Error", {}).get("Message", ""))
    return str(exc)
