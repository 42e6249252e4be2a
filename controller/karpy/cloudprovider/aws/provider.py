"""`AWSCloudProvider`: the `CloudProvider` protocol on EC2, built from one injected dependencies object."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from botocore import exceptions as botocore_exceptions

from karpy import clock as karpy_clock
from karpy.api import ec2nodeclass, labels, meta, nodeclaim, nodepool
from karpy.cloudprovider import catalog, ec2shapes, errors, overlay, tenancy, types
from karpy.cloudprovider.aws import (
    adoption,
    authorization,
    cache,
    clients,
    drift,
    ec2batch,
    error_codes,
    instances,
    instancetypes,
    launch,
    nodeclass,
    nodeclass_status,
    pricing,
    repair,
    tagging,
    templates,
    zonalshift,
)

log = logging.getLogger(__name__)

_AWS_ERRORS = (botocore_exceptions.BotoCoreError, botocore_exceptions.ClientError)


@dataclass(frozen=True, slots=True)
class Settings:
    """AWS provider settings (Helm `settings.*`, env vars of the same name in SCREAMING_SNAKE_CASE)."""

    cluster_name: str
    """EKS cluster name; tags, instance profile names and discovery key on it."""
    region: str
    """AWS region of the cluster."""
    cluster_endpoint: str = ""
    """API server URL for nodes; empty = from EKS DescribeCluster."""
    k8s_version: str = ""
    """Kubernetes minor version for AMI aliases ("1.31"); empty = from EKS DescribeCluster."""
    isolated_vpc: bool = False
    """No Pricing API access: use the bundled on-demand price table only."""
    vm_memory_overhead_percent: float = ec2shapes.DEFAULT_VM_MEMORY_OVERHEAD_PERCENT
    """Fraction of memory the hypervisor keeps (default 0.075)."""
    reserved_enis: int = 0
    """ENIs kept back from pod networking when computing ENI-limited max pods."""
    dry_run: bool = False
    """DRY_RUN: resolve node classes without creating or changing the instance profile a class asks for by role."""
    disable_dry_run: bool = False
    """DISABLE_DRY_RUN: accept node classes without the DryRun authorization calls."""
    batch_windows: ec2batch.Windows = ec2batch.UPSTREAM_WINDOWS
    """How long CreateFleet / DescribeInstances / TerminateInstances requests wait to be merged (upstream's)."""
    enable_zonal_shift: bool = False
    """ENABLE_ZONAL_SHIFT: follow the cluster's ARC zonal shifts (`zonalshift`)."""


@dataclass(frozen=True, slots=True)
class Dependencies:
    aws: clients.Clients
    clock: karpy_clock.Now
    settings: Settings
    nodeclass_lookup: Callable[[str], ec2nodeclass.EC2NodeClass | None]
    """Node class by name, from the controller's state cache (no API call)."""
    sleep: Callable[[float], Awaitable[None]]
    """The injected clock's sleep: the request batchers' windows wait on it."""
    nodeclaims: Callable[[], Iterable[nodeclaim.NodeClaim]]
    """NodeClaims from the controller's state cache: the registered ones get their instances tagged."""
    static_price: Callable[[str], float | None] = catalog.on_demand_price
    """Bundled on-demand $/h by instance type: the fallback and the isolated-VPC source."""
    eni_limits: Callable[[str], Mapping[str, Any] | None] = catalog.eni_limits
    """Bundled ENI/IP limits by instance type (pod density, pod-ENI branches)."""
    zonal_shifts: zonalshift.ZonalShifts | None = None
    """The cluster's ARC zonal shifts (ENABLE_ZONAL_SHIFT); None: never shifted, as upstream's no-op provider."""


class AWSCloudProvider:
    def __init__(self, deps: Dependencies) -> None:
        s = deps.settings
        self._deps = deps
        self._overlays: overlay.Overlays | None = None
        self.unavailable = cache.UnavailableOfferings(clock=deps.clock)
        self.zonal_shifts = deps.zonal_shifts or zonalshift.ZonalShifts(client=None, clock=deps.clock)
        self.pricing = pricing.PricingProvider(
            aws=deps.aws,
            region=s.region,
            clock=deps.clock,
            static_price=deps.static_price,
            isolated_vpc=s.isolated_vpc,
        )
        self.instance_type_provider = instancetypes.InstanceTypeProvider(
            aws=deps.aws,
            clock=deps.clock,
            settings=instancetypes.ShapeSettings(s.region, s.vm_memory_overhead_percent, s.reserved_enis),
            prices=self.pricing,
            unavailable=self.unavailable,
            eni_limits=deps.eni_limits,
            zonal_shifts=self.zonal_shifts,
        )
        self.resolver = nodeclass.NodeClassResolver(
            aws=deps.aws,
            clock=deps.clock,
            cluster_name=s.cluster_name,
            region=s.region,
            cluster_endpoint=s.cluster_endpoint,
            k8s_version=s.k8s_version,
            dry_run=s.dry_run,
            reservation_counts=self.unavailable.sync_reservations,
        )
        self.authorization = authorization.AuthorizationValidator(
            aws=deps.aws,
            clock=deps.clock,
            cluster_name=s.cluster_name,
            resolver=self.resolver,
            disabled=s.disable_dry_run,
        )
        self.launch_templates = templates.LaunchTemplates(aws=deps.aws, clock=deps.clock, cluster_name=s.cluster_name)
        self.batchers = ec2batch.EC2Batchers(
            aws=deps.aws,
            now=deps.clock,
            sleep=deps.sleep,
            windows=s.batch_windows,
            owned={f"{labels.TAG_CLUSTER_PREFIX}{s.cluster_name}": "owned"},
        )
        self._instances: dict[str, Mapping[str, Any]] = {}
        """Instances by id as last described or listed (`_describe`)."""
        self._labelled: dict[str, tuple[Sequence[types.InstanceType], Sequence[types.InstanceType]]] = {}
        """Per tenancy: the catalog last labelled with it (the instance-type provider's tuple, stable until it is
        rebuilt) and the labelled copy, so that 1,000 launches do not relabel 1,000 catalogs of ~800 types."""
        self.tagger = tagging.Tagger(
            aws=deps.aws,
            batchers=self.batchers,
            cluster_name=s.cluster_name,
            nodeclaims=deps.nodeclaims,
            sleep=deps.sleep,
            retagged=self._retagged,
            shifted=self.claim_in_shifted_zone,
        )
        self._launcher = launch.Launcher(
            create_fleet=self.batchers.create_fleet,
            clock=deps.clock,
            resolver=self.resolver,
            launch_templates=self.launch_templates,
            unavailable=self.unavailable,
            cluster_name=s.cluster_name,
            failures=deps.aws.calls,
        )

    @property
    def name(self) -> str:
        return "aws"

    def _forget_instance(self, instance_id: str) -> None:
        self._instances.pop(instance_id, None)

    def _retagged(self, instance_id: str, tags: Mapping[str, str]) -> None:
        """The cached instance with the tags just written, instead of a describe to learn them."""
        cached = self._instances.get(instance_id)
        if cached is not None:
            merged = {**clients.tags_of(cached), **tags}
            self._instances[instance_id] = {**cached, "Tags": [{"Key": k, "Value": v} for k, v in merged.items()]}

    def _zone_id(self, instance: Mapping[str, Any]) -> str:
        """The instance's zone id: EC2 says it in `Placement`; otherwise from its node class's subnets (emulators
        leave it out)."""
        placement = instance.get("Placement") or {}
        if placement.get("AvailabilityZoneId"):
            return str(placement["AvailabilityZoneId"])
        nc = self._nodeclass(clients.tags_of(instance).get(labels.TAG_EC2NODECLASS, ""))
        zone = placement.get("AvailabilityZone")
        return next((s.zone_id for s in nc.status.subnets if s.zone == zone), "") if nc is not None else ""

    def claim_in_shifted_zone(self, claim: nodeclaim.NodeClaim) -> bool:
        """Whether the claim's instance is in a zone shifted away from now (by its zone-id label, as launched)."""
        return self.zonal_shifts.is_shifted(claim.metadata.labels.get(labels.LABEL_ZONE_ID, ""))

    async def _in_shifted_zone(self, instance: Mapping[str, Any]) -> bool:
        if not self.zonal_shifts.enabled:
            return False
        await self.zonal_shifts.ensure_hydrated()
        return self.zonal_shifts.is_shifted(self._zone_id(instance))

    # --- node classes ---------------------------------------------------------------------------------------

    def _nodeclass(self, name: str) -> ec2nodeclass.EC2NodeClass | None:
        return self._deps.nodeclass_lookup(name)

    async def reconcile_nodeclass(self, nc: ec2nodeclass.EC2NodeClass) -> ec2nodeclass.EC2NodeClassStatus:
        """Resolve subnets, groups, AMIs and the instance profile; the status to write back."""
        try:
            found = await self.authorization.validate(nc, await self.resolver.resolve(nc))
        except _AWS_ERRORS as exc:
            raise error_codes.to_domain(exc, operation=f"resolving EC2NodeClass {nc.name}") from exc
        return nodeclass_status.compute_status(nc, found, now=self._deps.clock())

    async def finalize_nodeclass(self, nc: ec2nodeclass.EC2NodeClass) -> None:
        """Clean up what we created for a deleted node class: its launch templates and instance profile."""
        self.authorization.forget(nc.name)
        try:
            await self.launch_templates.delete_for_nodeclass(nc.name)
            await self.resolver.delete_instance_profile(nc)
        except _AWS_ERRORS as exc:
            raise error_codes.to_domain(exc, operation=f"finalizing EC2NodeClass {nc.name}") from exc

    # --- CloudProvider --------------------------------------------------------------------------------------

    async def instance_types(self, pool: nodepool.NodePool) -> Sequence[types.InstanceType]:
        nc = self._nodeclass(pool.template.node_class_ref.name)
        if nc is None or not nc.status.subnets:
            return ()
        return tenancy.for_pool(await self._instance_types(nc), pool.template.requirements)

    def use_kube_dns(self, address: str) -> None:
        """The kube-dns Service's address discovered at start: every node's cluster DNS unless its node class names
        one (aws: pkg/providers/amifamily/resolver.go defaultClusterDNS)."""
        self.resolver.use_kube_dns(address)

    def use_overlays(self, overlays: overlay.Overlays) -> None:
        """Launch at the prices NodeOverlays give the claim's NodePool (aws: pkg/cloudprovider/cloudprovider.go
        Create applies the overlay store before choosing), so the type chosen is the one the scheduler priced."""
        self._overlays = overlays

    async def _instance_types(self, nc: ec2nodeclass.EC2NodeClass) -> Sequence[types.InstanceType]:
        try:
            return await self.instance_type_provider.list(nc)
        except _AWS_ERRORS as exc:
            raise error_codes.to_domain(exc, operation="listing instance types") from exc

    async def create(self, claim: nodeclaim.NodeClaim, *, adopt: bool = False) -> nodeclaim.NodeClaim:
        nc = self._nodeclass(claim.spec.node_class_ref.name)
        if nc is None:
            raise errors.InsufficientCapacity(f"EC2NodeClass {claim.spec.node_class_ref.name!r} not found")
        if not nodeclass_status.is_ready(nc):
            raise errors.NodeClassNotReady(f"EC2NodeClass {nc.name} is not ready")
        wanted = tenancy.choose(claim.spec.requirements)

        async def listed() -> Sequence[types.InstanceType]:
            listed_types = self._for_tenancy(await self._instance_types(nc), wanted)
            if self._overlays is None:
                return listed_types
            return self._overlays.for_launch(claim.metadata.labels, listed_types)

        known = await listed()
        launched = await self._adopted(claim, known) if adopt else None
        if launched is None:
            launched = await self._launcher.launch(claim, nc, known, refresh=listed)
            # Before the lifecycle writes the providerID: the tag finds this instance again if that write is lost.
            await adoption.tag_claimed(self._deps.aws.ec2, launched.instance_id, claim.name)
        return launch.launched_claim(
            claim, nc, launched, provider_id=instances.provider_id(launched.zone, launched.instance_id)
        )

    async def _adopted(self, claim: nodeclaim.NodeClaim, known: Sequence[types.InstanceType]) -> launch.Launched | None:
        """The live instance tagged with the claim's name (`adoption`), as its launch would have answered."""
        try:
            found = await self.batchers.claimed_instance(claim.name)
        except _AWS_ERRORS as exc:  # not knowing is no licence to launch a second one: retried with backoff
            raise error_codes.to_create_error(exc, stage=errors.CreateErrorReason.FLEET) from exc
        if found is None:
            return None
        adopted = adoption.launched(found, known)
        if adopted is None:
            raise errors.CreateError(
                errors.CreateErrorReason.FLEET,
                f"instance {found['InstanceId']} of {claim.name} is of a type its node class does not offer:"
                f" {found.get('InstanceType')!r}",
            )
        self._instances[adopted.instance_id] = instances.slim(found)
        log.info(
            "adopted the instance an earlier launch made",
            extra={"nodeclaim": claim.name, "instance": adopted.instance_id},
        )
        return adopted

    def _for_tenancy(self, catalog: Sequence[types.InstanceType], wanted: str) -> Sequence[types.InstanceType]:
        """`tenancy.for_claim`, memoised on the identity of the catalog (see `_labelled`)."""
        memo = self._labelled.get(wanted)
        if memo is None or memo[0] is not catalog:
            memo = (catalog, tenancy.for_claim(catalog, wanted))
            self._labelled[wanted] = memo
        return memo[1]

    async def _describe(self, provider_id: str, *, fresh: bool = False) -> Mapping[str, Any]:
        """The instance behind `provider_id`, from the instance cache unless `fresh` (aws: instance.go Get: the
        cache is refreshed by every describe and by `list`, which also drops what EC2 no longer lists, so drift
        checks and gets of a known instance cost no call)."""
        try:
            instance_id = instances.parse_provider_id(provider_id)
        except instances.BadProviderID as exc:
            raise errors.NodeClaimNotFound(str(exc)) from exc
        cached = self._instances.get(instance_id)
        if cached is not None and (not fresh or await self._in_shifted_zone(cached)):
            # In a shifted zone even a fresh read is answered from the cache: no DescribeInstances retry storm
            # against the impaired zone (aws: pkg/providers/instance/instance.go Get).
            return cached
        try:
            found = await self.batchers.describe_instance(instance_id)
        except _AWS_ERRORS as exc:
            if error_codes.is_not_found(exc):
                self._instances.pop(instance_id, None)
            raise error_codes.to_domain(exc, operation=f"describing {instance_id}") from exc
        if found is None or found.get("State", {}).get("Name") in instances.GONE_STATES:
            self._instances.pop(instance_id, None)
            raise errors.NodeClaimNotFound(f"instance {instance_id} not found")
        slim = self._instances[instance_id] = instances.slim(found)
        return slim

    async def _to_claim(self, instance: Mapping[str, Any]) -> nodeclaim.NodeClaim:
        tags = clients.tags_of(instance)
        nc_name = tags.get(labels.TAG_EC2NODECLASS, "")
        nc = self._nodeclass(nc_name)
        it = None
        if nc is not None and nc.status.subnets:
            known = {t.name: t for t in await self._instance_types(nc)}
            it = known.get(str(instance.get("InstanceType", "")))
        ref = meta.NodeClassRef(group=labels.AWS_GROUP, kind="EC2NodeClass", name=nc_name)
        return instances.nodeclaim_from_instance(instance, instance_type=it, node_class_ref=ref)

    async def get(self, provider_id: str) -> nodeclaim.NodeClaim:
        return await self._to_claim(await self._describe(provider_id))

    async def list(self) -> Sequence[nodeclaim.NodeClaim]:
        try:
            reservations = await clients.paginate(
                self._deps.aws.ec2,
                "describe_instances",
                "Reservations",
                Filters=instances.cluster_filters(self._deps.settings.cluster_name),
            )
        except _AWS_ERRORS as exc:
            raise error_codes.to_domain(exc, operation="listing instances") from exc
        listed: dict[str, Mapping[str, Any]] = {
            str(i["InstanceId"]): instances.slim(i) for r in reservations for i in r.get("Instances") or ()
        }
        # What EC2 no longer lists leaves the cache with it, except in a shifted zone, where EC2 may not answer
        # for instances that still run (aws: instance.go List); those are not listed, as upstream does not.
        kept = {
            instance_id: cached
            for instance_id, cached in list(self._instances.items())  # a copy: the check may wait on ARC
            if instance_id not in listed and await self._in_shifted_zone(cached)
        }
        self._instances = {**kept, **listed}
        # A copy: a describe that finishes while `_to_claim` waits adds to the cache (seen at 10,000 pods).
        return [await self._to_claim(i) for i in list(listed.values())]

    async def delete(self, claim: nodeclaim.NodeClaim) -> None:
        instance = await self._describe(claim.status.provider_id, fresh=True)
        if await self._in_shifted_zone(instance):
            # Retried by the caller until the shift ends: no TerminateInstances into the impaired zone, and no
            # termination-failure count (aws: instance.go Delete).
            placement = instance.get("Placement") or {}
            raise zonalshift.ZoneShifted(
                f"instance {instance['InstanceId']} is in zonally shifted availability zone "
                f"{placement.get('AvailabilityZone', '')} ({self._zone_id(instance)}), skipping termination"
            )
        if instance.get("State", {}).get("Name") == "shutting-down":
            return
        try:
            await self.batchers.terminate_instance(str(instance["InstanceId"]))
        except _AWS_ERRORS as exc:
            placement = instance.get("Placement") or {}
            zone_id = placement.get("AvailabilityZoneId") or claim.metadata.labels.get(labels.LABEL_ZONE_ID, "")
            self._deps.aws.calls.record_termination_failure(
                zone=str(placement.get("AvailabilityZone", "")), zone_id=str(zone_id)
            )
            raise error_codes.to_domain(exc, operation=f"terminating {instance['InstanceId']}") from exc
        self._forget_instance(str(instance["InstanceId"]))  # a get from now on asks EC2 how far it got
        if reservation_id := instance.get("CapacityReservationId"):
            self.unavailable.reservation_released(str(reservation_id))

    async def is_drifted(self, claim: nodeclaim.NodeClaim) -> types.DriftReason | None:
        nc = self._nodeclass(claim.spec.node_class_ref.name)
        if nc is None:
            return None
        instance = await self._describe(claim.status.provider_id)
        facts = drift.InstanceFacts(
            image_id=str(instance.get("ImageId", "")),
            subnet_id=str(instance.get("SubnetId", "")),
            security_group_ids=instances.security_group_ids(instance),
            placement_group_id=str((instance.get("Placement") or {}).get("GroupId") or ""),
        )
        return drift.drift_reason(claim, nc, facts, placement_group_id=await self._placement_group_id(nc))

    def repair_policies(self) -> Sequence[types.RepairPolicy]:
        return repair.REPAIR_POLICIES

    async def _placement_group_id(self, nc: ec2nodeclass.EC2NodeClass) -> str | None:
        """The id of the group `nc` launches into today ("" for none), None when it cannot be told now."""
        if nc.spec.placement_group_selector is None:
            return ""
        try:
            group = await self.resolver.placement_group(nc)
        except _AWS_ERRORS as exc:
            log.warning("resolving the placement group of %s for drift failed: %s", nc.name, exc)
            return None
        return group.id if group is not None else None

    async def tag_registered(self, claim: nodeclaim.NodeClaim, *, node_name: str) -> None:
        """After registration: tag `Name` and `karpenter.sh/nodeclaim` (the only keys the policy allows then); the
        controller's `tagger` loop does this for every claim that registered."""
        named = dataclasses.replace(claim, status=dataclasses.replace(claim.status, node_name=node_name))
        if not await self.tagger.tag(named):
            raise errors.NodeClaimNotFound(f"instance of {claim.name} not tagged (gone, or EC2 refused)")
