"""Resolving an EC2NodeClass against EC2, SSM and IAM: subnets, security groups, AMIs, instance profile.

The describe calls live here; turning their results into a status is `nodeclass_status.compute_status` (pure).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from botocore import exceptions as botocore_exceptions

from karpy import clock as karpy_clock
from karpy.api import ec2nodeclass, labels, meta
from karpy.cloudprovider.aws import (
    amis,
    cache,
    clients,
    error_codes,
    fleet,
    kubelet,
    nodeclass_status,
    placement,
    reservations,
    selectors,
)
from karpy.cloudprovider.aws import cluster as aws_cluster

log = logging.getLogger(__name__)

_AWS_ERRORS = (botocore_exceptions.BotoCoreError, botocore_exceptions.ClientError)
_Candidate = tuple[Mapping[str, Any], tuple[meta.NodeSelectorRequirement, ...]]
"""A described image and the requirements it serves."""


def instance_profile_name(*, cluster_name: str, region: str, nodeclass: str) -> str:
    """`<cluster>_<hash(region + node class)>` like upstream, within IAM's 128-character limit."""
    digest = int(hashlib.sha256(f"{region}{nodeclass}".encode()).hexdigest()[:15], 16)
    return f"{cluster_name}_{digest}"[:128]


def instance_profile_tags(*, cluster_name: str, region: str, nodeclass: str) -> dict[str, str]:
    """Exactly the tags the controller policy's instance-profile statements require."""
    return {
        f"{labels.TAG_CLUSTER_PREFIX}{cluster_name}": "owned",
        labels.TAG_EKS_CLUSTER_NAME: cluster_name,
        labels.TAG_EC2NODECLASS: nodeclass,
        labels.LABEL_REGION: region,
    }


class NodeClassResolver:
    def __init__(
        self,
        *,
        aws: clients.Clients,
        clock: karpy_clock.Now,
        cluster_name: str,
        region: str,
        cluster_endpoint: str = "",
        k8s_version: str = "",
        dry_run: bool = False,
        reservation_counts: Callable[[Mapping[str, int]], None],
    ) -> None:
        self._aws = aws
        self._reservation_counts = reservation_counts
        """Told each fresh describe's `AvailableInstanceCount`s (the provider's reservation availability)."""
        self._clock = clock
        self._cluster_name = cluster_name
        self._region = region
        self._endpoint = cluster_endpoint
        self._k8s_version = k8s_version
        self._dry_run = dry_run
        self._cluster: cache.TTLCache[str, aws_cluster.ClusterInfo] = cache.TTLCache(
            cache.INSTANCE_PROFILE_TTL, clock=clock
        )
        self._kube_dns_ip = ""
        self._ssm: cache.TTLCache[str, str] = cache.TTLCache(cache.SSM_TTL, clock=clock)
        self._subnets: cache.TTLCache[str, tuple[fleet.Subnet, ...]] = cache.TTLCache(cache.DEFAULT_TTL, clock=clock)
        # Addresses claimed per subnet by launches since it was last described (aws: subnet provider inflightIPs).
        self._inflight: dict[str, int] = {}
        # A 1-tuple, so that "no such group" is cached too.
        self._placement: cache.TTLCache[str, tuple[placement.PlacementGroup | None]] = cache.TTLCache(
            cache.DEFAULT_TTL, clock=clock
        )
        # Keyed by selector with upstream's TTLs (1 min; instance profiles 15 min). The status refresh runs once a
        # minute, so each periodic refresh still describes afresh; what the caches absorb is the reconcile that a
        # class's own status write triggers, and classes that share selectors.
        self._groups: cache.TTLCache[str, tuple[ec2nodeclass.SecurityGroupStatus, ...]] = cache.TTLCache(
            cache.DEFAULT_TTL, clock=clock
        )
        self._images: cache.TTLCache[str, tuple[_Candidate, ...]] = cache.TTLCache(cache.DEFAULT_TTL, clock=clock)
        self._reservations: cache.TTLCache[str, tuple[Mapping[str, Any], ...]] = cache.TTLCache(
            cache.DEFAULT_TTL, clock=clock
        )
        self._profiles: cache.TTLCache[tuple[str, str, str], str] = cache.TTLCache(
            cache.INSTANCE_PROFILE_TTL, clock=clock
        )

    async def cluster(self) -> aws_cluster.ClusterInfo:
        cached = self._cluster.get("cluster")
        if cached is None:
            described = (await clients.call(self._aws.eks, "describe_cluster", name=self._cluster_name))["cluster"]
            cached = aws_cluster.cluster_info(
                described,
                name=self._cluster_name,
                endpoint=self._endpoint,
                version=self._k8s_version,
                kube_dns_ip=self._kube_dns_ip,
            )
            self._cluster.set("cluster", cached)
        return cached

    def use_kube_dns(self, address: str) -> None:
        """The kube-dns address discovered at start (`karpy.wiring.startup`), in every `cluster()` from now on."""
        self._kube_dns_ip = address
        self._cluster.clear()

    # --- subnets and security groups ------------------------------------------------------------------------

    async def subnets(self, nodeclass: ec2nodeclass.EC2NodeClass, *, fresh: bool = False) -> tuple[fleet.Subnet, ...]:
        key = repr(nodeclass.spec.subnet_selector_terms)
        cached = None if fresh else self._subnets.get(key)
        if cached is None:
            terms = nodeclass.spec.subnet_selector_terms
            found = await self._describe(
                "describe_subnets", "Subnets", [{"Filters": selectors.subnet_filters(t)} for t in terms]
            )
            cached = tuple(selectors.subnets_from_describe(found))
            self._subnets.set(key, cached)
            for subnet in cached:  # fresh counts already include what earlier launches took
                self._inflight.pop(subnet.id, None)
        return cached

    async def _describe(
        self, operation: str, result_key: str, queries: Iterable[Mapping[str, Any]]
    ) -> list[Mapping[str, Any]]:
        """One paginated EC2 describe per selector term (terms are ORed), the results concatenated."""
        found: list[Mapping[str, Any]] = []
        for query in queries:
            found += await clients.paginate(self._aws.ec2, operation, result_key, **query)
        return found

    def inflight_ips(self) -> dict[str, int]:
        return dict(self._inflight)

    def reserve_ips(self, subnet_ids: Iterable[str], count: int) -> None:
        for subnet_id in subnet_ids:
            self._inflight[subnet_id] = self._inflight.get(subnet_id, 0) + count

    def release_ips(self, subnet_ids: Iterable[str], count: int) -> None:
        for subnet_id in subnet_ids:
            left = self._inflight.get(subnet_id, 0) - count
            if left > 0:
                self._inflight[subnet_id] = left
            else:
                self._inflight.pop(subnet_id, None)

    async def security_groups(
        self, nodeclass: ec2nodeclass.EC2NodeClass
    ) -> tuple[ec2nodeclass.SecurityGroupStatus, ...]:
        key = repr(nodeclass.spec.security_group_selector_terms)
        cached = self._groups.get(key)
        if cached is None:
            queries = [
                {"Filters": selectors.security_group_filters(t)} for t in nodeclass.spec.security_group_selector_terms
            ]
            found = await self._describe("describe_security_groups", "SecurityGroups", queries)
            cached = tuple(selectors.security_groups_from_describe(found))
            self._groups.set(key, cached)
        return cached

    # --- placement group and capacity reservations ----------------------------------------------------------

    async def placement_group(self, nodeclass: ec2nodeclass.EC2NodeClass) -> placement.PlacementGroup | None:
        """The selected placement group (None when the node class selects none or EC2 knows no such group)."""
        selector = nodeclass.spec.placement_group_selector
        if selector is None:
            return None
        key = repr(selector)
        cached = self._placement.get(key)
        if cached is not None:
            return cached[0]
        try:
            answer = await clients.call(self._aws.ec2, "describe_placement_groups", **placement.query(selector))
            described = list(answer.get("PlacementGroups") or ())
        except botocore_exceptions.ClientError as exc:
            if error_codes.error_code(exc) not in ("InvalidPlacementGroup.Unknown", "InvalidGroup.NotFound"):
                raise
            described = []
        found = placement.from_describe(described)
        self._placement.set(key, (found,))
        return found

    async def capacity_reservations(
        self, nodeclass: ec2nodeclass.EC2NodeClass
    ) -> tuple[ec2nodeclass.CapacityReservationStatus, ...]:
        key = repr(nodeclass.spec.capacity_reservation_selector_terms)
        found = self._reservations.get(key)
        if found is None:
            queries = [reservations.query(t) for t in nodeclass.spec.capacity_reservation_selector_terms]
            found = tuple(await self._describe("describe_capacity_reservations", "CapacityReservations", queries))
            self._reservations.set(key, found)
            self._reservation_counts(reservations.available_counts(found))
        return reservations.from_describe(found, now=self._clock())

    # --- AMIs -----------------------------------------------------------------------------------------------

    async def _ssm_image_id(self, name: str) -> str | None:
        cached = self._ssm.get(name)
        if cached is None:
            try:
                response = await clients.call(self._aws.ssm, "get_parameter", Name=name)
            except botocore_exceptions.ClientError as exc:
                if error_codes.is_not_found(exc):
                    return None  # e.g. no neuron variant for this version: skip it
                raise
            cached = str(response["Parameter"]["Value"])
            self._ssm.set(name, cached)
        return cached

    async def amis(self, nodeclass: ec2nodeclass.EC2NodeClass) -> tuple[ec2nodeclass.AMIStatus, ...]:
        """Newest image per requirement set across all terms; raises `amis.AliasError` on a bad alias."""
        key = repr(nodeclass.spec.ami_selector_terms)
        candidates = self._images.get(key)
        if candidates is None:
            candidates = await self._image_candidates(nodeclass)
            self._images.set(key, candidates)
        return amis.newest_per_requirements(candidates, now=self._clock())

    async def _image_candidates(self, nodeclass: ec2nodeclass.EC2NodeClass) -> tuple[_Candidate, ...]:
        candidates: list[_Candidate] = []
        for term in nodeclass.spec.ami_selector_terms:
            if term.alias:
                version = (await self.cluster()).version
                wanted: dict[str, tuple[meta.NodeSelectorRequirement, ...]] = {}
                for param in amis.alias_parameters(term.alias, k8s_version=version):
                    image_id = await self._ssm_image_id(param.name)
                    if image_id:
                        wanted.setdefault(image_id, param.requirements)
                if wanted:
                    images = await clients.paginate(self._aws.ec2, "describe_images", "Images", ImageIds=sorted(wanted))
                    candidates += [(img, wanted[img["ImageId"]]) for img in images]
            elif term.ssm_parameter:
                image_id = await self._ssm_image_id(term.ssm_parameter)
                if image_id:
                    images = await clients.paginate(self._aws.ec2, "describe_images", "Images", ImageIds=[image_id])
                    candidates += [(img, amis.image_requirements(img)) for img in images]
            else:
                images = await clients.paginate(
                    self._aws.ec2, "describe_images", "Images", **selectors.image_query(term)
                )
                candidates += [(img, amis.image_requirements(img)) for img in images]
        return tuple(candidates)

    # --- instance profile -----------------------------------------------------------------------------------

    async def instance_profile(self, nodeclass: ec2nodeclass.EC2NodeClass) -> str:
        """The profile to launch with: the given one (checked to exist), or one created for `spec.role`."""
        key = _profile_key(nodeclass)
        cached = self._profiles.get(key)
        if cached is None:
            cached = await self._ensure_instance_profile(nodeclass)
            self._profiles.set(key, cached)
        return cached

    async def _ensure_instance_profile(self, nodeclass: ec2nodeclass.EC2NodeClass) -> str:
        spec = nodeclass.spec
        if spec.instance_profile:
            await clients.call(self._aws.iam, "get_instance_profile", InstanceProfileName=spec.instance_profile)
            return spec.instance_profile
        name = instance_profile_name(cluster_name=self._cluster_name, region=self._region, nodeclass=nodeclass.name)
        tags = instance_profile_tags(cluster_name=self._cluster_name, region=self._region, nodeclass=nodeclass.name)
        created = False
        try:
            profile = (await clients.call(self._aws.iam, "get_instance_profile", InstanceProfileName=name))[
                "InstanceProfile"
            ]
        except botocore_exceptions.ClientError as exc:
            if not error_codes.is_not_found(exc):
                raise
            if self._dry_run:
                log.info("dry run: would create instance profile", extra={"instance-profile": name, "role": spec.role})
                return name
            profile = (
                await clients.call(
                    self._aws.iam,
                    "create_instance_profile",
                    InstanceProfileName=name,
                    Tags=fleet.tag_list(tags),
                )
            )["InstanceProfile"]
            created = True
        tagged = created or tags.items() <= clients.tags_of(profile).items()
        roles = [r["RoleName"] for r in profile.get("Roles") or ()]
        role = spec.role.rsplit("/", 1)[-1]
        if self._dry_run:
            if roles != [role] or not tagged:
                log.info("dry run: would update instance profile", extra={"instance-profile": name, "role": role})
            return name
        if not tagged:
            await clients.call(
                self._aws.iam, "tag_instance_profile", InstanceProfileName=name, Tags=fleet.tag_list(tags)
            )
        if roles != [role]:
            for old in roles:
                await clients.call(
                    self._aws.iam, "remove_role_from_instance_profile", InstanceProfileName=name, RoleName=old
                )
            await clients.call(self._aws.iam, "add_role_to_instance_profile", InstanceProfileName=name, RoleName=role)
        return name

    async def delete_instance_profile(self, nodeclass: ec2nodeclass.EC2NodeClass) -> None:
        """Remove the profile created for `spec.role` (never a user-given one); absent is fine."""
        self._profiles.delete(_profile_key(nodeclass))  # a class re-created under this name creates it again
        if nodeclass.spec.instance_profile:
            return
        name = instance_profile_name(cluster_name=self._cluster_name, region=self._region, nodeclass=nodeclass.name)
        try:
            profile = (await clients.call(self._aws.iam, "get_instance_profile", InstanceProfileName=name))[
                "InstanceProfile"
            ]
            for role in profile.get("Roles") or ():
                await clients.call(
                    self._aws.iam,
                    "remove_role_from_instance_profile",
                    InstanceProfileName=name,
                    RoleName=role["RoleName"],
                )
            await clients.call(self._aws.iam, "delete_instance_profile", InstanceProfileName=name)
        except botocore_exceptions.ClientError as exc:
            if not error_codes.is_not_found(exc):
                raise

    # --- everything -----------------------------------------------------------------------------------------

    async def resolve(self, nodeclass: ec2nodeclass.EC2NodeClass) -> nodeclass_status.Resolution:
        """Look everything up; a failed lookup becomes a message on its condition, not an exception."""
        subnets = await self.subnets(nodeclass)
        groups = await self.security_groups(nodeclass)
        ami_error = ""
        found_amis: tuple[ec2nodeclass.AMIStatus, ...] = ()
        try:
            found_amis = await self.amis(nodeclass)
        except amis.AliasError as exc:
            ami_error = str(exc)
        except _AWS_ERRORS as exc:
            ami_error = f"resolving AMIs failed: {error_codes.error_code(exc)}"
        profile, profile_error = "", ""
        try:
            profile = await self.instance_profile(nodeclass)
        except _AWS_ERRORS as exc:
            profile_error = f"instance profile: {error_codes.error_code(exc)}: {exc}"
        group, group_error = None, ""
        try:
            group = await self.placement_group(nodeclass)
        except _AWS_ERRORS as exc:
            group_error = f"resolving the placement group failed: {error_codes.error_code(exc)}"
        found_reservations: tuple[ec2nodeclass.CapacityReservationStatus, ...] = ()
        try:
            found_reservations = await self.capacity_reservations(nodeclass)
        except _AWS_ERRORS as exc:
            # Reservations only add offerings; failing to list them must not stop launches elsewhere.
            log.warning("resolving capacity reservations of %s failed: %s", nodeclass.name, error_codes.error_code(exc))
        reason, problems = validation_problems(nodeclass)
        return nodeclass_status.Resolution(
            placement_group=group,
            placement_group_error=group_error,
            capacity_reservations=found_reservations,
            subnets=subnets,
            security_groups=groups,
            amis=found_amis,
            instance_profile=profile,
            ami_error=ami_error,
            instance_profile_error=profile_error,
            validation_reason=reason,
            validation_problems=problems,
        )


def _profile_key(nodeclass: ec2nodeclass.EC2NodeClass) -> tuple[str, str, str]:
    return (nodeclass.name, nodeclass.spec.instance_profile or "", nodeclass.spec.role or "")


TAG_VALIDATION_FAILED = "TagValidationFailed"


def validation_problems(nodeclass: ec2nodeclass.EC2NodeClass) -> tuple[str, tuple[str, ...]]:
    """(reason, messages) of the static checks the API schema cannot express: tags the IAM policy owns, and kubelet
    fields the class's AMI family would not apply. Any makes the class not Ready (nothing launches from it) while its
    existing nodes are left alone."""
    restricted = tuple(
        f"spec.tags[{key}]: tag key is reserved for karpy"
        for key in nodeclass.spec.tags
        if key in labels.RESTRICTED_TAG_KEYS or key.startswith(labels.TAG_CLUSTER_PREFIX) or not key
    )
    if restricted:
        return TAG_VALIDATION_FAILED, restricted
    return kubelet.problems(nodeclass.resolved_ami_family, nodeclass.spec.kubelet)
